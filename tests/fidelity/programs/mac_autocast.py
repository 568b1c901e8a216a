# fidelity: machine=mac-m3-max
"""torch.autocast on a Mac: float16 by default, bfloat16 when asked."""
import torch

x = torch.randn(4, 4, device="mps")
with torch.autocast("mps"):
    print((x @ x).dtype, torch.softmax(x, 0).dtype)
with torch.autocast("mps", dtype=torch.bfloat16):
    print((x @ x).dtype)
print((x @ x).dtype)
