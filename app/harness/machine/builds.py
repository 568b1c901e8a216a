"""Which torch build the learner's program believes it runs on, and which devices that build finds.

A build is more than "is there a GPU": the Linux CUDA wheel knows CUDA even on a machine without an NVIDIA
driver (`torch.accelerator.current_accelerator()` is `cuda`, `is_available()` is False), the macOS arm64 wheel
knows MPS whatever the hardware (`torch.backends.mps.is_built()` is True), and the CPU-only wheel knows neither.
The installed wheel here is CPU-only, so this module makes torch's own functions answer for the simulated
build: it sets the build flags torch's Python reads (`torch._C._has_cuda`, `_has_mps`, the accelerator torch
was compiled for, `torch.version.cuda`), installs the CUDA runtime of a CUDA build (cuda_runtime.py), and lets
`torch.device(0)` name the build's accelerator. torch.cuda.is_available(), torch.accelerator.*,
torch.backends.mps.* and friends are torch's own code, so `from torch.cuda import is_available` agrees too.

A probe may ask "and on another machine?": `scenario(host)` switches build and devices for a while.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from app.harness.contract import SimulatedHost
from app.harness.machine.cuda_runtime import CudaRuntime, Patches
from app.harness.machine.devices import Devices

_REAL_DEVICE = torch._C.device
# lru-cached answers that belong to one build (kept here: the tracer wraps the public names)
_CACHED = (torch.backends.mps.is_available, torch.cuda._check_bf16_tensor_supported)
# torch functions a learner might replace to fool the grader; compared with the originals after the run
WATCHED_FUNCTIONS = [("torch.cuda", "is_available"), ("torch.cuda", "device_count"),
                     ("torch.backends.mps", "is_available"), ("torch.backends.mps", "is_built"),
                     ("torch.mps", "is_available"), ("torch.accelerator", "is_available"),
                     ("torch.accelerator", "current_accelerator"), ("torch.accelerator", "device_count")]
_MODULES = {"torch.cuda": torch.cuda, "torch.backends.mps": torch.backends.mps, "torch.mps": torch.mps,
            "torch.accelerator": torch.accelerator}


class _DeviceType(type):
    """A stand-in for the `torch.device` class whose calls accept an ordinal as a real build does.

    `torch.device(0)` asks the C++ core for the build's accelerator; the CPU-only wheel has none and refuses, so
    calls with one int are answered here. Everything else, and every instance, is the real torch.device:
    isinstance() and pickling work as before.
    """

    builds: "Availability | None" = None

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], int) and not isinstance(args[0], bool):
            accelerator = cls.builds.devices.host.accelerator if cls.builds else None
            if accelerator:
                return _REAL_DEVICE(accelerator, args[0])
        return _REAL_DEVICE(*args, **kwargs)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _REAL_DEVICE)

    def __subclasscheck__(cls, sub) -> bool:
        return sub is cls or issubclass(sub, _REAL_DEVICE)

    def __getattr__(cls, name):
        return getattr(_REAL_DEVICE, name)


class device(metaclass=_DeviceType):
    """torch.device (see _DeviceType)."""

    __module__ = "torch"


class Availability:
    """The simulated build: its flags, its CUDA runtime, and the scenario switches a probe may make.

    simulated=False (the job really has CUDA): nothing is changed, except inside a probe's scenario.
    """

    def __init__(self, devices: Devices, runtime: CudaRuntime, *, simulated: bool = True, mps=None):
        self.devices, self.runtime, self.simulated = devices, runtime, simulated
        self.mps = mps  # the Mac's GPU (mps.MpsRuntime), answering torch.mps.* where the host has one
        self.patches = Patches()
        self.remember_functions()

    def remember_functions(self) -> None:
        """Note torch's availability functions as they are now (after the tracer wrapped them)."""
        self.originals = {f"{m}.{n}": getattr(_MODULES[m], n) for m, n in WATCHED_FUNCTIONS}

    def install(self) -> None:
        """Make torch answer for the simulated build (once, before the learner's code runs)."""
        if not self.simulated:
            return
        _DeviceType.builds = self
        torch.device = device
        self._apply_build()

    def accelerator(self) -> torch.device | None:
        """What the C++ core says the build was compiled for (torch.accelerator.current_accelerator)."""
        kind = self.devices.host.accelerator
        return _REAL_DEVICE(kind) if kind else None

    def _apply_build(self) -> None:
        """Set torch's build flags (and a CUDA build's runtime) for the current host."""
        self.patches.restore()
        host, patches = self.devices.host, self.patches
        if host.cuda:
            self.runtime.install(patches)
        if host.mps and self.mps is not None:
            self.mps.install(patches)
        patches.set(torch._C, "_accelerator_getAccelerator", self.accelerator)
        patches.set(torch._C, "_has_mps", host.mps_built)
        patches.set(torch._C, "_mps_is_available", lambda: self.devices.host.mps)
        # torch.cuda remembers whether CUDA was initialised and how many GPUs it found: per build
        patches.set(torch.cuda, "_initialized", host.cuda and self.devices.initialized)
        patches.set(torch.cuda, "_cached_device_count", None)
        for cached in _CACHED:
            cached.cache_clear()

    def tampered(self) -> list[str]:
        """Names of torch's availability functions the learner's code replaced."""
        return [name for name, fn in self.originals.items()
                if getattr(_MODULES[name.rsplit(".", 1)[0]], name.rsplit(".", 1)[1], None) is not fn]

    @contextmanager
    def scenario(self, host: SimulatedHost):
        """Pretend, for the duration, to be another build with other devices."""
        initialized, generators = torch.cuda._initialized, torch.cuda.default_generators
        try:
            with self.devices.scenario(host):
                self._apply_build()
                yield
        finally:
            self.patches.restore()
            if self.simulated:
                self._apply_build()
            torch.cuda._initialized, torch.cuda.default_generators = initialized, generators

    def become(self, host: SimulatedHost) -> None:
        """Be another build with other devices for the rest of the process, as scenario(host) is while it lasts:
        for a forked copy of the job that ends on that machine (elsewhere.py), where undoing it would be wasted
        work (two rounds of torch's patches, ~0.5 ms of CPU per copy)."""
        self.devices.become(host)
        self._apply_build()
