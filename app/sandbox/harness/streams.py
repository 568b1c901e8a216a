"""Streams and events of the simulated GPUs.

torch.cuda.Stream and torch.cuda.Event are Python classes over C bases (`torch._C._CudaStreamBase`,
`_CudaEventBase`); a CPU-only wheel has dummy bases that refuse to be built. `install()` gives those two
classes the bases below instead, so torch's own Python code (`wait_stream`, `record_event`, `elapsed_time`,
`torch.cuda.stream(s)` ...) runs unchanged. The simulated GPU finishes work the moment it is queued, so every
stream is idle and every recorded event complete; `elapsed_time` is the wall time between the two `record()`s.
"""

from __future__ import annotations

import itertools
import time

import torch

from app.sandbox.harness import messages

CUDA_TYPE = 1  # c10::DeviceType::CUDA, what Stream.device_type holds
# fake cudaStream_t / cudaEvent_t handles: distinct, non-zero (0 is the default stream), aligned like pointers
_HANDLE_BASE = 0x5C0000
_handles = itertools.count(1)


def _new_handle() -> int:
    return _HANDLE_BASE + 0x10 * next(_handles)


class SimStreamBase:
    """What `_CudaStreamBase` offers: an id, a device, a raw handle; always idle."""

    def __new__(cls, priority: int = 0, stream_id: int | None = None, device_index: int | None = None,
                device_type: int = CUDA_TYPE, stream_ptr: int | None = None):
        self = object.__new__(cls)
        index = torch.cuda.current_device() if device_index is None else device_index
        self.device_index, self.device_type, self.priority = index, device_type, min(0, max(-5, priority))
        if stream_id is None:
            stream_id, handle = _new_handle(), None
        else:
            handle = 0 if stream_id == 0 else stream_id
        self.stream_id = stream_id
        self.cuda_stream = stream_ptr if stream_ptr is not None else (handle if handle is not None else stream_id)
        return self

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", self.device_index)

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        return False  # no CUDA graph is ever being captured

    def synchronize(self) -> None:
        CLOCK.tick()

    def wait_event(self, event) -> None:
        event.wait(self)

    def __enter__(self):
        self._context = torch.cuda.stream(self)
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._context.__exit__(*exc)

    def __eq__(self, other) -> bool:
        return isinstance(other, SimStreamBase) and (other.stream_id, other.device_index) == (
            self.stream_id, self.device_index)

    def __hash__(self) -> int:
        return hash((self.stream_id, self.device_index))


class SimEventBase:
    """What `_CudaEventBase` offers: record, wait, query, synchronize, elapsed_time."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                external: bool = False):
        self = object.__new__(cls)
        self.enable_timing, self.blocking, self.interprocess = enable_timing, blocking, interprocess
        self.cuda_event, self.device, self._recorded_at = 0, None, None
        return self

    def record(self, stream) -> None:
        if self.device is not None and stream.device != self.device:
            raise RuntimeError(f"Event device {self.device} does not match recording stream's device "
                               f"{stream.device}.")
        self.device, self.cuda_event = stream.device, self.cuda_event or _new_handle()
        self._recorded_at = time.perf_counter()

    def wait(self, stream) -> None:
        return None  # the recorded work is already done

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        CLOCK.tick()

    def elapsed_time(self, end) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise ValueError(messages.EVENT_TIMING)
        if self._recorded_at is None or end._recorded_at is None:
            raise ValueError(messages.EVENT_NOT_RECORDED)
        return (end._recorded_at - self._recorded_at) * 1000.0  # milliseconds, like cudaEventElapsedTime

    def ipc_handle(self):
        raise messages.NotSimulatedError("torch.cuda.Event.ipc_handle")

    @classmethod
    def from_ipc_handle(cls, device, handle):
        raise messages.NotSimulatedError("torch.cuda.Event.from_ipc_handle")


class SyncClock:
    """Counts the moments the host waited for the GPU: explicit synchronize() calls and blocking copies.

    A non-blocking copy to the host is safe to read only after one of them; the tracer compares counts.
    """

    def __init__(self):
        self.count = 0

    def tick(self) -> None:
        self.count += 1


CLOCK = SyncClock()


class StreamTable:
    """The current stream of each simulated device (the default stream until `torch.cuda.stream(s)`)."""

    def __init__(self):
        self.current: dict[int, tuple[int, int]] = {}  # device index -> (stream_id, cuda_stream)

    def get_current(self, index: int) -> tuple[int, int, int]:
        stream_id, _ = self.current.get(index, (0, 0))
        return stream_id, index, CUDA_TYPE

    def set_current(self, stream_id: int, device_index: int, device_type: int = CUDA_TYPE) -> None:
        self.current[device_index] = (stream_id, stream_id)


_REAL_STREAM, _REAL_EVENT = torch.Stream, torch.Event


class _GenericType(type):
    """torch.Stream / torch.Event: the device-neutral classes; on a simulated GPU they are CUDA's ones."""

    def __call__(cls, device=None, **kwargs):
        if device is None or isinstance(device, int) or torch.device(device).type == "cuda":
            if cls.kind is _REAL_STREAM:
                return torch.cuda.Stream(device=device, **kwargs)
            return torch.cuda.Event(**kwargs)
        return cls.kind(device, **kwargs)

    def __instancecheck__(cls, obj) -> bool:
        simulated = torch.cuda.Stream if cls.kind is _REAL_STREAM else torch.cuda.Event
        return isinstance(obj, (cls.kind, simulated))


def install(patches) -> None:
    """Give torch.cuda.Stream/Event simulated bases instead of the dummy ones; route torch.Stream/Event there."""
    torch.cuda.streams.Stream.__bases__ = (SimStreamBase,)
    torch.cuda.streams.Event.__bases__ = (SimEventBase,)
    patches.set(torch, "Stream", _GenericType("Stream", (), {"kind": _REAL_STREAM, "__module__": "torch"}))
    patches.set(torch, "Event", _GenericType("Event", (), {"kind": _REAL_EVENT, "__module__": "torch"}))
