# fidelity: machine=mac-m3-max
"""The same variable set after torch was imported: torch read it at import, so the op still fails."""
import os

import torch

os.environ["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"
a = torch.randn(4, 4, device="mps")
torch.heaviside(a, a)
