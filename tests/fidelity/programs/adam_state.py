"""Where Adam keeps its state for a model on the GPU."""
import torch
from torch import nn

model = nn.Linear(3, 1).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss = model(torch.randn(8, 3, device="cuda")).pow(2).mean()
loss.backward()
opt.step()
state = opt.state[model.weight]
print(sorted(state.keys()))
print(state["exp_avg"].device, state["exp_avg_sq"].device, state["step"].device)
print(model.weight.grad.device, model.weight.grad.shape)
