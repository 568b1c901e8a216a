"""The classic slip: handing a GPU tensor to NumPy."""
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
logits = torch.randn(4, 3, device=device)
preds = logits.argmax(dim=1)
print(preds.device)
print(preds.cpu().numpy().shape)
print(preds.numpy())
