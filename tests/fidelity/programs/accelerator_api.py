"""The device-neutral torch.accelerator API on a CUDA machine."""
import torch

acc = torch.accelerator.current_accelerator(check_available=True)
device = acc if acc is not None else torch.device("cpu")
print(device, torch.accelerator.device_count(), torch.accelerator.current_device_index())
x = torch.randn(4, device=device)
torch.accelerator.synchronize()
print(x.device, torch.accelerator.is_available())
with torch.accelerator.device_index(0):
    print(torch.accelerator.current_device_index())
print(torch.accelerator.memory_allocated() >= 512)
