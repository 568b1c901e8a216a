import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
use_cuda = device.type == "cuda"
torch.manual_seed(0)
X = torch.linspace(-1, 1, 256).unsqueeze(1)
Y = 3 * X - 1
loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True, pin_memory=use_cuda)
model = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
if use_cuda:
    model = model.cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
for epoch in range(8):
    for xb, yb in loader:
        xb = xb.to(device, non_blocking=True)
        yb = yb.to(device, non_blocking=True)
        pred = model(xb)
        loss = ((pred - yb) ** 2).mean()  # a hand-written loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss={loss.item():.5f}")
