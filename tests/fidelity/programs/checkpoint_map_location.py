"""Loading one checkpoint with each kind of map_location."""
import torch
from torch import nn

model = nn.Linear(3, 2).cuda()
torch.save({"model": model.state_dict(), "epoch": 3}, "ckpt.pt")
ckpt = torch.load("ckpt.pt", map_location="cpu")
print(ckpt["epoch"], ckpt["model"]["weight"].device)
ckpt = torch.load("ckpt.pt", map_location=torch.device(0))
print(ckpt["model"]["weight"].device)
ckpt = torch.load("ckpt.pt", map_location={"cuda:0": "cpu"})
print(ckpt["model"]["bias"].device)
ckpt = torch.load("ckpt.pt", map_location="cuda")
print(ckpt["model"]["bias"].device)
