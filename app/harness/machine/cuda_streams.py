"""Streams and events of the simulated GPUs.

`install()` puts a Stream and an Event class of its own in place of torch.cuda's (their C bases cannot run
without a GPU: on the CPU-only wheel they are dummies that refuse to be built, on the CUDA wheel they ask the
driver). The classes keep torch.cuda's interface: `torch.cuda.stream(s)`, `wait_stream`, `record_event`,
`elapsed_time` and the rest behave as documented. The simulated GPU finishes work the moment it is queued, so
each stream is a modeled queue on the simulated clock (clock.py): `query()` says whether it has drained by the
host's modeled time, `synchronize()` waits for it, an event is stamped with the time its stream reaches it and
`elapsed_time` is modeled device time. torch.Stream and torch.Event (device-neutral) make these on a CUDA device.
"""

from __future__ import annotations

import ctypes
import itertools

import torch

from app.harness.machine import clock
from app.harness.wording import messages

CUDA_TYPE = 1  # c10::DeviceType::CUDA, what Stream.device_type holds
# fake cudaStream_t / cudaEvent_t handles: distinct, non-zero (0 is the default stream), aligned like pointers
_HANDLE_BASE = 0x5C0000
_handles = itertools.count(1)


def _new_handle() -> int:
    return _HANDLE_BASE + 0x10 * next(_handles)


# the simulated GPUs' clock (clock.py): modeled stream queues, syncs, the program's time
CLOCK = clock.CLOCK


def _label(device_index: int) -> str:
    return f"cuda:{device_index}"


class Stream:
    """torch.cuda.Stream on a simulated GPU: an id, a device, a raw handle, a queue on the modeled clock."""

    def __new__(cls, device=None, priority: int = 0, stream_id: int | None = None, device_index: int | None = None,
                device_type: int = CUDA_TYPE, stream_ptr: int | None = None):
        self = object.__new__(cls)
        if device_index is None:
            device_index = torch.cuda._utils._get_device_index(device, optional=True) if device is not None \
                else torch.cuda.current_device()
        self.device_index, self.device_type, self.priority = device_index, device_type, min(0, max(-5, priority))
        self.stream_id = _new_handle() if stream_id is None else stream_id
        self.cuda_stream = stream_ptr if stream_ptr is not None else self.stream_id  # the default stream is 0
        return self

    @property
    def device(self) -> torch.device:
        return torch._C.device("cuda", self.device_index)

    def _queue(self):
        return CLOCK.stream(_label(self.device_index), self.stream_id)

    def query(self) -> bool:
        return not CLOCK.active or self._queue().ready <= CLOCK.host

    def is_capturing(self) -> bool:
        return False  # no CUDA graph is ever being captured

    def synchronize(self) -> None:
        CLOCK.wait_for(self._queue().ready if CLOCK.active else 0.0, "cudaStreamSynchronize")

    def wait_event(self, event) -> None:
        event.wait(self)

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    @property
    def _as_parameter_(self):
        return ctypes.c_void_p(self.cuda_stream)

    def __cuda_stream__(self):
        return (0, self.cuda_stream)

    def __enter__(self):
        self._context = torch.cuda.stream(self)
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._context.__exit__(*exc)

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and (other.stream_id, other.device_index) == (
            self.stream_id, self.device_index)

    def __hash__(self) -> int:
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self) -> str:
        return f"<torch.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class Event:
    """torch.cuda.Event on a simulated GPU: record, wait, query, synchronize, elapsed_time."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                external: bool = False):
        self = object.__new__(cls)
        self.enable_timing, self.blocking, self.interprocess = enable_timing, blocking, interprocess
        self.cuda_event, self.device, self._recorded_at = 0, None, None
        return self

    def record(self, stream=None) -> None:
        stream = torch.cuda.current_stream() if stream is None else stream
        if self.device is not None and stream.device != self.device:
            raise RuntimeError(f"Event device {self.device} does not match recording stream's device "
                               f"{stream.device}.")
        self.device, self.cuda_event = stream.device, self.cuda_event or _new_handle()
        if not CLOCK.active:
            self._recorded_at = clock.REAL_PERF()
            return
        started = CLOCK.enter()  # the host's time since its last device call reaches the device first
        try:
            CLOCK.touch()  # the simulation's own bookkeeping here is not the program's time
            queue = CLOCK.stream(_label(stream.device_index), stream.stream_id)
            self._recorded_at = queue.ready if queue.ready > CLOCK.host else CLOCK.host
            CLOCK.mark(queue, "event", self._recorded_at)
        finally:
            CLOCK.leave(started)

    def wait(self, stream=None) -> None:
        """The stream's later work starts only once this event's work is done."""
        if CLOCK.active and self._recorded_at is not None:
            stream = torch.cuda.current_stream() if stream is None else stream
            queue = CLOCK.stream(_label(stream.device_index), stream.stream_id)
            queue.ready = max(queue.ready, self._recorded_at)

    def query(self) -> bool:
        return not CLOCK.active or self._recorded_at is None or self._recorded_at <= CLOCK.host

    def synchronize(self) -> None:
        CLOCK.wait_for(self._recorded_at if CLOCK.active and self._recorded_at is not None else 0.0)

    def elapsed_time(self, end_event) -> float:
        """Milliseconds of modeled device time between the two events (aten/src/ATen/cuda/CUDAEvent.h's checks
        first)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError(messages.EVENT_TIMING)
        if self._recorded_at is None or end_event._recorded_at is None:
            raise ValueError(messages.EVENT_NOT_RECORDED)
        ms = (end_event._recorded_at - self._recorded_at) * 1000.0
        # cudaEventElapsedTime's resolution is about 0.5 us (CUDA Runtime API reference): modeled times are
        # reported at it, so the same work reads the same figure wherever on the timeline it ran
        return round(ms * 2000.0) / 2000.0 if CLOCK.active else ms

    def ipc_handle(self):
        raise messages.NotSimulatedError("torch.cuda.Event.ipc_handle")

    @classmethod
    def from_ipc_handle(cls, device, handle):
        raise messages.NotSimulatedError("torch.cuda.Event.from_ipc_handle")

    @property
    def _as_parameter_(self):
        return ctypes.c_void_p(self.cuda_event)

    def __repr__(self) -> str:
        return f"<torch.cuda.Event {self.cuda_event:#x}>" if self.cuda_event else "<torch.cuda.Event uninitialized>"


