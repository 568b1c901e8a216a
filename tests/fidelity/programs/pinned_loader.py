"""Pinned batches and non-blocking copies, the way the performance guides recommend."""
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
data = TensorDataset(torch.randn(64, 10), torch.randint(0, 2, (64,)))
loader = DataLoader(data, batch_size=16, pin_memory=True)
for xb, yb in loader:
    print(xb.is_pinned(), yb.is_pinned(), xb.device)
    xb = xb.to(device, non_blocking=True)
    yb = yb.to(device, non_blocking=True)
    print(xb.device, yb.dtype)
    break
x = torch.randn(4)
print(x.is_pinned(), x.pin_memory().is_pinned(), torch.empty(3, pin_memory=True).is_pinned())
torch.cuda.synchronize()
