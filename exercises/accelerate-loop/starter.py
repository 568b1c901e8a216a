import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

accelerator = Accelerator()  # this process's GPU, the process group, the world: from accelerate launch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)

# A toy regression problem: y = 3x - 1, plus a little noise; and 50 held-out points to measure it on.
X = torch.linspace(-1, 1, 128).unsqueeze(1)
Y = 3 * X - 1 + 0.1 * torch.randn_like(X)
loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)
X_val = torch.linspace(-1, 1, 50).unsqueeze(1)
val_loader = DataLoader(TensorDataset(X_val, 3 * X_val - 1), batch_size=16)

model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(5):
    model.train()
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    errors = []
    with torch.no_grad():
        for xb, yb in val_loader:
            xb, yb = xb.to(device), yb.to(device)
            errors.append((model(xb) - yb) ** 2)
    errors = torch.cat(errors)
    print(f"epoch {epoch}: validation mse {errors.mean().item():.4f} over {len(errors)} points")

torch.save(model.state_dict(), "model.pt")
