# expect: prepared
import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

accelerator = Accelerator()  # this process's GPU, the process group, the world: from accelerate launch
torch.manual_seed(0)

# A toy regression problem: y = 3x - 1, plus a little noise; and 50 held-out points to measure it on.
X = torch.linspace(-1, 1, 128).unsqueeze(1)
Y = 3 * X - 1 + 0.1 * torch.randn_like(X)
loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)
X_val = torch.linspace(-1, 1, 50).unsqueeze(1)
val_loader = DataLoader(TensorDataset(X_val, 3 * X_val - 1), batch_size=16)

model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1))
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

for epoch in range(5):
    model.train()
    for xb, yb in loader:  # already on this rank's GPU, this rank's shard
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        accelerator.backward(loss)  # DDP averages the gradients here
        optimizer.step()
    model.eval()
    errors = []
    with torch.no_grad():
        for xb, yb in val_loader:
            errors.append(accelerator.gather_for_metrics((model(xb) - yb) ** 2))  # every rank's, padding dropped
    errors = torch.cat(errors)
    accelerator.print(f"epoch {epoch}: validation mse {errors.mean().item():.4f} over {len(errors)} points")

accelerator.wait_for_everyone()
if accelerator.is_main_process:  # one checkpoint, of the model without its DDP wrapper
    torch.save(accelerator.unwrap_model(model).state_dict(), "model.pt")
