"""Memory of the simulated GPUs, kept as torch 2.13's CUDA caching allocator keeps it (allocator.py does the
allocator's arithmetic), counted from the simulated tensors' storages.

Every tensor that gets a GPU label is tracked by its storage (views share one); the storage's block stays
allocated on that GPU until the last labelled tensor on it is garbage, or, once autograd saves it for backward,
until the graph that saved it is gone. So `memory_allocated()`, `max_memory_allocated()`, `memory_reserved()`,
`memory_stats()`, `memory_summary()` and `mem_get_info()` show what a real card would show for the same tensors,
and an allocation the card cannot hold raises torch.OutOfMemoryError with torch's own message, before any host
memory is touched (`preflight`). What a real card also holds and this does not see: cuBLAS/cuDNN workspaces,
and intermediates a kernel frees before it returns.

Tensors too large for the job's host memory are kept without values (meta tensors wearing the GPU's label:
`dataless`); they count here exactly like the others.
"""

from __future__ import annotations

import weakref

import torch

from app.harness.machine.allocator import Allocator, alloc_conf_expandable, round_size
from app.harness.machine.clock import CLOCK, _cpu

# bytes of the card the CUDA context takes before the first tensor (kernels, cuBLAS handles); mem_get_info counts
# it as used. Modeled: a few hundred MiB on recent cards with lazy module loading (CUDA_MODULE_LOADING=LAZY,
# the default since CUDA 11.7); scripts/gpu-check records the real figure where a GPU is lent
CONTEXT_BYTES = 512 << 20


class _Ref(weakref.ref):
    """A weak reference that remembers the storage its tensor counted against."""

    __slots__ = ("key",)


