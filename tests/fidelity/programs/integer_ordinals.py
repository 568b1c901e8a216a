"""Integer ordinals, as PyTorch's own examples write them (`device = 0  # shorthand for cuda:0`)."""
import torch
from torch import nn

gpu_id = 0
print(torch.device(gpu_id))
print(torch.ones(2).to(gpu_id).device)
print(torch.ones(2, device=gpu_id).device)
print(torch.ones(2).cuda(gpu_id).device)
model = nn.Linear(4, 2).to(gpu_id)
print(next(model.parameters()).device)
print(model(torch.randn(3, 4, device=gpu_id)).get_device())
print(torch.device("cuda", gpu_id) == torch.device(gpu_id))
