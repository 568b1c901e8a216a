# fidelity: machine=mac-m3-max
"""More than MPS allows (1.7 x the recommended working set of a 48 GB Mac): MPSAllocator refuses."""
import torch

print(torch.mps.recommended_max_memory() // (1 << 30))
big = torch.empty(70 << 30, dtype=torch.uint8, device="mps")
