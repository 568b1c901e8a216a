# fidelity: machine=mac-m3-max
"""A model on the Mac's GPU fed a batch left on the host."""
import torch
from torch import nn

model = nn.Linear(3, 2).to("mps")
batch = torch.randn(4, 3)
print(model(batch))
