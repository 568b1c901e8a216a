# fidelity: gpus=2
"""A layer on the second GPU fed from the first."""
import torch
from torch import nn

layer = nn.Linear(4, 2).to("cuda:1")
x = torch.randn(3, 4, device="cuda:0")
out = layer(x)
print(out.device)
