"""`x.cuda` without the parentheses."""
import torch

weights = torch.randn(3, 3, device="cuda")
x = torch.randn(3)
x = x.cuda
y = weights @ x
print(y)
