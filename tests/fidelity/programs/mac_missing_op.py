# fidelity: machine=mac-m3-max
"""An op torch 2.13 has no MPS kernel for (linalg_eig: CPU and CUDA kernels only, native_functions.yaml)."""
import torch

a = torch.randn(4, 4, device="mps")
print(torch.linalg.det(a).device)
values, vectors = torch.linalg.eig(a)
print(values.device)
