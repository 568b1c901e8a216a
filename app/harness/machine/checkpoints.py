"""torch.save and torch.load of simulated GPU tensors, with torch's own map_location rules.

torch.save tags each storage with its device ("cuda:0") and torch.load puts it back there, or where
`map_location` says. Simulated GPU tensors live in host memory, so by themselves they would be saved as "cpu"
and load back on the host. Two hooks keep the real behaviour: a location tagger that names a simulated
storage's GPU (registered before torch's own), and a deserializer for "cuda..." locations that checks the target
the way torch does (its own `_validate_device`, so its own messages) and leaves the data in host memory; the
tensors rebuilt on those storages get their GPU label back.
"""

from __future__ import annotations

import functools

import torch
import torch.serialization as serialization

from app.harness.machine.memory import Memory

_ORIG_REBUILD = torch._utils._rebuild_tensor_v2
_ORIG_LOAD = torch.load


class Checkpoints:
    """The save/load hooks of one job."""

    def __init__(self, memory: Memory, set_label):
        self.memory, self.set_label = memory, set_label
        self.restored: dict[int, str] = {}  # data_ptr of a storage loaded for a GPU -> its label

    def install(self) -> None:
        """Register the tagger and deserializer ahead of torch's own, and label rebuilt tensors."""
        serialization.register_package(0, self.tag, self.restore)
        checkpoints = self
        # plain functions carrying the originals' names: torch.load's weights_only allowlist is keyed by them
        torch._utils._rebuild_tensor_v2 = functools.wraps(_ORIG_REBUILD)(lambda *a, **k: checkpoints.rebuild(*a, **k))
        torch.load = functools.wraps(_ORIG_LOAD)(lambda *a, **k: checkpoints.load(*a, **k))

        def storage_cuda(storage, device=None, non_blocking=False):
            """`map_location=lambda s, loc: s.cuda(1)`: the storage stays in host memory, meant for a GPU."""
            index = torch.cuda._get_device_index(device, optional=True) if device is not None else None
            location = f"cuda:{index}" if index is not None and index >= 0 else "cuda"
            return checkpoints.restore(storage, location)

        torch.UntypedStorage.cuda = storage_cuda

    def load(self, *args, **kwargs):
        """torch.load; the storages it marked for GPUs are forgotten afterwards (their addresses get reused)."""
        try:
            return _ORIG_LOAD(*args, **kwargs)
        finally:
            self.restored.clear()

    def tag(self, storage) -> str | None:
        """The location torch.save records: the simulated GPU of a storage that lives on one."""
        untyped = storage.untyped_storage() if hasattr(storage, "untyped_storage") else storage
        return self.memory.label_of_storage(untyped.data_ptr())

    def restore(self, storage, location: str):
        """Load a storage saved on (or mapped to) a GPU: torch's checks, then keep it in host memory."""
        if not location.startswith("cuda"):
            return None
        device = serialization._validate_device(location, "cuda")
        index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda._lazy_init()
        self.restored[storage.data_ptr()] = f"cuda:{index}"
        return storage

    def rebuild(self, storage, *args, **kwargs):
        """torch._utils._rebuild_tensor_v2, plus the GPU label of a storage restored for a GPU."""
        tensor = _ORIG_REBUILD(storage, *args, **kwargs)
        untyped = getattr(storage, "_untyped_storage", storage)
        label = self.restored.get(untyped.data_ptr()) if self.restored else None
        if label:
            self.set_label(tensor, label)
        return tensor
