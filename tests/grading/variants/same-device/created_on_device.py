import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
weights = torch.randn(3, 3, device=device)
x = torch.randn(3, device=device)  # made where it is needed
y = weights @ x
print(y)
