# fidelity: gpus=2
"""CUDA_VISIBLE_DEVICES counts when set before CUDA starts, not after."""
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "1"
import torch

print(torch.cuda.device_count())
x = torch.ones(1, device="cuda")
print(x.device)
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
print(torch.cuda.device_count())
