# Functions and a __main__ guard; the rank from dist.get_rank() once the group is up, the GPU bound with
# init_process_group(device_id=...) (no set_device), Adam, a barrier before saving from rank 0.
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def setup() -> torch.device:
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device(f"cuda:{local}")
    dist.init_process_group("nccl", device_id=device)
    return device


def cleanup():
    dist.destroy_process_group()


def make_data(n=256):
    g = torch.Generator().manual_seed(42)
    x = torch.randn(n, 4, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    return TensorDataset(x, y)


def train(device: torch.device, epochs: int = 3):
    rank = dist.get_rank()
    data = make_data()
    sampler = DistributedSampler(data, num_replicas=dist.get_world_size(), rank=rank, shuffle=True, seed=7)
    loader = DataLoader(data, batch_size=16, sampler=sampler, drop_last=True)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    ddp_net = DistributedDataParallel(net, device_ids=[device.index], output_device=device.index)
    opt = optim.Adam(ddp_net.parameters(), lr=1e-2)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros((), device=device)
        for features, target in loader:
            features, target = features.to(device), target.to(device)
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(ddp_net(features), target)
            loss.backward()
            opt.step()
            total += loss.detach()
        if rank == 0:
            print(f"epoch {epoch}: summed loss on rank 0 {total.item():.3f}")
    dist.barrier()
    if rank == 0:
        torch.save(ddp_net.module.state_dict(), "/tmp/net.pt")


if __name__ == "__main__":
    device = setup()
    try:
        train(device)
    finally:
        cleanup()
