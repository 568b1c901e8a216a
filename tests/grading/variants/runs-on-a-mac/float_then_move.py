import numpy as np
import torch

usable = torch.accelerator.current_accelerator(check_available=True)
device = usable if usable is not None else torch.device("cpu")
readings = np.linspace(0.0, 3.0, 12).reshape(4, 3)
x = torch.from_numpy(readings).float().to(device)  # float32 on the host, then moved
w = torch.ones(3, 2, device=device)
above = (x @ w).gt(1.5).to(torch.float32)
print("above the threshold:", int(above.sum().item()))
