"""Resume training: model and optimizer state from a checkpoint, map_location=device."""
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Linear(5, 1).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model(torch.randn(4, 5, device=device)).sum().backward()
opt.step()
torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, "ck.pt")

model2 = nn.Linear(5, 1).to(device)
opt2 = torch.optim.Adam(model2.parameters(), lr=1e-3)
ck = torch.load("ck.pt", map_location=device)
model2.load_state_dict(ck["model"])
opt2.load_state_dict(ck["opt"])
state = opt2.state[model2.weight]
print(state["exp_avg"].device, state["step"].device)
model2(torch.randn(4, 5, device=device)).sum().backward()
opt2.step()
print(state["step"].item())
