# expect: process_group
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

local_rank = int(os.environ["LOCAL_RANK"])  # set by torchrun: which GPU of this machine is ours
torch.cuda.set_device(local_rank)  # before the process group, so NCCL starts on our GPU
device = torch.device("cuda", local_rank)
torch.manual_seed(0)

# A toy regression problem: y = 3x - 1, plus a little noise. The same data on every rank.
X = torch.linspace(-1, 1, 128).unsqueeze(1)
Y = 3 * X - 1 + 0.1 * torch.randn_like(X)
dataset = TensorDataset(X, Y)
sampler = DistributedSampler(dataset)  # this rank's shard; it shuffles, so the loader must not
loader = DataLoader(dataset, batch_size=32, sampler=sampler)

model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
model = DDP(model, device_ids=[local_rank])  # after the move: a copy per GPU, gradients averaged
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(5):
    sampler.set_epoch(epoch)  # a new order (and new shards) every epoch
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients across the ranks here
        optimizer.step()
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f} (rank 0's last batch)")

if dist.get_rank() == 0:  # one checkpoint, without DDP's "module." prefix
    torch.save(model.module.state_dict(), "model.pt")
dist.destroy_process_group()
