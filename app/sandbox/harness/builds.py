"""Which accelerators the learner's code believes exist.

On a CPU-only host the harness says CUDA is there (the grader simulates it, see placement.py). For
`pick-device`, a probe asks again under each scenario (CUDA yes/no x MPS yes/no). Every availability function
torch offers is replaced ONCE, before the learner's code runs, by a function that reads the current scenario;
so `from torch.cuda import is_available`, the classic one-liner and the `torch.accelerator` API all agree.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

SIMULATED_GPU_NAME = "NVIDIA GPU (simulated on CPU by the course grader)"


class _SimulatedStream:
    """The stream a simulated GPU hands out: work is done the moment it is queued, nothing is ever captured."""

    def is_capturing(self) -> bool:
        return False

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def wait_stream(self, stream) -> None:
        return None


class Availability:
    """The current scenario and the fake availability functions that report it."""

    def __init__(self, *, simulated: bool):
        self.simulated = simulated  # True: no real CUDA here, so CUDA-only helpers are faked too
        self.cuda = True
        self.mps = False
        self.fakes: dict[str, object] = {}

    def _accelerator(self) -> torch.device | None:
        if self.cuda:
            return torch.device("cuda")
        return torch.device("mps") if self.mps else None

    def install(self) -> None:
        """Replace torch's availability functions with ones that answer from the scenario."""
        real_count = torch.cuda.device_count if not self.simulated else None

        def cuda_count() -> int:
            return (real_count() if real_count else 1) if self.cuda else 0

        def current_accelerator(check_available: bool = False) -> torch.device | None:
            return self._accelerator()

        fakes = {
            (torch.cuda, "is_available"): lambda: self.cuda,
            (torch.cuda, "device_count"): cuda_count,
            (torch.backends.mps, "is_available"): lambda: self.mps,
            (torch.backends.mps, "is_built"): lambda: self.mps,
            (torch.mps, "is_available"): lambda: self.mps,
            (torch.mps, "device_count"): lambda: int(self.mps),
            (torch.accelerator, "is_available"): lambda: self._accelerator() is not None,
            (torch.accelerator, "current_accelerator"): current_accelerator,
            (torch.accelerator, "device_count"): lambda: 1 if self._accelerator() is not None else 0,
        }
        if self.simulated:  # CUDA helpers that would raise "Torch not compiled with CUDA enabled"
            fakes.update({
                (torch.cuda, "current_device"): lambda: 0,
                (torch.cuda, "get_device_name"): lambda device=None: SIMULATED_GPU_NAME,
                (torch.cuda, "get_device_capability"): lambda device=None: (9, 0),
                (torch.cuda, "synchronize"): lambda device=None: None,
                (torch.cuda, "empty_cache"): lambda: None,
                (torch.cuda, "memory_allocated"): lambda device=None: 0,
                (torch.cuda, "set_device"): lambda device: None,
                (torch.accelerator, "current_device_index"): lambda: 0,
                (torch.accelerator, "synchronize"): lambda device=None: None,
                # optimizers ask whether a CUDA graph is being captured (Optimizer._accelerator_graph_capture_...)
                (torch.accelerator, "current_stream"): lambda device=None: _SimulatedStream(),
                (torch.cuda, "current_stream"): lambda device=None: _SimulatedStream(),
                (torch.cuda, "is_current_stream_capturing"): lambda: False,
            })
        for (module, name), fake in fakes.items():
            setattr(module, name, fake)
            self.fakes[f"{module.__name__}.{name}"] = fake

    def tampered(self) -> list[str]:
        """Names of availability functions the learner's code replaced."""
        out = []
        for dotted, fake in self.fakes.items():
            module_name, name = dotted.rsplit(".", 1)
            module = {"torch.cuda": torch.cuda, "torch.backends.mps": torch.backends.mps, "torch.mps": torch.mps,
                      "torch.accelerator": torch.accelerator}.get(module_name)
            if module is not None and getattr(module, name, None) is not fake:
                out.append(dotted)
        return out

    @contextmanager
    def scenario(self, *, cuda: bool, mps: bool):
        """Pretend, for the duration, that CUDA and MPS are (not) available."""
        saved = (self.cuda, self.mps)
        self.cuda, self.mps = cuda, mps
        try:
            yield
        finally:
            self.cuda, self.mps = saved
