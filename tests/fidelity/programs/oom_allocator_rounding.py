"""What the caching allocator reserves for a few allocations, and what empty_cache gives back."""
import torch

u8 = torch.uint8
a = torch.empty(1000, dtype=u8, device="cuda")
print(torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
b = torch.empty(3 << 20, dtype=u8, device="cuda")
c = torch.empty((12 << 20) + 1, dtype=u8, device="cuda")
d = torch.empty(5 << 20, dtype=u8, device="cuda")
print(torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
del b, d
print(torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
torch.cuda.empty_cache()
stats = torch.cuda.memory_stats()
print(torch.cuda.memory_reserved(), stats["segment.all.current"], stats["num_device_alloc"], stats["num_device_free"])
free, total = torch.cuda.mem_get_info()
print(total - free - torch.cuda.memory_reserved() > 0)
