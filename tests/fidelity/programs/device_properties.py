"""What a script prints about its GPU before training (name, capability, memory)."""
import torch

print(torch.cuda.device_count(), torch.cuda.current_device())
name = torch.cuda.get_device_name(0)
print(type(name).__name__, len(name) > 0)
props = torch.cuda.get_device_properties(0)
print(props.name == name, props.total_memory > 2**30, props.multi_processor_count > 0)
major, minor = torch.cuda.get_device_capability()
print((major, minor) >= (7, 0), isinstance(minor, int))
print(torch.cuda.is_bf16_supported())
free, total = torch.cuda.mem_get_info()
print(0 < free <= total, total == props.total_memory)
