# fidelity: machine=mac-m3-max
"""An elementwise op between the Mac's GPU and the host (TensorIterator's check)."""
import torch

x = torch.ones(3, device="mps")
print(x + torch.ones(()))
print(x + torch.ones(3))
