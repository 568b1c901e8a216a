"""The first lines of most GPU tutorials: pick the device, put a tensor there, look at it."""
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print("using", device)
x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(device)
print(x.device, x.is_cuda, x.get_device())
print(x)
y = x * 2 + 1
print(y.device, y.dtype, tuple(y.shape))
print(torch.zeros(3).get_device(), torch.zeros(3).device)
