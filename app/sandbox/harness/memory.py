"""Memory of the simulated GPUs, counted from the simulated tensors' storage.

Every tensor that gets a GPU label is tracked by its storage (views share one); the storage counts as allocated
on that GPU until the last labelled tensor on it is garbage. Sizes are rounded like the CUDA caching allocator
rounds them (512-byte blocks), and "reserved" memory grows in the allocator's segment sizes, so the figures of
`torch.cuda.memory_allocated()`, `max_memory_allocated()`, `memory_reserved()`, `memory_stats()` and
`mem_get_info()` are those a real card would show for the same tensors. What a real card also holds and this
does not see: tensors autograd keeps for backward after the program dropped them, and cuBLAS/cuDNN workspaces.
"""

from __future__ import annotations

import weakref

import torch

BLOCK = 512  # bytes; the caching allocator rounds every allocation up to a multiple of this
SMALL = 1 << 20  # bytes; allocations up to this size come from the small pool ...
SMALL_SEGMENT = 2 << 20  # ... which reserves 2 MiB segments
LARGE_SEGMENT = 20 << 20  # allocations under 10 MiB share 20 MiB segments; larger ones get their own
LARGE_ALONE = 10 << 20
ROUND_LARGE = 2 << 20  # a segment of its own is rounded up to 2 MiB
# bytes of the card taken by the CUDA context itself (kernels, cuBLAS handles); mem_get_info counts it as used
CONTEXT_BYTES = 512 << 20


