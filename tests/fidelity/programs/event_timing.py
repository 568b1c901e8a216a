"""Timing GPU work with CUDA events."""
import torch

start = torch.cuda.Event(enable_timing=True)
end = torch.cuda.Event(enable_timing=True)
x = torch.randn(256, 256, device="cuda")
start.record()
for _ in range(10):
    x = x @ x / 256
end.record()
torch.cuda.synchronize()
ms = start.elapsed_time(end)
print(type(ms).__name__, ms >= 0.0)
print(start.query(), end.query())
