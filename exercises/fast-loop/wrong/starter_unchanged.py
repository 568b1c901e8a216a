# expect: fast_step
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)

# the whole dataset, on the host: 12288 samples of 256 features (12 MiB)
X = torch.randn(12288, 256)
Y = X @ torch.randn(256, 1) + 0.1 * torch.randn(12288, 1)

model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()

for step in range(60):
    data, target = X.to(device), Y.to(device)  # the whole dataset, copied every step
    idx = torch.randint(0, len(data), (256,), device=device)
    xb, yb = data[idx], target[idx]
    loss = loss_fn(model(xb), yb)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")  # a sync every step
    error = (model(xb).detach().cpu() - yb.cpu()).abs().mean()  # a metric, on the host
print(f"mean abs error {error:.4f}")
