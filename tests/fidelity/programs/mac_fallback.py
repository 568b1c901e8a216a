# fidelity: machine=mac-m3-max
"""PYTORCH_ENABLE_MPS_FALLBACK=1, set before torch is imported: the op runs on the CPU, with one warning."""
import os
import warnings

os.environ["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"
import torch

a = torch.randn(4, 4, device="mps")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    values, vectors = torch.linalg.eig(a)
    torch.heaviside(a, a)
print(values.device)
print(len(caught), caught[0].category.__name__)
print(str(caught[0].message))
