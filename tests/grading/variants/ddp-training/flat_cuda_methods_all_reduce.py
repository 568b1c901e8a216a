# A flat script: RANK and LOCAL_RANK read at the top, explicit env:// and device_id, .cuda() for every move,
# pinned memory, AdamW, the epoch loss all-reduced across ranks before rank 0 prints it, a checkpoint dict.
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
world_size = int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl", init_method="env://", world_size=world_size, rank=rank,
                        device_id=torch.device("cuda", local_rank))

torch.manual_seed(1234)
inputs = torch.randn(200, 3)
labels = (inputs.sum(dim=1) > 0).long()
dataset = TensorDataset(inputs, labels)
sampler = DistributedSampler(dataset, shuffle=True, drop_last=False)
loader = DataLoader(dataset, batch_size=25, sampler=sampler, pin_memory=True)

classifier = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2)).cuda()
classifier = DDP(classifier, device_ids=[local_rank])
optimizer = torch.optim.AdamW(classifier.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()

for epoch in range(3):
    sampler.set_epoch(epoch)
    running = torch.zeros(2, device="cuda")
    for batch_inputs, batch_labels in loader:
        batch_inputs = batch_inputs.cuda(non_blocking=True)
        batch_labels = batch_labels.cuda(non_blocking=True)
        logits = classifier(batch_inputs)
        loss = criterion(logits, batch_labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += torch.stack([loss.detach() * len(batch_labels), torch.tensor(len(batch_labels), device="cuda")])
    dist.all_reduce(running)
    if rank == 0:
        print(f"epoch {epoch}: mean loss over all ranks {(running[0] / running[1]).item():.4f}")

if rank == 0:
    torch.save({"model": classifier.module.state_dict(), "epoch": epoch}, "checkpoint.pt")
dist.barrier()
dist.destroy_process_group()
