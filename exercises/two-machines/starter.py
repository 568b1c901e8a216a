import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

# This DDP script passes on one machine of two GPUs. Run it on two machines of two GPUs each.
rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(rank)
dist.init_process_group(backend="nccl")
device = torch.device("cuda", rank)
torch.manual_seed(0)

X = torch.linspace(-1, 1, 128).unsqueeze(1)
Y = 3 * X - 1 + 0.1 * torch.randn_like(X)
dataset = TensorDataset(X, Y)
sampler = DistributedSampler(dataset, num_replicas=int(os.environ["LOCAL_WORLD_SIZE"]), rank=local_rank)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)

model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
model = DDP(model, device_ids=[rank])
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(5):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if local_rank == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}")

if local_rank == 0:
    torch.save(model.module.state_dict(), "model.pt")
dist.destroy_process_group()
