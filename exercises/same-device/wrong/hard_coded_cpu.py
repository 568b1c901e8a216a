# expect: y_on_device
import torch

# Use the GPU when there is one.
device = torch.device("cpu")  # "just use the CPU"

torch.manual_seed(0)
weights = torch.randn(3, 3, device=device)  # lives on the device
x = torch.randn(3)

y = weights @ x
print("y =", y)
