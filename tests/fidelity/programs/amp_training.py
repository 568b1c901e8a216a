"""Mixed precision the way the AMP recipe writes it: autocast for the forward pass, GradScaler for the rest."""
import torch
from torch import nn

device = "cuda"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cuda")
x, y = torch.randn(8, 16, device=device), torch.randint(0, 4, (8,), device=device)
for step in range(3):
    opt.zero_grad()
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
    print(step, logits.dtype, loss.dtype)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
print(model[0].weight.dtype, model[0].weight.grad.dtype)
print(isinstance(scaler.get_scale(), float), scaler.is_enabled())
