# expect: picks_device
import torch

# Use the GPU when there is one.
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

torch.manual_seed(0)
weights = torch.randn(3, 3, device=device)  # lives on the device
x = torch.randn(3)  # lives on the host
x = x.cuda()  # "the GPU is always there"

y = weights @ x
print("y =", y)
