# torch.accelerator instead of torch.cuda, the backend asked of torch for that device, a Dataset and a Module of
# its own, LOCAL_RANK through dist.get_node_local_rank(), evaluation on rank 0 under no_grad, a main() function.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Line(Dataset):
    def __init__(self, n: int):
        self.x = torch.linspace(-2, 2, n).unsqueeze(1)
        self.y = 0.5 * self.x + 2

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(1, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def main():
    local_rank = dist.get_node_local_rank(fallback_rank=0)
    accelerator = torch.accelerator.current_accelerator()
    device = torch.device(accelerator.type, local_rank)
    torch.accelerator.set_device_index(local_rank)
    dist.init_process_group(backend=dist.get_default_backend_for_device(device))

    data = Line(96)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=12, sampler=sampler)
    torch.manual_seed(3)
    model = DDP(Regressor().to(device), device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for epoch in range(4):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            nn.functional.l1_loss(model(x), y).backward()
            opt.step()

    if dist.get_rank() == 0:
        model.eval()
        with torch.no_grad():
            probe = torch.tensor([[1.0]], device=device)
            print("f(1) =", round(model.module(probe).item(), 2))
        torch.save(model.module.state_dict(), "regressor.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
