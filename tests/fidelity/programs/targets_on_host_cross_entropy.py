"""Logits on the GPU, class labels left on the host."""
import torch
import torch.nn.functional as F

device = torch.device("cuda")
logits = torch.randn(4, 3, device=device, requires_grad=True)
target = torch.tensor([0, 2, 1, 0])
loss = F.cross_entropy(logits, target)
print(loss.item())
