"""The four lessons cover every fact of the seed, in the course's own words."""

from __future__ import annotations

import re

import pytest

from app import ROOT

SEED = ROOT.parent / "shared" / "seed" / "devices-and-tensor-placement.txt"
LESSONS = {p.stem.split("-", 1)[1]: p.read_text(encoding="utf-8") for p in sorted((ROOT / "lessons").glob("*.md"))}
ALL = "\n".join(LESSONS.values())

# (lesson, phrase that must appear): one row per fact of the seed and of issue 2's content list
FACTS = [
    ("cpu-gpu-border", ".device"),
    ("cpu-gpu-border", ".to(device)"),
    ("cpu-gpu-border", "Expected all tensors to be on the same device, but found at least two devices, "
                       "cuda:0 and cpu!"),
    ("cpu-gpu-border", "but got mat1 is on cpu, different from other tensors on cuda:0 (when checking argument in "
                       "method wrapper_CUDA_addmm)"),
    ("cpu-gpu-border", "but got target is on cpu, different from other tensors on cuda:0 (when checking argument "
                       "in method wrapper_CUDA_nll_loss_forward)"),
    ("cpu-gpu-border", "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"),
    ("cpu-gpu-border", "AssertionError: Torch not compiled with CUDA enabled"),
    ("cpu-gpu-border", "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                       "tensor to host memory first."),
    ("cpu-gpu-border", "**both** the model's parameters **and** the batch"),
    ("cpu-gpu-border", "**The model moves once**"),
    ("cpu-gpu-border", "**Each batch moves inside the loop**"),
    ("cpu-gpu-border", "`.item()`"),
    ("cpu-gpu-border", "`.cpu()`"),
    ("cpu-gpu-border", '!!! tip "Three places for `.to(device)`"'),
    ("picking-a-device", 'torch.device("mps") if torch.backends.mps.is_available()'),
    ("picking-a-device", "torch.accelerator.current_accelerator()"),
    ("picking-a-device", "NotImplementedError"),
    ("picking-a-device", "Report it upstream"),
    ("picking-a-device", "PYTORCH_ENABLE_MPS_FALLBACK=1"),
    ("multi-gpu-and-distributed", "DistributedDataParallel"),
    ("multi-gpu-and-distributed", "torchrun --standalone --nproc-per-node"),  # torchrun's documented spelling
    ("multi-gpu-and-distributed", "torchrun --nnodes=2"),
    ("multi-gpu-and-distributed", "accelerate launch"),
    # issue 14's corrections: DDP is for speed (a full copy per GPU); set_device first; env://; the global batch
    ("multi-gpu-and-distributed", "DDP cannot help, because every GPU still holds the whole model"),
    ("multi-gpu-and-distributed", "fully_shard"),
    ("multi-gpu-and-distributed", "torch.cuda.set_device(local_rank)"),
    ("multi-gpu-and-distributed", "device_id=torch.device(\"cuda\", local_rank)"),
    ("multi-gpu-and-distributed", "env://"),
    ("multi-gpu-and-distributed", "The global batch is the per-process batch times the world size"),
    ("multi-gpu-and-distributed", "the number is rank 0's last local batch"),
    ("multi-gpu-and-distributed", "H100"),
    ("multi-gpu-and-distributed", "MI300X"),
    ("multi-gpu-and-distributed", "M3 Ultra"),
    ("training-loop", "non_blocking=True"),
    ("training-loop", "pin_memory"),
    ("training-loop", "pinned"),
    ("training-loop", "loss.item()"),
]


@pytest.mark.parametrize(("lesson", "phrase"), FACTS, ids=[f"{lesson}:{phrase[:30]}" for lesson, phrase in FACTS])
def test_lesson_states_the_fact(lesson, phrase):
    assert phrase in LESSONS[lesson]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?:])\s+|\n\n", text) if len(s.split()) >= 6]


@pytest.mark.skipif(not SEED.is_file(), reason="the seed text lives beside the repository, not in a clean clone")
def test_no_seed_sentence_is_copied():
    """Our own words: no sentence of six words or more from the seed appears verbatim."""
    normalized = " ".join(ALL.split())
    copied = [s for s in _sentences(SEED.read_text(encoding="utf-8")) if " ".join(s.split()) in normalized]
    assert copied == []
