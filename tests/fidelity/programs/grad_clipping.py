"""Gradient clipping and a scheduler in a GPU training step."""
import torch
from torch import nn

model = nn.Linear(10, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
loss = model(torch.randn(4, 10, device="cuda")).sum()
loss.backward()
norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
print(norm.device, norm.dim(), norm.item() >= 0)
print(model.weight.grad.norm() <= 1.0 + 1e-4)
opt.step()
sched.step()
print(sched.get_last_lr())
