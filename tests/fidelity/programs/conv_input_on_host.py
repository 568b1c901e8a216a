"""An image left on the host, fed to a convolution on the GPU."""
import torch
from torch import nn

conv = nn.Conv2d(1, 4, 3).cuda()
img = torch.randn(1, 1, 8, 8)
out = conv(img)
print(out.shape)
