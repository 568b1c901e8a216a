"""The CUDA runtime of the simulated GPUs, installed where torch's Python code calls into its C++ core.

torch.cuda, torch.accelerator and torch.backends are Python modules over a few dozen `torch._C._cuda_*` /
`_accelerator_*` entry points (device count, current device, streams, memory statistics ...). A CPU-only wheel
lacks them; `install()` provides them, answering from the simulated host (devices.py), its memory (memory.py)
and its streams (cuda_streams.py). torch's own Python then runs unchanged: `_lazy_init`, `torch.cuda.device(i)`,
`set_device`, `memory_allocated`, `manual_seed_all`, argument checks and their messages are torch's.

Entry points that are not simulated raise one line, `not simulated on this CPU-only host: <api>; it works on
a real GPU` (messages.NotSimulatedError), never an AttributeError from torch's insides.
"""

from __future__ import annotations

import os
import types
import uuid

import torch

from app.harness.machine import cuda_streams, parallel, unsimulated
from app.harness.machine.devices import Devices
from app.harness.machine.memory import Memory
from app.harness.wording import messages

# what torch.cuda.get_arch_list() says on the simulated CUDA 12.8 wheel: the wheel is built for PyTorch's
# TORCH_CUDA_ARCH_LIST of CUDA 12.8, "7.0;7.5;8.0;8.6;9.0;10.0;12.0" (pytorch/pytorch .ci/manywheel/build_cuda.sh:
# sm_50 and sm_60 were dropped there as deprecated in CUDA 12.8; sm_70 kept, pytorch/pytorch#157517)
ARCH_FLAGS = "sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
CUDNN_VERSION = 91002  # cuDNN 9.10.2, what torch's CUDA 12.8 wheels bundle
# torch.cuda.nccl.version() of torch 2.13's CUDA wheels, by the build's CUDA major: RELEASE.md's Release
# Compatibility Matrix, row 2.13 (pytorch/pytorch#187075, from .ci/docker/ci_commit_pins/nccl-cu126.txt and
# nccl.txt): "CUDA 12.6 (CUDNN 9.10.2.21) (NCCL 2.29.3), CUDA 13.0 (CUDNN 9.20.0.48) (NCCL 2.29.7)", and 13.2
# (experimental) with NCCL 2.29.7 too. The wheels' own pins: nvidia-nccl-cu12==2.29.3, nvidia-nccl-cu13==2.29.7
NCCL_VERSIONS = {"12": (2, 29, 3), "13": (2, 29, 7)}
# c10::detail::default_rng_seed_val: the seed of every generator, CPU or CUDA, until the program seeds it
DEFAULT_SEED = 67280421310721


class CudaDeviceProperties:
    """What torch.cuda.get_device_properties() returns (the fields of cudaDeviceProp torch exposes)."""

    def __init__(self, host, index: int):
        self.name, (self.major, self.minor) = host.gpu_name, host.capability
        self.total_memory, self.multi_processor_count = host.gpu_memory_bytes, host.multiprocessors
        self.is_integrated = self.is_multi_gpu_board = 0
        self.max_threads_per_multi_processor, self.max_threads_per_block, self.warp_size = 2048, 1024, 32
        self.regs_per_multiprocessor, self.shared_memory_per_block = 65536, 49152
        self.shared_memory_per_multiprocessor, self.shared_memory_per_block_optin = 233472, 232448
        self.L2_cache_size, self.gcnArchName = 50 << 20, host.gpu_name
        self.clock_rate, self.memory_clock_rate, self.memory_bus_width = 1980000, 2619000, 5120
        self.uuid = uuid.UUID(int=0x5EED_0000 + index)
        self.pci_bus_id, self.pci_device_id, self.pci_domain_id = 0x18 + 0x10 * index, 0, 0

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, multi_processor_count="
                f"{self.multi_processor_count}, uuid={self.uuid}, pci_bus_id={self.pci_bus_id}, pci_device_id="
                f"{self.pci_device_id}, pci_domain_id={self.pci_domain_id}, L2_cache_size="
                f"{self.L2_cache_size // (1 << 20)}MB)")


