"""The Apple silicon GPU of the simulated Mac: what torch's MPS backend does differently from CUDA.

A Mac is not a CUDA machine with another label. On the macOS arm64 wheel torch 2.13:

* refuses float64 on the GPU (TypeError, aten/src/ATen/mps/EmptyTensor.cpp: MPS_ERROR_DOUBLE_NOT_SUPPORTED);
* has no MPS kernel for some ATen overloads (listed from native_functions.yaml by
  app/harness/wording/gen_mps_fallbacks.py into mps_missing_ops.json); calling one raises torch's
  NotImplementedError (aten/src/ATen/mps/MPSFallback.mm: mps_error_fallback), unless PYTORCH_ENABLE_MPS_FALLBACK=1
  was set before torch was imported: then the op runs on the CPU with one UserWarning (mps_fallback,
  TORCH_WARN_ONCE) and its results come back as MPS tensors;
* answers torch.mps.* (synchronize, memory figures, empty_cache, manual_seed) from its own allocator, which refuses
  an allocation past PYTORCH_MPS_HIGH_WATERMARK_RATIO x the device's recommended working set
  (aten/src/ATen/mps/MPSAllocator.mm: alloc_buffer_block).

Device-mismatch wording on MPS is in app/harness/wording/wording.py (mps_message).
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import warnings
import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from app.harness.machine.allocator import format_size

_DATA = json.loads((Path(__file__).parents[1] / "wording" / "mps_missing_ops.json").read_text("utf-8"))
MISSING = frozenset(_DATA["missing"])
ALWAYS_FALLBACK = frozenset(_DATA["always_fallback"])
# Overloads only the CPU path of a composite op reaches; on a Mac the same composite takes an MPS path instead
# (aten/src/ATen/native/transformers/attention.cpp: scaled_dot_product_attention picks
# _scaled_dot_product_attention_math_for_mps on MPS), so meeting them here says nothing about the Mac.
CPU_PATH_ONLY = frozenset({"_scaled_dot_product_flash_attention_for_cpu",
                           "_scaled_dot_product_flash_attention_for_cpu_backward"})
# CompositeImplicitAutograd ops MPSFallback.mm registers to mps_fallback: on the CPU they decompose into these
CPU_DECOMPOSED = {"_linalg_svd": "linalg_svd", "_linalg_svd.U": "linalg_svd.U"}

# aten/src/ATen/mps/EmptyTensor.cpp (MPS_ERROR_DOUBLE_NOT_SUPPORTED), raised with TORCH_CHECK_TYPE: a TypeError
FLOAT64_REFUSED = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
                   "Please use float32 instead.")
_REFUSED_DTYPES = (torch.float64,)
# aten/src/ATen/mps/MPSFallback.mm: mps_error_fallback (TORCH_CHECK_NOT_IMPLEMENTED). The commit hash is the
# build's caffe2::GetBuildOptions()["COMMIT_SHA"]: the v2.13.0 release's, which no source states; named here.
COMMIT_SHA = "(the v2.13.0 release commit)"
NOT_IMPLEMENTED = ("The operator '{op}' is not currently implemented for the MPS device. If you want this op to be "
                   "considered for addition please comment on https://github.com/pytorch/pytorch/issues/141287 and "
                   "mention use-case, that resulted in missing op as well as commit hash {sha}. As a temporary fix, "
                   "you can set the environment variable `PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a fallback "
                   "for this op. WARNING: this will be slower than running natively on MPS.")
# aten/src/ATen/mps/MPSFallback.mm: mps_fallback (TORCH_WARN_ONCE: once per process, for the first op only)
FALLBACK_WARNING = ("The operator '{op}' is not currently supported on the MPS backend and will fall back to run on "
                    "the CPU. This may have performance implications.")
# aten/src/ATen/mps/MPSAllocator.mm: alloc_buffer_block, raised as torch.OutOfMemoryError
OUT_OF_MEMORY = ("MPS backend out of memory (MPS allocated: {allocated}, other allocations: {other}, max allowed: "
                 "{allowed}). Tried to allocate {size} on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to "
                 "disable upper limit for memory allocations (may cause system failure).")
# docs/source/mps_environment_variables: PYTORCH_MPS_HIGH_WATERMARK_RATIO defaults to 1.7
DEFAULT_HIGH_WATERMARK = 1.7
# MTLDevice.recommendedMaxWorkingSetSize, the figure torch.mps.recommended_max_memory() returns. Modeled, not
# measured: macOS reports about 3/4 of unified memory on Macs with more than 32 GB (2/3 on smaller ones), the
# ratio behind the "max allowed" figures of MPS out-of-memory reports (1.7 x 48 GiB on 64 GB machines).
WORKING_SET_SHARE = 0.75
# MPS buffers are allocated in whole pages (16 KiB on Apple silicon: vm_page_size)
PAGE = 16 << 10


def _overload(func) -> str:
    schema = func._schema
    name = schema.name.split("::", 1)[-1]
    return f"{name}.{schema.overload_name}" if schema.overload_name else name


def operator_name(overload: str) -> str:
    """How c10::OperatorName prints: `aten::linalg_eig`, `aten::linalg_eig.out`."""
    return f"aten::{overload}"


class MpsRuntime:
    """The Mac's GPU: its fallback switch, its allocator, and the torch._C._mps_* entry points over them."""

    def __init__(self, total_memory: int):
        self.total_memory = total_memory
        self.fallback: bool | None = None  # PYTORCH_ENABLE_MPS_FALLBACK as torch read it at import
        self.warned = False
        self.live: dict[int, int] = {}  # storage key -> bytes
        self._refs: dict[int, weakref.ref] = {}
        self.generator = torch.Generator()
        self.learner_file: str | None = None

    # ------------------------------------------------------------------ PYTORCH_ENABLE_MPS_FALLBACK
    def watch_import(self, filename: str) -> None:
        """Read PYTORCH_ENABLE_MPS_FALLBACK when the program imports torch, as torch's static initialiser does.

        torch is already loaded in the sandbox, so `import torch` runs nothing: the first import statement
        naming torch is the moment a Mac reads the variable. A program that never imports torch uses no MPS.
        """
        original = builtins.__import__
        runtime = self

        def watching(name, globals=None, locals=None, fromlist=(), level=0):
            if (runtime.fallback is None and level == 0 and (name == "torch" or name.startswith("torch."))
                    and (globals or {}).get("__file__") == filename):
                runtime.fallback = _enabled(os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK"))
                builtins.__import__ = original
            return original(name, globals, locals, fromlist, level)

        builtins.__import__ = watching

    def fallback_enabled(self) -> bool:
        if self.fallback is None:
            self.fallback = _enabled(os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK"))
        return self.fallback

    def run(self, func, args, kwargs):
        """Run one call whose tensors sit on the Mac's GPU, failing (or falling back) where MPS has no kernel."""
        with _MissingKernels(self):
            return func(*args, **kwargs)

    def missing(self, overload: str) -> None:
        """An op without an MPS kernel was reached: raise torch's error, or warn once and run it on the CPU."""
        if overload in CPU_PATH_ONLY:
            return
        overload = CPU_DECOMPOSED.get(overload, overload)
        always = overload in ALWAYS_FALLBACK
        if not always and overload not in MISSING:
            return
        if not always and not self.fallback_enabled():
            raise NotImplementedError(NOT_IMPLEMENTED.format(op=operator_name(overload), sha=COMMIT_SHA))
        if not self.warned:
            self.warned = True
            _warn_at_learner(FALLBACK_WARNING.format(op=operator_name(overload)), self.learner_file)

    # ------------------------------------------------------------------ memory
    def recommended_max(self) -> int:
        return int(self.total_memory * WORKING_SET_SHARE)

    def max_allowed(self) -> int | None:
        """m_max_total_allowed_size: high watermark ratio x recommended working set; None when the ratio is 0."""
        ratio = os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO")
        ratio = float(ratio) if ratio else DEFAULT_HIGH_WATERMARK
        return None if ratio == 0 else int(ratio * self.recommended_max())

    def allocated(self) -> int:
        return sum(self.live.values())

    def check(self, nbytes: int) -> None:
        """Raise torch.OutOfMemoryError as MPSAllocator does when nbytes more would pass the high watermark."""
        size = -(-nbytes // PAGE) * PAGE
        allowed = self.max_allowed()
        if allowed is not None and self.allocated() + size > allowed:
            raise torch.OutOfMemoryError(OUT_OF_MEMORY.format(
                allocated=format_size(self.allocated()), other=format_size(0), allowed=format_size(allowed),
                size=format_size(size)))

    def track(self, t: torch.Tensor) -> None:
        """Count t's storage until the last tensor on it is garbage (raises first when it does not fit)."""
        with torch._C.DisableTorchFunction():
            storage = t.untyped_storage()
            key, nbytes = storage._cdata, storage.nbytes()
        if key in self.live or not nbytes:
            return
        self.check(nbytes)
        self.live[key] = -(-nbytes // PAGE) * PAGE
        ref = weakref.ref(t, lambda _r, key=key: self._drop(key))
        self._refs[key] = ref

    def _drop(self, key: int) -> None:
        self._refs.pop(key, None)
        self.live.pop(key, None)

    # ------------------------------------------------------------------ torch._C entry points
    def install(self, patches) -> None:
        """What torch.mps calls into, answered for the simulated Mac."""
        patches.set(torch._C, "_mps_deviceSynchronize", lambda: None)
        patches.set(torch._C, "_mps_currentAllocatedMemory", self.allocated)
        patches.set(torch._C, "_mps_driverAllocatedMemory", self.allocated)
        patches.set(torch._C, "_mps_recommendedMaxMemory", self.recommended_max)
        patches.set(torch._C, "_mps_emptyCache", lambda: None)  # nothing is cached: freed buffers go at once
        patches.set(torch._C, "_mps_get_default_generator", lambda: self.generator)
        patches.set(torch._C, "_mps_setMemoryFraction", lambda fraction: None)


def refuse_dtype(dtype) -> None:
    """Raise what MPS raises for a tensor of a dtype it has no storage for."""
    if dtype in _REFUSED_DTYPES:
        raise TypeError(FLOAT64_REFUSED)


def _warn_at_learner(message: str, filename: str | None) -> None:
    """A warning torch raises from C++ is reported at the Python line that called the op: the learner's."""
    frame = sys._getframe(1)
    while frame is not None and filename and frame.f_code.co_filename != filename:
        frame = frame.f_back
    if frame is None:
        warnings.warn(message, UserWarning, stacklevel=3)
        return
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, UserWarning, frame.f_code.co_filename, frame.f_lineno,
                           frame.f_globals.get("__name__"), registry)


def _enabled(value: str | None) -> bool:
    """MPSFallback.mm: `!value || std::stoi(value) == 0` means off."""
    if not value:
        return False
    try:
        return int(value.strip().split()[0]) != 0
    except (ValueError, IndexError):
        return False


class _MissingKernels(TorchDispatchMode):
    """Stop at the first ATen overload the Mac has no kernel for (ops a composite decomposes into included)."""

    def __init__(self, runtime: MpsRuntime):
        super().__init__()
        self.runtime = runtime

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.runtime.missing(_overload(func))
        return func(*args, **(kwargs or {}))
