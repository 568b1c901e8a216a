"""NVTX ranges around a step, for a profiler that may or may not be attached."""
import torch

torch.cuda.nvtx.range_push("forward")
y = torch.randn(8, 8, device="cuda").relu()
torch.cuda.nvtx.range_pop()
with torch.cuda.nvtx.range("backward"):
    z = y.sum()
torch.cuda.nvtx.mark("done")
torch.cuda.synchronize()
torch.cuda.synchronize(0)
print(z.device, "ok")
