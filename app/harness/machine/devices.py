"""The simulated host's devices: how many there are, which ones the program sees, which one is current.

CUDA reads `CUDA_VISIBLE_DEVICES` once, when it initialises (the first tensor on a GPU, `set_device`,
`current_device()` ...); until then `torch.cuda.device_count()` re-reads it on every call, afterwards it is
fixed. This module keeps that timeline for the simulated GPUs, and turns every way of naming a device (`0`,
`"cuda"`, `"cuda:1"`, `torch.device("cuda", 1)`) into the label a simulated tensor carries (`"cuda:1"`).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from app.harness.contract import SimulatedHost
from app.harness.wording import messages

_REAL_DEVICE = torch._C.device  # the C type; `torch.device` may be replaced by builds.DeviceType
LABELS_KEPT = 256  # device names whose label is remembered


class Devices:
    """The devices of one simulated host, and the CUDA initialisation timeline."""

    def __init__(self, host: SimulatedHost):
        self.host = host
        self.visible: list[int] | None = None  # physical ordinals, fixed at initialisation
        self.current = 0  # the index torch.cuda.current_device() answers
        self._labels: dict[tuple, str] = {}  # (device or its name, current) -> label (label())

    # ------------------------------------------------------------------ counting
    def count(self) -> int:
        """Devices the program can use now (CUDA_VISIBLE_DEVICES applied, read again until initialisation)."""
        if self.visible is not None:
            return len(self.visible)
        return len(self._parse_visible())

    def _parse_visible(self) -> list[int]:
        """CUDA_VISIBLE_DEVICES as CUDA reads it: torch's own parser, trimmed at the first missing ordinal."""
        present = self.host.devices_present()
        if not self.host.cuda:
            return list(range(present))
        out = []
        for ordinal in torch.cuda._parse_visible_devices():
            if not isinstance(ordinal, int) or ordinal >= present:
                break  # GPU-/MIG- UUIDs name no simulated card
            out.append(ordinal)
        return out

    @property
    def initialized(self) -> bool:
        return self.visible is not None

    def init(self) -> None:
        """Initialise CUDA as the first GPU call does: fix the visible devices, or fail as a real host fails."""
        if self.visible is not None:
            return
        if not self.host.cuda:
            raise AssertionError(messages.NOT_COMPILED)
        if self.host.gpus == 0:
            raise RuntimeError(messages.NO_DRIVER)
        visible = self._parse_visible()
        if not visible:
            raise RuntimeError(messages.NO_GPUS)
        self.visible = visible

    # ------------------------------------------------------------------ naming devices
    def check(self, index: int) -> None:
        """Raise what CUDA raises for an ordinal this host does not have."""
        if index < 0:
            raise RuntimeError("Device index must not be negative")
        if index >= self.count():
            raise messages.invalid_ordinal()

    def label(self, device) -> str:
        """The label of a tensor placed on `device` ("cuda:1"); ints name the build's accelerator."""
        if isinstance(device, int) and not isinstance(device, bool):
            return f"{self.host.accelerator or 'cuda'}:{device}"
        kind = type(device)
        if kind is _REAL_DEVICE or kind is str:  # a name met before (each batch's `.to(device)`): looked up
            key = (device, self.current)
            label = self._labels.get(key)
            if label is None:
                label = self._labels[key] = self._label(device)
                if len(self._labels) > LABELS_KEPT:  # a program naming ever new devices: start again
                    self._labels.clear()
            return label
        return self._label(device)

    def _label(self, device) -> str:
        d = device if isinstance(device, _REAL_DEVICE) else _REAL_DEVICE(device)
        if d.type == "cpu":
            return "cpu"
        index = d.index if d.index is not None else (self.current if d.type == "cuda" else 0)
        return f"{d.type}:{index}"

    def place(self, device) -> str:
        """Label for a tensor about to be placed on `device`: initialise CUDA and check the ordinal first."""
        label = self.label(device)
        if label.startswith("cuda:"):
            torch.cuda._lazy_init()  # torch's own initialisation, which calls our _cuda_init (cuda_runtime.py)
            self.check(int(label[5:]))
        return label

    def simulates(self, label: str) -> bool:
        """True when tensors on this device type are simulated here (the build's accelerator)."""
        return label != "cpu" and label.split(":", 1)[0] == self.host.accelerator

    # ------------------------------------------------------------------ scenarios
    @contextmanager
    def scenario(self, host: SimulatedHost):
        """Pretend, for the duration, to be another host (a probe asking "and on a Mac?")."""
        saved = (self.host, self.visible, self.current)
        self.become(host)
        try:
            yield
        finally:
            self.host, self.visible, self.current = saved

    def become(self, host: SimulatedHost) -> None:
        """Be another host from now on, as a scenario starts (no GPU made visible, cuda:0 current)."""
        self.host, self.visible, self.current = host, None, 0
