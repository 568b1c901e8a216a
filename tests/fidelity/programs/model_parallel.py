# fidelity: gpus=2
"""A model split across two GPUs (the "model parallel" tutorial's shape)."""
import torch
from torch import nn


class TwoGPUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Linear(8, 16).to("cuda:0")
        self.back = nn.Linear(16, 2).to("cuda:1")

    def forward(self, x):
        x = torch.relu(self.front(x.to("cuda:0")))
        return self.back(x.to("cuda:1"))


model = TwoGPUNet()
out = model(torch.randn(4, 8))
loss = out.pow(2).mean()
loss.backward()
print(out.device, model.front.weight.grad.device, model.back.weight.grad.device)
