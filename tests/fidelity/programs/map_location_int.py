"""map_location=0: an ordinal is not one of the things torch.load accepts there."""
import torch

torch.save(torch.nn.Linear(2, 2).cuda().state_dict(), "w.pt")
print("saved")
state = torch.load("w.pt", map_location=0)
print(state["weight"].device)
