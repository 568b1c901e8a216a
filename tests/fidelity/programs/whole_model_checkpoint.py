"""A whole pickled model, loaded onto the CPU with the classic lambda, then as saved."""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(3, 3)).cuda()
torch.save(model, "whole.pt")
cpu_model = torch.load("whole.pt", map_location=lambda storage, loc: storage, weights_only=False)
print(next(cpu_model.parameters()).device, type(cpu_model).__name__)
gpu_model = torch.load("whole.pt", weights_only=False)
print(next(gpu_model.parameters()).device)
