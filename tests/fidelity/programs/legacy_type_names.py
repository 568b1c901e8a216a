"""Tensor.type() names, as older code prints and compares them."""
import torch

x = torch.zeros(2, device="cuda")
print(x.type(), x.double().type(), x.type(torch.int64).type(), x.cpu().type())
print(x.type() == "torch.cuda.FloatTensor")
