"""A checkpoint saved from the GPU loads back onto the GPU unless told otherwise."""
import torch
from torch import nn

model = nn.Linear(4, 2).to("cuda")
torch.save(model.state_dict(), "model.pt")
state = torch.load("model.pt")
print({k: str(v.device) for k, v in state.items()})
fresh = nn.Linear(4, 2)
fresh.load_state_dict(state)
print(next(fresh.parameters()).device)
