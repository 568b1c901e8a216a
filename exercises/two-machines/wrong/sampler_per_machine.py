# expect: sharded_data
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

local_rank = int(os.environ["LOCAL_RANK"])  # which GPU of THIS machine: 0 or 1 on each of the two
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl")  # all four ranks meet at MASTER_ADDR (machine 0)
device = torch.device("cuda", local_rank)
torch.manual_seed(0)

X = torch.linspace(-1, 1, 128).unsqueeze(1)
Y = 3 * X - 1 + 0.1 * torch.randn_like(X)
dataset = TensorDataset(X, Y)
sampler = DistributedSampler(dataset, num_replicas=int(os.environ["LOCAL_WORLD_SIZE"]), rank=local_rank)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)

model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
model = DDP(model, device_ids=[local_rank])
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
    if dist.get_rank() == 0:  # one process in the whole job
        print(f"epoch {epoch}: loss {loss.item():.4f}")

if dist.get_rank() == 0:  # global rank 0: one checkpoint, not one per machine
    torch.save(model.module.state_dict(), "model.pt")
dist.destroy_process_group()