def _round(size: int, unit: int) -> int:
    return -(-size // unit) * unit


def block_size(nbytes: int) -> int:
    """What the caching allocator hands out for a request of nbytes."""
    return _round(max(nbytes, 1), BLOCK) if nbytes else 0


def pool_of(size: int) -> str:
    return "small_pool" if size <= SMALL else "large_pool"


class DeviceStats:
    """The allocator statistics of one device, in the shape torch.cuda.memory_stats() flattens."""

    def __init__(self):
        self.allocated = {"small_pool": 0, "large_pool": 0}
        self.reserved = {"small_pool": 0, "large_pool": 0}
        self.counts = {"small_pool": 0, "large_pool": 0}
        self.current_allocated = self.peak_allocated = self.peak_reserved = 0
        self.total_allocated = self.total_freed = self.num_allocs = self.num_frees = 0

    def allocate(self, size: int) -> None:
        pool = "small_pool" if size <= SMALL else "large_pool"
        self.allocated[pool] += size
        self.counts[pool] += 1
        self.total_allocated += size
        self.num_allocs += 1
        self.current_allocated += size
        if self.current_allocated > self.peak_allocated:
            self.peak_allocated = self.current_allocated
        free = self.reserved[pool] - self.allocated[pool]
        if free < 0:  # the pool needs a new segment
            self.reserved[pool] += self._segment(size, -free)
            self.peak_reserved = max(self.peak_reserved, self.current_reserved)

    @staticmethod
    def _segment(size: int, missing: int) -> int:
        if size <= SMALL:
            return _round(missing, SMALL_SEGMENT)
        if size < LARGE_ALONE:
            return _round(missing, LARGE_SEGMENT)
        return _round(missing, ROUND_LARGE)

    def free(self, size: int) -> None:
        pool = pool_of(size)
        self.current_allocated -= size
        self.allocated[pool] -= size
        self.counts[pool] -= 1
        self.total_freed += size
        self.num_frees += 1

    def empty_cache(self) -> None:
        """Give back every segment that holds no tensor (what cudaFree of unused segments does)."""
        for pool in self.reserved:
            unit = SMALL_SEGMENT if pool == "small_pool" else ROUND_LARGE
            self.reserved[pool] = _round(self.allocated[pool], unit)

    def reset_peaks(self) -> None:
        self.peak_allocated, self.peak_reserved = self.current_allocated, self.current_reserved

    @property
    def current_reserved(self) -> int:
        return sum(self.reserved.values())

    def nested(self) -> dict:
        """The nested dict torch._C._cuda_memoryStats returns (the keys torch's helpers and summary read)."""
        def stat(current, peak, allocated, freed):
            return {"current": current, "peak": peak, "allocated": allocated, "freed": freed}

        alloc = {"all": stat(self.current_allocated, self.peak_allocated, self.total_allocated, self.total_freed)}
        resv = {"all": stat(self.current_reserved, self.peak_reserved, self.current_reserved, 0)}
        count = {"all": stat(sum(self.counts.values()), sum(self.counts.values()), self.num_allocs,
                             self.num_frees)}
        for pool in ("small_pool", "large_pool"):
            alloc[pool] = stat(self.allocated[pool], self.allocated[pool], self.allocated[pool], 0)
            resv[pool] = stat(self.reserved[pool], self.reserved[pool], self.reserved[pool], 0)
            count[pool] = stat(self.counts[pool], self.counts[pool], self.counts[pool], 0)
        zero = {k: stat(0, 0, 0, 0) for k in alloc}
        segments = {k: stat(-(-v["current"] // SMALL_SEGMENT), 0, 0, 0) for k, v in resv.items()}
        return {"allocated_bytes": alloc, "reserved_bytes": resv, "active_bytes": alloc, "requested_bytes": alloc,
                "inactive_split_bytes": zero, "allocation": count, "active": count, "segment": segments,
                "inactive_split": zero, "oversize_allocations": zero["all"], "oversize_segments": zero["all"],
                "num_alloc_retries": 0, "num_ooms": 0, "num_sync_all_streams": 0, "num_device_alloc": 0,
                "num_device_free": 0, "max_split_size": -1}


class _Ref(weakref.ref):
    """A weak reference that remembers the storage its tensor counted against."""

    __slots__ = ("key",)


class Memory:
    """Which storages live on which simulated GPU, and each GPU's statistics."""

    def __init__(self):
        self.stats: dict[int, DeviceStats] = {}
        self.live: dict[int, list] = {}  # storage data_ptr -> [device index, block size, labelled tensors, label]
        self._refs: dict[int, weakref.ref] = {}

    def device(self, index: int) -> DeviceStats:
        """The statistics of one device (created on first use)."""
        stats = self.stats.get(index)
        if stats is None:
            stats = self.stats[index] = DeviceStats()
        return stats

    def track(self, t: torch.Tensor, label: str) -> None:
        """Count t's storage on the GPU its label names, until the last tensor labelled on it dies."""
        if not label.startswith("cuda:"):
            self.untrack(t)
            return
        storage = t.untyped_storage()  # inside the tracer's mode, or a cheap trip through its fast path
        key, nbytes = storage.data_ptr(), storage.nbytes()
        counted = t.__dict__.get("_pt_mem")
        if counted is not None:
            if counted[0] == key and self._owns(t, counted):
                return
            self.untrack(t)  # `t.data = other` gave it another storage, or it is a deep copy
        if not key:
            return  # an empty tensor holds no memory
        entry = self.live.get(key)
        if entry is None:
            index = int(label[5:])
            entry = self.live[key] = [index, block_size(nbytes), 0, label]
            (self.stats.get(index) or self.device(index)).allocate(entry[1])
        entry[2] += 1
        ref = _Ref(t, self._dropped)
        ref.key = key
        self._refs[id(ref)] = ref
        t.__dict__["_pt_mem"] = (key, id(ref))

    def untrack(self, t: torch.Tensor) -> None:
        """Stop counting t (it went back to the host)."""
        counted = t.__dict__.pop("_pt_mem", None)
        if counted is not None and self._owns(t, counted):
            del self._refs[counted[1]]
            self._release(counted[0])

    def _owns(self, t: torch.Tensor, counted: tuple) -> bool:
        """True when t itself is counted (a deep copy carries its original's `_pt_mem`)."""
        ref = self._refs.get(counted[1])
        return ref is not None and ref() is t

    def _dropped(self, ref) -> None:
        if self._refs.pop(id(ref), None) is not None:
            self._release(ref.key)

    def _release(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[2] -= 1
        if entry[2] <= 0:
            del self.live[key]
            self.device(entry[0]).free(entry[1])

    def label_of_storage(self, data_ptr: int) -> str | None:
        """The GPU a live storage sits on (for torch.save's location tags), or None for host memory."""
        entry = self.live.get(data_ptr)
        return entry[3] if entry else None

    def sweep_grads(self) -> None:
        """Count gradients autograd made for tracked tensors since the program last looked at them."""
        for ref in list(self._refs.values()):
            t = ref()
            if t is None or not t.requires_grad or not t.is_leaf:
                continue
            with torch._C.DisableTorchFunction():
                grad = t.grad
            label = t.__dict__.get("_pt_dev")
            if grad is not None and label and "_pt_mem" not in grad.__dict__:
                grad.__dict__["_pt_dev"] = label
                self.track(grad, label)

