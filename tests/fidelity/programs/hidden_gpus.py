"""A CUDA build whose GPUs CUDA_VISIBLE_DEVICES hides: what torch reports, and what a GPU tensor says."""
import os

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import torch

print(torch.cuda.is_available(), torch.cuda.device_count())
print(torch.accelerator.current_accelerator(), torch.accelerator.current_accelerator(check_available=True))
print(torch.accelerator.is_available(), torch.backends.cuda.is_built())
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(torch.ones(2, device=device).device)
torch.zeros(1, device="cuda")