class Memory:
    """Which storages live on which simulated GPU, and each GPU's caching allocator."""

    def __init__(self, capacity=None, fraction=None):
        # capacity(index) -> bytes of the card; fraction(index) -> set_per_process_memory_fraction's value
        self.capacity = capacity or (lambda index: 80 << 30)
        self.fraction = fraction or (lambda index: 1.0)
        self.allocators: dict[int, Allocator] = {}
        self.live: dict[int, list] = {}  # storage key -> [device, block, labelled tensors, label, ptr, host bytes]
        self._refs: dict[int, weakref.ref] = {}
        self._ptrs: dict[int, int] = {}  # host data_ptr of a storage with values -> its key (torch.save's tags)
        self.host_bytes = 0  # bytes of host memory the tracked storages with values take
        self.expandable: bool | None = None  # expandable_segments, once the program set it itself
        self._on_drop = self._dropped  # the weak references' callback, bound once (one per tracked tensor)

    @property
    def stats(self) -> dict[int, Allocator]:
        return self.allocators

    def device(self, index: int) -> Allocator:
        """The allocator of one device (created on first use)."""
        allocator = self.allocators.get(index)
        if allocator is None:
            allocator = self.allocators[index] = Allocator(
                index, self.capacity(index), CONTEXT_BYTES,
                expandable=alloc_conf_expandable() if self.expandable is None else self.expandable,
                fraction=lambda: self.fraction(index))
        return allocator

    # ------------------------------------------------------------------ before an allocation
    def preflight(self, label: str, nbytes: int) -> None:
        """Raise torch.OutOfMemoryError now if the GPU `label` names cannot hold nbytes more (nothing touched)."""
        if label.startswith("cuda:") and nbytes:
            self.device(int(label[5:])).check(nbytes)

    # ------------------------------------------------------------------ tracking
    def track(self, t: torch.Tensor, label: str) -> None:
        """Count t's storage on the GPU its label names, until the last tensor labelled on it dies."""
        if not label.startswith("cuda:"):
            self.untrack(t)
            return
        # t's storage: its StorageImpl's address (the key, shared by views, real or meta), its bytes, and the address
        # of its values (0 for a meta storage); read here, not in a function of its own: every GPU tensor comes here
        with torch._C.DisableTorchFunction():  # never through the tracer's mode (it may be what is tracking t)
            storage = t.untyped_storage()
            # a plain tensor's (or Parameter's) is_meta, not its storage's device: a storage's `.device` builds a
            # torch.device object (this took 0.64 us per tracked tensor with it, 0.36 without). A subclass may
            # answer otherwise than its storage (a FakeTensor says cpu over a meta storage): its storage is asked
            kind = type(t)
            dataless = t.is_meta if kind is torch.Tensor or kind is torch.nn.Parameter \
                else storage.device.type == "meta"
            key, nbytes = storage._cdata, storage.nbytes()
            ptr = 0 if dataless else storage.data_ptr()
        counted = t.__dict__.get("_pt_mem")
        if counted is not None:
            if counted[0] == key and self._owns(t, counted):
                return
            self.untrack(t)  # `t.data = other` gave it another storage, or it is a deep copy
        if not nbytes:
            return  # an empty tensor holds no memory
        entry = self.live.get(key)
        if entry is None:
            index = int(label[5:])
            allocator = self.allocators.get(index) or self.device(index)
            block = allocator.malloc(nbytes)  # raises torch.OutOfMemoryError as the card would
            entry = self.live[key] = [index, block, 0, label, ptr, 0 if dataless else nbytes]
            if ptr:
                self._ptrs[ptr] = key
            self.host_bytes += entry[5]
        entry[2] += 1
        ref = _Ref(t, self._on_drop)
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
        """A tracked tensor is gone: its storage's block is freed with the last tensor counted on it.

        The simulation's bookkeeping when the program drops a tensor is not its time (CLOCK.excluded, written out:
        this runs for every GPU tensor the program lets go). Inside a traced call that did device work already (a
        backward pass freeing the activations it saved) the whole call is emulation, whose end takes the CPU mark
        again (DeviceClock.leave): nothing to measure out there, and the two CPU-clock reads (a system call each,
        0.45-1.9 us in the sandbox) were most of what such a drop cost."""
        outside = not (CLOCK._depth and CLOCK._touched)
        if outside:
            started = _cpu()
        try:
            if self._refs.pop(id(ref), None) is not None:  # else untracked already (it went back to the host)
                # _release, written out
                key = ref.key
                entry = self.live.get(key)
                if entry is not None:
                    entry[2] -= 1
                    if entry[2] <= 0:
                        del self.live[key]
                        if entry[4]:
                            self._ptrs.pop(entry[4], None)
                        self.host_bytes -= entry[5]
                        self.allocators[entry[0]].free(entry[1])
        finally:
            if outside:
                CLOCK._cpu_mark += _cpu() - started

    def _release(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[2] -= 1
        if entry[2] <= 0:
            del self.live[key]
            if entry[4]:
                self._ptrs.pop(entry[4], None)
            self.host_bytes -= entry[5]
            self.allocators[entry[0]].free(entry[1])  # made by the track() that counted it

    def label_of_storage(self, data_ptr: int) -> str | None:
        """The GPU a live storage sits on (for torch.save's location tags), or None for host memory."""
        key = self._ptrs.get(data_ptr)
        entry = self.live.get(key) if key is not None else None
        return entry[3] if entry else None

    def dataless_reason(self, nbytes: int, host) -> str | None:
        """Why a new GPU tensor of nbytes is kept without values (a key of messages.NO_VALUES_BECAUSE: "large",
        "budget"), or None when it keeps its values."""
        if nbytes >= host.dataless_tensor_bytes:
            return "large"
        return "budget" if self.host_bytes + nbytes > host.device_data_bytes else None

    def over_budget(self, host) -> bool:
        """True once the GPU tensors with values hold the job's budget of host memory (Host.device_data_bytes)."""
        return self.host_bytes >= host.device_data_bytes

    # ------------------------------------------------------------------ autograd's saved tensors
    def pack_saved(self, t: torch.Tensor):
        """saved_tensors_hooks' pack: keep the tensor object, so its block stays allocated while its graph lives."""
        return t

    def sweep_grads(self, valueless: bool = False) -> None:
        """Count gradients autograd made for tracked tensors since the program last looked at them; `valueless`:
        they came from a data-less loss, so their values are unknown."""
        # one DisableTorchFunction around the walk, not one per tensor (each backward walks every tracked tensor)
        with torch._C.DisableTorchFunction():
            for ref in list(self._refs.values()):
                t = ref()
                if t is None or not t.requires_grad or not t.is_leaf:
                    continue
                grad = t.grad
                if grad is None:
                    continue
                label = t.__dict__.get("_pt_dev")
                if not label:
                    continue
                if valueless or grad.is_meta or "_pt_nodata" in t.__dict__:
                    grad.__dict__["_pt_nodata"] = True
                if "_pt_mem" not in grad.__dict__:
                    grad.__dict__["_pt_dev"] = label
                    self.track(grad, label)

    def set_allocator_settings(self, text: str) -> None:
        """torch._C._accelerator_setAllocatorSettings("expandable_segments:True") for every GPU, now and later."""
        for item in text.split(","):
            key, _, value = item.partition(":")
            if key.strip() == "expandable_segments":
                self.expandable = value.strip().lower() == "true"
                for allocator in self.allocators.values():
                    allocator.expandable = self.expandable

__all__ = ["CONTEXT_BYTES", "Memory", "round_size"]
