# fidelity: machine=mac-m3-max
"""torch.mps: synchronize, memory figures, the cache, the seed."""
import torch

print(torch.backends.mps.is_available(), torch.backends.mps.is_built(), torch.cuda.is_available())
print(torch.mps.device_count())
before = torch.mps.current_allocated_memory()
x = torch.empty(1 << 20, device="mps")
torch.mps.synchronize()
print(torch.mps.current_allocated_memory() - before >= 4 << 20)
print(torch.mps.driver_allocated_memory() >= torch.mps.current_allocated_memory())
print(torch.mps.recommended_max_memory() > 0)
del x
torch.mps.empty_cache()
torch.mps.manual_seed(0)
a = torch.rand(3, device="mps")
torch.mps.manual_seed(0)
b = torch.rand(3, device="mps")
print(torch.equal(a, b), a.device)
