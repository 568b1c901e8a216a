# expect: picks_device
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)

# A toy regression problem: y = 3x - 1, plus a little noise.
X = torch.linspace(-1, 1, 128).unsqueeze(1)
Y = 3 * X - 1 + 0.1 * torch.randn_like(X)
loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)

model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1)).cuda()  # once, before the loop (on a GPU machine)
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(5):
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)  # every batch, inputs and targets
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")  # a Python number, not a tensor
