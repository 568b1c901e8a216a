import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
weights = torch.randn(3, 3, device=device)
x = torch.randn(3).to(device)
for i in range(100000):
    y = weights @ x
    print("y =", y)
