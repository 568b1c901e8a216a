# expect: picks_device
import torch

# "Every machine I use has a GPU."
device = torch.device("cuda")

torch.manual_seed(0)
weights = torch.randn(3, 3, device=device)  # lives on the device
x = torch.randn(3)  # lives on the host
x = x.to(device)  # .to() returns a copy on the device; keep it

y = weights @ x
print("y =", y)
