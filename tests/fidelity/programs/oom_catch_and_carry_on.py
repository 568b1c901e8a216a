"""Out of memory: catch it, see that nothing was lost, carry on (the usual 'retry with a smaller batch' loop)."""
import torch

keep = torch.ones(1024, device="cuda")
total = torch.cuda.get_device_properties(0).total_memory
for batch in (2 * total, total, 1024):  # the whole card never fits: the CUDA context takes part of it
    try:
        x = torch.empty(batch, dtype=torch.uint8, device="cuda")
        print("fits", batch == 1024)
        break
    except torch.OutOfMemoryError as exc:
        print(type(exc).__name__, isinstance(exc, RuntimeError), torch.cuda.OutOfMemoryError is torch.OutOfMemoryError)
print(torch.cuda.memory_allocated(), keep.sum().item())
print(torch.cuda.memory_stats()["num_ooms"] >= 1)
