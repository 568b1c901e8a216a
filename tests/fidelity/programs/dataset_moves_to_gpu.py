"""A Dataset whose __getitem__ moves each sample to the GPU (fine without worker processes)."""
import torch
from torch.utils.data import DataLoader, Dataset


class OnGPU(Dataset):
    def __init__(self):
        self.x, self.y = torch.randn(8, 2), torch.arange(8)

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return self.x[i].to("cuda"), self.y[i].to("cuda")


batch = next(iter(DataLoader(OnGPU(), batch_size=4)))
print([t.device for t in batch])
print(batch[0].shape, batch[1].dtype)
