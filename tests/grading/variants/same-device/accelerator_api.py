import torch

device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
weights = torch.randn(3, 3, device=device)
x = torch.randn(3)
y = torch.matmul(weights, x.to(device, non_blocking=True))
print(y.device)
