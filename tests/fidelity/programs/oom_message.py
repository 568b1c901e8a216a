"""The words of CUDA's out-of-memory error, sizes left out (they are the card's)."""
import re

import torch

x = torch.ones(1024, device="cuda")
try:
    torch.empty(2 * torch.cuda.get_device_properties(0).total_memory, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as exc:
    text = re.sub(r"\d+(\.\d+)? (bytes|KiB|MiB|GiB)", "<size>", str(exc))
    for sentence in text.split(". "):
        print(sentence.strip())
