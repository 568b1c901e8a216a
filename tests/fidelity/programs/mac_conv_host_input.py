# fidelity: machine=mac-m3-max
"""An image left on the host, fed to a convolution on the Mac's GPU."""
import torch
from torch import nn

conv = nn.Conv2d(1, 4, 3).to("mps")
img = torch.randn(1, 1, 8, 8)
print(conv(img).shape)
