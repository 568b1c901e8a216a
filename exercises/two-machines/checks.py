"""two-machines' checks are ddp-training's, read on four ranks over two machines.

The checks already judge each rank by its own LOCAL_RANK, compare the ranks' shards over the whole job and look
for the one rank that saves; on one machine a rank's `RANK` and `LOCAL_RANK` are equal, so three mistakes only
show here: `cuda:RANK` (the second machine has no cuda:2), a sampler sharded over one machine (ranks 0 and 2
train on the same half), and a save on every machine's local rank 0 (two checkpoints). One set of checks, read
from the sibling exercise, so that a fix to one is a fix to both.
"""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parent.parent / "ddp-training" / "checks.py"
_SPEC = importlib.util.spec_from_file_location("course_checks_ddp_training_for_two_machines", _PATH)
_DDP = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_DDP)

evaluate = _DDP.evaluate
