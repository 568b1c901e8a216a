import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
weights = torch.randn(3, 3, device=device)
x = torch.randn(3).to(weights.device)  # wherever the weights are
y = (weights @ x.unsqueeze(1)).squeeze(1)
print(f"y lives on {y.device}: {y.tolist()}")
