"""`torch.cuda.set_device(local_rank)` with a rank the machine has no GPU for."""
import torch

torch.cuda.set_device(0)
print(torch.cuda.current_device())
local_rank = 1
torch.cuda.set_device(local_rank)
print("unreachable")
