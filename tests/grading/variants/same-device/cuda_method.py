import torch

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
weights = torch.randn(3, 3).to(device)
x = torch.randn(3)
if device.type == "cuda":
    x = x.cuda()
y = weights @ x
assert y.is_cuda == (device.type == "cuda")
