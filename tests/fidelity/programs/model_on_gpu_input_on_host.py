"""The model went to the GPU, the batch did not."""
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
batch = torch.randn(4, 8)
print(next(model.parameters()).device, batch.device)
out = model(batch)
print(out.shape)
