# expect: same_model
"""Train a 400M-parameter network on one NVIDIA L4 (24 GB). As written, it runs out of GPU memory: make it fit,
without shrinking the model or the number of samples each optimizer step learns from."""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
WIDTH, DEPTH = 4096, 4  # a smaller model fits
BATCH, TOKENS = 64, 1024  # what one optimizer step learns from: keep it
STEPS = 2

model = nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH, device=device), nn.GELU()) for _ in range(DEPTH)])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

for step in range(STEPS):
    x = torch.randn(BATCH, TOKENS, WIDTH, device=device)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)

if device.type == "cuda":
    print(f"peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB of "
          f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.2f} GiB")
