import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
weights = torch.randn(3, 3, device=device)
x = torch.randn(3).type_as(weights)  # type_as moves to the other tensor's device too
y = weights.mv(x)
print("first entry:", y[0].item())
