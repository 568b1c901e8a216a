"""Devices and Tensor Placement: an interactive PyTorch course with live, sandboxed exercises."""

from pathlib import Path

# The repository root: lessons/, exercises/, templates/ and static/ live beside app/.
ROOT = Path(__file__).resolve().parent.parent
