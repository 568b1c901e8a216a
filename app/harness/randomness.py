"""A fresh interpreter's random state, for each job and each rank.

Every job is forked from the warm fork server, and every rank from its launcher or machine keeper, so each would
start from the server's torch and NumPy random state: an unseeded `torch.randn(2)` printed the same numbers in
every job a server ran (one learner's run after another's, every rank of a job alike), where `python main.py`
prints new ones each time and torchrun's ranks each draw their own. A new interpreter seeds:
- torch's CPU generator from the OS (ATen/CPUGeneratorImpl.cpp, getDefaultCPUGenerator:
  c10::detail::getNonDeterministicRandom), which `torch.initial_seed()` reports;
- NumPy's global RandomState from the OS, when numpy.random is imported (numpy/random/mtrand.pyx: RandomState(None));
- Python's `random` from the OS, which CPython itself redoes in a forked child (random.py: os.register_at_fork).
CUDA's generators are left alone: a new process's CUDA seed is the fixed default_rng_seed_val, 67280421310721
(ATen/cuda/CUDAGeneratorImpl.h), which the simulated GPU reports already, so unseeded GPU values repeat run to run
there as on a real card.
"""

from __future__ import annotations

import os
import sys

import torch

SEED_BYTES = 8  # torch's seeds are 64-bit (torch.manual_seed takes up to 0xffff_ffff_ffff_ffff)


def fresh(seed: int | None = None) -> int:
    """Seed torch's CPU generator, and NumPy's global state where numpy.random is imported, as a new interpreter
    does: from the OS, or from `seed` (a copy of the graded run elsewhere starts where the run started); return
    the seed, which `torch.initial_seed()` then reads."""
    if seed is None:
        seed = int.from_bytes(os.urandom(SEED_BYTES), "little")
    torch.default_generator.manual_seed(seed)
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:  # its legacy seeding takes 32-bit words: the seed's two halves
        numpy_random.seed([seed & 0xFFFF_FFFF, seed >> 32])
    return seed
