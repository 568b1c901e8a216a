"""The older torch.cuda.amp spelling (deprecated, still working)."""
import torch

x, w = torch.randn(4, 8, device="cuda"), torch.randn(2, 8, device="cuda")
with torch.cuda.amp.autocast():
    y = torch.nn.functional.linear(x, w)
print(y.dtype, y.device)
scaler = torch.cuda.amp.GradScaler()
print(type(scaler).__name__, scaler.is_enabled())
