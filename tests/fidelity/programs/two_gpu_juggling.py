# fidelity: gpus=2
"""Two GPUs: move one operand to the other's device before combining them."""
import torch

print(torch.cuda.device_count())
a = torch.ones(2, 2, device="cuda:0")
b = torch.ones(2, 2, device="cuda:1")
c = a + b.to(a.device)
print(c.device, c.sum().item())
d = a.to("cuda:1") @ b
print(d.device, d.get_device())
print(torch.cuda.memory_allocated(0) > 0, torch.cuda.memory_allocated(1) > 0)
