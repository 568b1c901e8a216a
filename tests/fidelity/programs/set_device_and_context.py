# fidelity: gpus=2
"""set_device, the torch.cuda.device context, device_of."""
import torch

torch.cuda.set_device(1)
print(torch.cuda.current_device())
x = torch.zeros(1, device="cuda")
print(x.device, torch.ones(1).cuda().device)
with torch.cuda.device(0):
    print(torch.cuda.current_device(), torch.zeros(1, device="cuda").device)
print(torch.cuda.current_device())
with torch.cuda.device_of(x):
    print(torch.cuda.current_device())
