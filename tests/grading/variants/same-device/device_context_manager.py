import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
with device:  # tensors made inside are made on `device`
    weights = torch.randn(3, 3)
    x = torch.randn(3)
y = weights @ x
print(y)
