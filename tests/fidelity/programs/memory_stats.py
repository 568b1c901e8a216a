"""Watching GPU memory while a tensor comes and goes."""
import torch

torch.cuda.reset_peak_memory_stats()
before = torch.cuda.memory_allocated()
x = torch.empty(1024, 1024, device="cuda")
after = torch.cuda.memory_allocated()
print(after - before)
print(torch.cuda.max_memory_allocated() >= after)
print(torch.cuda.memory_reserved() >= after)
del x
print(torch.cuda.memory_allocated() == before)
print(torch.cuda.max_memory_allocated() - before >= 4 * 1024 * 1024)
torch.cuda.empty_cache()
print(torch.cuda.memory_reserved() >= torch.cuda.memory_allocated())
stats = torch.cuda.memory_stats()
print(stats["allocated_bytes.all.current"] == torch.cuda.memory_allocated())
free, total = torch.cuda.mem_get_info()
print(free < total)
