"""Events made without enable_timing=True cannot time anything."""
import torch

start, end = torch.cuda.Event(), torch.cuda.Event()
start.record()
y = torch.randn(64, 64, device="cuda").relu()
end.record()
torch.cuda.synchronize()
print(start.elapsed_time(end))
