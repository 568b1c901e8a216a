import os

os.environ["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"  # before torch is imported: a Mac runs heaviside on its CPU

import numpy as np  # noqa: E402
import torch  # noqa: E402

device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
readings = np.linspace(0.0, 3.0, 12).reshape(4, 3)
x = torch.from_numpy(readings).to(device, dtype=torch.float32)
w = torch.ones(3, 2, device=device)
scores = x @ w
above = torch.heaviside(scores - 1.5, torch.zeros_like(scores))
print("above the threshold:", int(above.sum().item()))
