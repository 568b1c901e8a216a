"""A script written for a two-GPU workstation, run on a machine with one GPU."""
import torch

print("GPUs:", torch.cuda.device_count())
x = torch.ones(3)
x = x.to("cuda:1")
print(x.device)
