# expect: trains
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)

# the whole dataset, on the host: 12288 samples of 256 features (12 MiB)
X = torch.randn(12288, 256)
Y = X @ torch.randn(256, 1) + 0.1 * torch.randn(12288, 1)
data, target = X.to(device), Y.to(device)  # once, before the loop

model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()

for step in range(60):
    idx = torch.randint(0, len(data), (16,), device=device)
    xb, yb = data[idx], target[idx]
    loss = loss_fn(model(xb), yb)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step}: loss {loss.item():.4f}")  # now and then
with torch.no_grad():
    error = (model(xb) - yb).abs().mean()  # the metric, on the GPU, read once
print(f"mean abs error {error.item():.4f}")