for _cls in (Stream, Event):
    _cls.__module__ = "torch.cuda.streams"


class StreamTable:
    """The current stream of each simulated device (the default stream until `torch.cuda.stream(s)`)."""

    def __init__(self):
        self.current: dict[int, int] = {}  # device index -> stream_id

    def get_current(self, index: int) -> tuple[int, int, int]:
        return self.current.get(index, 0), index, CUDA_TYPE

    def set_current(self, stream_id: int, device_index: int, device_type: int = CUDA_TYPE) -> None:
        self.current[device_index] = stream_id
        CLOCK.current[_label(device_index)] = stream_id  # the stream new work is queued on


_REAL_STREAM, _REAL_EVENT = torch.Stream, torch.Event


class _GenericType(type):
    """torch.Stream / torch.Event: the device-neutral classes; on a simulated GPU they are CUDA's ones."""

    def __call__(cls, device=None, **kwargs):
        if device is None or isinstance(device, int) or torch._C.device(device).type == "cuda":
            if cls.kind is _REAL_STREAM:
                return Stream(device=device, **kwargs)
            return Event(**kwargs)
        return cls.kind(device, **kwargs)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, (cls.kind, Stream if cls.kind is _REAL_STREAM else Event))


def install(patches) -> None:
    """Put the simulated Stream and Event where torch.cuda (and torch.Stream/Event) hand them out."""
    for module in (torch.cuda, torch.cuda.streams):
        patches.set(module, "Stream", Stream)
        patches.set(module, "Event", Event)
    patches.set(torch, "Stream", _GenericType("Stream", (), {"kind": _REAL_STREAM, "__module__": "torch"}))
    patches.set(torch, "Event", _GenericType("Event", (), {"kind": _REAL_EVENT, "__module__": "torch"}))