class _CudaError:
    success = 0


class SimCudart:
    """The few CUDA runtime calls torch.cuda reaches through `torch.cuda.cudart()`."""

    cudaError = _CudaError

    def __init__(self, runtime: "CudaRuntime"):
        self.runtime = runtime

    def cudaMemGetInfo(self, device: int) -> tuple[int, int]:
        return self.runtime.mem_get_info(device)

    def cudaProfilerStart(self) -> int:
        return 0

    def cudaProfilerStop(self) -> int:
        return 0

    def cudaGetErrorString(self, code) -> str:
        return "no error"


class _NvtxNoOps:
    """NVTX ranges are markers for a profiler; without one they do nothing (as on a GPU with no profiler)."""

    def __init__(self):
        self.depth = 0

    def rangePushA(self, message) -> int:
        self.depth += 1
        return self.depth - 1

    def rangePop(self) -> int:
        self.depth = max(0, self.depth - 1)
        return self.depth

    def rangeStartA(self, message) -> int:
        return 1

    def rangeEnd(self, range_id) -> None:
        return None

    def markA(self, message) -> None:
        return None


class CudaRuntime:
    """The state behind the fake entry points: devices, memory, streams, memory fractions."""

    def __init__(self, devices: Devices, memory: Memory):
        self.devices, self.memory = devices, memory
        self.streams = cuda_streams.StreamTable()
        self.fractions: dict[int, float] = {}
        self.in_bad_fork = False  # a child forked after CUDA was initialised (see _poison_fork)

    # ------------------------------------------------------------------ device selection
    def init(self) -> None:
        """What torch._C._cuda_init does: find the GPUs, then publish properties and generators; from then on a
        forked child cannot use CUDA (_poison_fork)."""
        self.devices.init()
        _poison_fork(self)
        count = self.devices.count()
        torch.cuda._get_device_properties = self.properties
        torch.cuda.default_generators = tuple(_generator() for _ in range(count))

    def rehearse_init(self) -> None:
        """Run torch's CUDA initialisation once and put back everything it set, in a waiting sandbox child before
        its job (session.warm_first_placement): the job's first placement then runs code this process ran already.

        torch.cuda._lazy_init is init() above and the calls torch queued at import: `_check_capability` and
        `_check_cubins` (the arch list against each GPU's capability), `_register_triton_kernels` (an import
        lookup of triton). Run cold in a job it cost 0.37-0.40 ms of CPU, 0.09 ms warm (thread_time, forked
        children of a warm server, medians of 30, 2026-12-05): first runs of code (copy-on-write faults) and
        importlib's path caches. What the program sees is the job's own initialisation, as before: CUDA
        uninitialised, no visible devices fixed (CUDA_VISIBLE_DEVICES is read again then), no generators, no
        poisoned fork, torch's queue as it was; a warning the check would give is dropped here (the job's own check
        gives it, once, as torch does). Skipped where CUDA is up already or a seeding call waits in torch's queue."""
        cuda = torch.cuda
        if cuda.is_initialized() or self.devices.initialized or cuda._lazy_seed_tracker.get_calls():
            return
        if not self.devices.host.cuda or not self.devices.count():
            return  # initialisation fails on this host: nothing to rehearse
        saved = {name: cuda.__dict__.get(name, Patches._MISSING) for name in _SET_BY_INIT}
        queued, poisoned = list(cuda._queued_calls), list(_POISONED)
        cuda.warnings = _NO_WARNINGS
        try:
            cuda._lazy_init()
        except Exception:  # the job's own initialisation raises it again, where it must
            pass
        finally:
            for name, value in saved.items():
                if value is Patches._MISSING:
                    cuda.__dict__.pop(name, None)
                else:
                    setattr(cuda, name, value)
            cuda._queued_calls[:] = queued
            _POISONED[:] = poisoned
            self.devices.visible = None
            self.in_bad_fork = False

    def properties(self, index: int) -> CudaDeviceProperties:
        return CudaDeviceProperties(self.devices.host, index)

    def get_device(self) -> int:
        self.devices.init()
        return self.devices.current

    def set_device(self, index: int) -> None:
        if index < 0:
            return
        self.devices.init()
        self.devices.check(index)
        self.devices.current = index

    def exchange_device(self, index: int) -> int:
        if index < 0:
            return -1
        previous = self.get_device()
        self.set_device(index)
        return previous

    def maybe_exchange_device(self, index: int) -> int:
        if index < 0:
            return -1
        previous = self.devices.current
        if self.devices.initialized:
            self.set_device(index)
        return previous

    # ------------------------------------------------------------------ memory
    def memory_stats(self, index: int) -> dict:
        self.memory.sweep_grads()
        return self.memory.device(self._index(index)).nested()

    def reset_peaks(self, index: int) -> None:
        self.memory.device(self._index(index)).reset_peaks()

    def reset_accumulated(self, index: int) -> None:
        self.memory.device(self._index(index)).reset_accumulated()

    def empty_cache(self) -> None:
        for allocator in self.memory.allocators.values():
            allocator.release_cached()

    def mem_get_info(self, index: int) -> tuple[int, int]:
        """cudaMemGetInfo: (free, total) bytes of the card, the CUDA context and the allocator's segments used."""
        index = self._index(index)
        self.devices.check(index)
        return self.memory.device(index).device_free(), self.devices.host.gpu_memory_bytes

    def _index(self, index) -> int:
        return self.devices.current if index is None or index < 0 else int(index)

    # ------------------------------------------------------------------ torch._C entry points
    def entry_points(self) -> dict:
        """The `torch._C._cuda_*` functions of a CUDA build, simulated."""
        table, devices = self.streams, self.devices
        return {
            "_cuda_getDeviceCount": devices.count,
            "_cuda_init": self.init,
            "_cuda_getDevice": self.get_device,
            "_cuda_setDevice": self.set_device,
            "_cuda_exchangeDevice": self.exchange_device,
            "_cuda_maybeExchangeDevice": self.maybe_exchange_device,
            "_cuda_synchronize": cuda_streams.CLOCK.tick,
            "_cuda_getCurrentStream": lambda index: table.get_current(self._index(index)),
            "_cuda_getDefaultStream": lambda index: (0, self._index(index), cuda_streams.CUDA_TYPE),
            "_cuda_setStream": table.set_current,
            "_cuda_getCurrentRawStream": lambda index: table.get_current(self._index(index))[0],
            "_cuda_isCurrentStreamCapturing": lambda: False,
            "_cuda_memoryStats": self.memory_stats,
            "_cuda_resetPeakMemoryStats": self.reset_peaks,
            "_cuda_resetAccumulatedMemoryStats": self.reset_accumulated,
            "_cuda_emptyCache": self.empty_cache,
            "_cuda_setMemoryFraction": lambda fraction, index: self.fractions.__setitem__(index, fraction),
            "_cuda_getMemoryFraction": lambda index: self.fractions.get(index, 1.0),
            "_cuda_getArchFlags": lambda: ARCH_FLAGS,
            "_cuda_getCompiledVersion": lambda: _compiled_version(devices.host.cuda_version),
            "_cuda_canDeviceAccessPeer": lambda a, b: True,
            "_cuda_hasPrimaryContext": lambda index: devices.initialized,
            "_cuda_ipc_collect": lambda: None,
            "_cuda_get_sync_debug_mode": lambda: 0,
            "_cuda_set_sync_debug_mode": lambda mode: None,
            "_cuda_clearCublasWorkspaces": lambda: None,
            "_cuda_get_cudnn_benchmark_limit": lambda: 10,
            "_cuda_set_cudnn_benchmark_limit": lambda limit: None,
            "_cuda_get_conv_benchmark_empty_cache": lambda: True,
            "_cuda_isHistoryEnabled": lambda: False,
            "_cuda_isInBadFork": lambda: self.in_bad_fork,
        }

    def accelerator_entry_points(self) -> dict:
        """The `torch._C._accelerator_*` functions torch.accelerator calls, for a CUDA build."""
        return {
            "_accelerator_getDeviceIndex": self.get_device,
            "_accelerator_setDeviceIndex": self.set_device,
            "_accelerator_exchangeDevice": self.exchange_device,
            "_accelerator_maybeExchangeDevice": self.maybe_exchange_device,
            "_accelerator_synchronizeDevice": lambda index: cuda_streams.CLOCK.tick(),
            "_accelerator_getStream": lambda index: torch.cuda.current_stream(index),
            "_accelerator_setStream": torch.cuda.set_stream,
            "_accelerator_isAllocatorInitialized": lambda: self.devices.initialized,
            "_accelerator_emptyCache": self.empty_cache,
            "_accelerator_emptyHostCache": lambda: None,
            "_accelerator_getDeviceStats": self.memory_stats,
            "_accelerator_resetPeakStats": self.reset_peaks,
            "_accelerator_resetAccumulatedStats": self.reset_accumulated,
            "_accelerator_setAllocatorSettings": self.memory.set_allocator_settings,
            "_accelerator_getMemoryInfo": self.mem_get_info,
        }

    def install(self, patches: "Patches") -> None:
        """Put the simulated entry points and classes where torch.cuda looks for them (a CUDA build)."""
        for name, fn in {**self.entry_points(), **self.accelerator_entry_points()}.items():
            patches.set(torch._C, name, fn)
        patches.set(torch._C, "__getattr__", _not_simulated_entry_point)
        patches.set(torch._C, "_has_cuda", True)
        patches.set(torch._C, "_has_cudnn", True)
        patches.set(torch.cuda, "_cudart", SimCudart(self))
        # torch.cuda read `_cuda_isInBadFork` once, at import, from a CPU-only torch._C that has none
        patches.set(torch.cuda, "_is_in_bad_fork", lambda: self.in_bad_fork)
        patches.set(torch.cuda, "_exchange_device", self.exchange_device)
        patches.set(torch.cuda, "_maybe_exchange_device", self.maybe_exchange_device)
        patches.set(torch.cuda, "_CudaDeviceProperties", CudaDeviceProperties)
        patches.set(torch.cuda, "default_generators", torch.cuda.default_generators)
        patches.set(torch.cuda.nvtx, "_nvtx", _NvtxNoOps())
        # a CUDA wheel (a GPU host's CPU pool) keeps its own version; the CPU-only wheel gets the simulated one
        patches.set(torch.version, "cuda", torch.version.cuda or self.devices.host.cuda_version)
        # the device count comes from the simulated host, never from NVML asking the real machine
        patches.set(torch.cuda, "_device_count_nvml", lambda: -1)
        patches.set(torch.cuda, "_raw_device_count_nvml", lambda: -1)
        if "_nccl_version" not in torch._C.__dict__:  # a CUDA wheel (a GPU host's CPU pool) keeps its own NCCL
            patches.set(torch._C, "_nccl_version", lambda: _nccl_version(self.devices.host.cuda_version))
            patches.set(torch._C, "_nccl_version_suffix", lambda: b"")
        cudnn = torch.backends.cudnn.m  # the module behind torch.backends.cudnn's flag properties
        patches.set(cudnn, "_init", lambda: True)
        patches.set(cudnn, "__cudnn_version", CUDNN_VERSION)
        cuda_streams.install(patches)
        parallel.install(patches)
        unsimulated.install(patches)


