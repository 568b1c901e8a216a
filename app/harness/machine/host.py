"""The simulated host as the harness reads it from the job's payload (written by app/harness/contract.py).

No defaults live here: the app decides the host of every job (contract.DEFAULT_HOST). A payload without a host
(an older runner) gets the plain CPU: no simulation, torch exactly as installed.
"""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class Host:
    """A torch build and the devices present: what the learner's program will find."""

    build: str  # "cuda", "macos-arm64" or "cpu"
    gpus: int
    gpu_name: str = "NVIDIA GPU"
    gpu_memory_bytes: int = 80 * GiB
    capability: tuple[int, int] = (9, 0)
    multiprocessors: int = 132
    cuda_version: str = "12.8"
    mps: bool = False
    machine: str = "h100"  # the machine profile the host was made from (app/harness/machine/machines/)
    # bytes: a simulated GPU tensor this large is kept without values (contract.DATALESS_TENSOR_BYTES) ...
    dataless_tensor_bytes: int = 16 << 20
    # ... and so is every new one once the simulated GPUs' tensors with values hold this much host memory
    device_data_bytes: int = 64 << 20

    @classmethod
    def from_payload(cls, data: dict | None) -> "Host":
        """Read the payload's `host` object; None means the plain CPU-only build."""
        if not data:
            return PLAIN
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["capability"] = tuple(fields.get("capability") or (9, 0))
        return cls(**fields)

    @property
    def accelerator(self) -> str | None:
        """The device type this build was compiled for ("cuda", "mps"), or None for a CPU-only build."""
        return {"cuda": "cuda", "macos-arm64": "mps"}.get(self.build)

    @property
    def simulated(self) -> bool:
        """True when the harness must pretend something the installed CPU-only torch is not."""
        return self.build != "cpu"

    def devices_present(self) -> int:
        """Devices of this build's accelerator in the machine (before CUDA_VISIBLE_DEVICES hides any)."""
        if self.build == "cuda":
            return self.gpus
        return int(self.mps) if self.build == "macos-arm64" else 0


PLAIN = Host(build="cpu", gpus=0)
