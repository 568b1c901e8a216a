"""Evaluation: eval mode, no_grad, accuracy counted with .item()."""
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3)).to(device)
X, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
model.eval()
correct = 0
with torch.no_grad():
    for i in range(0, 64, 16):
        xb, yb = X[i:i + 16].to(device), y[i:i + 16].to(device)
        logits = model(xb)
        correct += (logits.argmax(1) == yb).sum().item()
print("eval accuracy is a fraction:", 0.0 <= correct / 64 <= 1.0)
print(logits.requires_grad, logits.device, type(correct).__name__)