class Patches:
    """Attributes set on torch's modules, with their originals, so a scenario can be undone exactly."""

    _MISSING = object()

    def __init__(self):
        self.saved: list[tuple[object, str, object]] = []

    def set(self, owner, name: str, value) -> None:
        """Set owner.name = value, remembering what was there."""
        # an attribute its type keeps in a slot (a getset or member descriptor, as a function's __defaults__) is not in
        # the owner's __dict__: it is put back by setting it again, not by deleting it
        slot = isinstance(getattr(type(owner), name, None), (types.GetSetDescriptorType, types.MemberDescriptorType))
        original = getattr(owner, name) if slot else owner.__dict__.get(name, self._MISSING)
        self.saved.append((owner, name, original))
        setattr(owner, name, value)

    def restore(self) -> None:
        """Put every original back, newest first."""
        while self.saved:
            owner, name, original = self.saved.pop()
            if original is self._MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


# the runtime whose CUDA a fork poisons: the one initialised last (a process initialises CUDA once)
_POISONED: list[CudaRuntime] = []
# whether _forked_child is registered to run in forked children (once per process: a hook cannot be removed, and
# CudaRuntime.rehearse_init empties _POISONED again)
_AT_FORK: list[bool] = []
# what torch.cuda._lazy_init sets in torch.cuda (init() above, torch's own flags) or rehearse_init swaps
_SET_BY_INIT = ("_initialized", "_cached_device_count", "default_generators", "_get_device_properties", "warnings")


