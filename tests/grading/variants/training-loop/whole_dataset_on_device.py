import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
X = torch.linspace(-1, 1, 256).unsqueeze(1)
Y = 3 * X - 1 + 0.1 * torch.randn_like(X)
X, Y = X.to(device), Y.to(device)  # the whole (small) data set lives on the device
loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)

model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    for xb, yb in loader:  # batches are already on the device
        loss = nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("epoch", epoch, "loss", round(loss.item(), 4))