class _NoWarnings:
    """torch.cuda's `warnings` while CudaRuntime.rehearse_init runs: a warning there would be marked as shown."""

    @staticmethod
    def warn(*args, **kwargs) -> None:
        return None


_NO_WARNINGS = _NoWarnings()


def _poison_fork(runtime: CudaRuntime) -> None:
    """torch/csrc/cuda/Module.cpp, poison_fork: once CUDA is initialised, a forked child is "in a bad fork", and
    its first CUDA call (torch.cuda._lazy_init) raises `Cannot re-initialize CUDA in forked subprocess`. So a
    DataLoader worker, forked from a program that already used the GPU, fails where it touches CUDA, as on a
    real GPU, and works on main-memory tensors, as there."""
    if not _AT_FORK:
        os.register_at_fork(after_in_child=_forked_child)
        _AT_FORK.append(True)
    _POISONED[:] = [runtime]


def _forked_child() -> None:
    for runtime in _POISONED:
        runtime.in_bad_fork = True


def _generator() -> torch.Generator:
    g = torch._C.Generator()
    g.manual_seed(DEFAULT_SEED)
    return g


def _compiled_version(version: str) -> int:
    major, minor = (int(p) for p in version.split(".")[:2])
    return major * 1000 + minor * 10


def _nccl_version(cuda_version: str) -> int:
    """NCCL's version as torch._C._nccl_version() packs it (torch/csrc/cuda/nccl.cpp: version(), NCCL_MAJOR << 32 |
    NCCL_MINOR << 16 | NCCL_PATCH, which torch.cuda.nccl.version() unpacks into its tuple)."""
    major, minor, patch = NCCL_VERSIONS.get(cuda_version.split(".")[0], NCCL_VERSIONS["13"])
    return major << 32 | minor << 16 | patch


def _not_simulated_entry_point(name: str):
    """torch._C's module __getattr__: a CUDA entry point nobody simulated names itself when called. NCCL's
    (`_nccl_all_reduce` ...) exist too, as on a CUDA build: torch.cuda.nccl.is_available() asks for one by
    hasattr, and the direct calls of torch.cuda.nccl then say they are not simulated (torch.distributed's
    collectives are: machine/distributed.py)."""
    if name.startswith(("_cuda_", "_nccl_")):
        def not_simulated(*args, **kwargs):
            raise messages.NotSimulatedError(f"torch._C.{name} (reached from torch.cuda)")
        return not_simulated
    raise AttributeError(f"module 'torch._C' has no attribute '{name}'")
