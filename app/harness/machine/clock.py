"""The simulated GPU's clock: a modeled timeline per device and stream, and the program's clocks that read it.

Every op the tracer runs on a simulated GPU is queued here with a modeled duration (a roofline: FLOPs at the
dtype's peak, bytes at memory bandwidth, each at a realistic efficiency, never shorter than a kernel's floor);
copies run at the machine's host-link rates (pageable blocks the host, pinned with non_blocking=True returns at
once) or over the GPU link; torch.distributed's collectives on NCCL's stream of each device for a ring's time,
from when the last rank reached them (distributed.py hands them over). The host pays a launch cost per op and
waits at each synchronisation point until the stream has drained. The program's clocks (time.perf_counter,
monotonic, time and their _ns forms) then read

    the host's own CPU time (less the time spent emulating device work)  +  modeled launches and waits

so that `a @ b` without synchronize reads a few microseconds and with it the modeled kernel time, while
time.sleep and ordinary host work stay as they are. The host's time is its CPU time (this thread's), not wall
time, so a loaded grading machine does not stretch anything; between two device calls a gap shorter than
GAP_FLOOR_S is the loop around the launch, which the launch cost already counts, so the device-side figures
(events, kernel times) are the same on every run.

The model's assumptions are written in docs/grading.md ("The simulated clock"). Figures come from the machine
profile (app/harness/machine/machines/<id>.json, each with its source), handed over in the payload's host.
"""

from __future__ import annotations

import contextlib
import ctypes
import selectors
import threading
import time
import timeit

import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import conv_flop_count, sdpa_flop_count

from app.harness.machine import chrome_trace

# torch.utils.flop_counter's formulas for mm and bmm, without the shape_wrapper its registration adds: that wrapper
# tree_maps every argument (and the output) to shapes, which cost more than the rest of an op's charge; the
# shapes are handed over here already
mm_flop = getattr(flop_counter.mm_flop, "__wrapped__", flop_counter.mm_flop)
bmm_flop = getattr(flop_counter.bmm_flop, "__wrapped__", flop_counter.bmm_flop)

# the real clocks, taken before the job's are replaced (the harness itself always reads these)
REAL_PERF = time.perf_counter
REAL_PERF_NS = time.perf_counter_ns
REAL_MONOTONIC = time.monotonic
REAL_MONOTONIC_NS = time.monotonic_ns
REAL_TIME = time.time
REAL_TIME_NS = time.time_ns
REAL_SLEEP = time.sleep
REAL_CLOCK_GETTIME = time.clock_gettime
REAL_CLOCK_GETTIME_NS = time.clock_gettime_ns
# timeit's functions whose default timer is the real perf_counter, bound when timeit was imported (the fork server
# imports it before a job's clocks exist): timeit.timeit(stmt, number=n) and timeit.Timer read the host's time while
# time.perf_counter read the GPU's. torch.utils.benchmark's Timer reads `timeit.default_timer` at each call
# (torch/utils/benchmark/utils/timer.py, `timer`), which install_clocks replaces too.
TIMEIT_DEFAULTS = (timeit.timeit, timeit.repeat, timeit.Timer.__init__)
# the selectors whose select() waits on the program's behalf (selectors.py: the poll-like ones share one); the
# program's waits in them move its clock on (DeviceClock.install_waits)
SELECTORS = tuple(getattr(selectors, name) for name in (
    "SelectSelector", "PollSelector", "EpollSelector", "DevpollSelector", "KqueueSelector") if hasattr(selectors, name))
# the clock ids time.clock_gettime reads on the modeled clock: the wall and elapsed-time clocks (the ones
# perf_counter, monotonic and time read on Linux, and their raw and suspend-counting kin). The CPU-time clocks
# (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID) stay real: a real GPU run's CPU time is its host's too
MODELED_CLOCK_IDS = tuple(getattr(time, name) for name in (
    "CLOCK_REALTIME", "CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW", "CLOCK_BOOTTIME", "CLOCK_TAI", "CLOCK_HIGHRES",
    "CLOCK_UPTIME", "CLOCK_UPTIME_RAW") if hasattr(time, name))
# the host's time is its CPU time (this thread's): a loaded machine's waiting for a core does not show
_cpu = time.thread_time

# --- the model's constants (docs/grading.md, "The simulated clock", says why each is what it is) -------------
# Dense GEMMs reach 60-80% of peak at large sizes (NVIDIA's "Matrix Multiplication Background" user guide,
# docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication: achieved vs peak math throughput)
COMPUTE_EFFICIENCY = 0.7
# Streaming kernels reach 80-90% of HBM bandwidth (NVIDIA's "GPU Performance Background" user guide, memory-bound
# operations; STREAM-like copies on H100 reach about 3 of 3.35 TB/s)
MEMORY_EFFICIENCY = 0.8
# seconds; the shortest a kernel takes on the GPU (launch latency on the device and the tail of one wave; NVIDIA's
# "CUDA C++ Best Practices Guide": kernel launch overhead of a few microseconds)
KERNEL_FLOOR_S = 2.5e-6
# seconds the host spends launching one eager op (Python, the dispatcher, cudaLaunchKernel): 6.77 us recorded on
# an H200 host (tests/fidelity/calibration/h200.json, launch_us); PyTorch's "Performance Tuning Guide" puts eager
# overhead at 5-10 us per op
LAUNCH_S = 6.8e-6
# seconds a synchronisation costs beyond the wait (the round trip to the driver; a value's read includes its small
# copy back): 10.2 us recorded for .item() on an H200 host (tests/fidelity/calibration/h200.json, item_us)
SYNC_S = 10e-6
# seconds of host CPU time between two device calls that read as part of the launch: torch's dispatch to the
# tracer and the tracer's bookkeeping cost 0.1-0.5 ms per op on the grading machine (measured: 60-190 us around a
# 1024 matmul, 0.5 ms around an SGD step's foreach kernel), which the program must not see and which cannot be
# told apart from the learner's own few lines around a launch; host work longer than this shows in full
GAP_FLOOR_S = 1e-3
# --- collectives: NCCL's ring (docs/grading.md, "Collectives") -----------------------------------------------
# Bus bandwidth a ring reaches, as a share of the slowest link it crosses (the GPU link per direction, or the
# network between machines). nccl-tests' all_reduce on 8 H100 SXM reports 460-480 GB/s of bus bandwidth with
# NVLink SHARP, which the model leaves out; a ring alone reaches less of the 450 GB/s: an assumption, as for kernels
COLLECTIVE_EFFICIENCY = 0.8
# NCCL's own cost model (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel, Ring): a base latency per protocol
# plus one per step of the ring, by the link the step crosses, and the share of the bus bandwidth the protocol
# reaches (LL: a quarter); NCCL runs the protocol whose modeled time is shortest, and so does the clock.
# protocol: (base us, us per step over NVLink, over PCIe, over the network, share of the bus bandwidth)
NCCL_RING_PROTOCOLS = {"LL": (6.6, 0.6, 1.0, 2.7, 0.25), "Simple": (8.4, 3.4, 5.7, 14.0, 1.0)}
# per collective of n ranks: (steps of the ring, bytes each rank sends per byte of the collective's size S), with
# S as nccl-tests defines it (NVIDIA/nccl-tests doc/PERFORMANCE.md, "bus bandwidth"): the tensor's size for
# all_reduce and broadcast, the whole output for all_gather, the whole input for reduce_scatter. A ring all-reduce
# is a reduce-scatter then an all-gather: 2(n-1) steps, 2(n-1)/n of S through each rank's link; broadcast and
# reduce pipeline S along the chain once (one step's latency, as NCCL counts it for rings on the same channels)
_RING = {
    "all_reduce": lambda n: (2 * (n - 1), 2 * (n - 1) / n),
    "all_gather": lambda n: (n - 1, (n - 1) / n),
    "reduce_scatter": lambda n: (n - 1, (n - 1) / n),
    "all_to_all": lambda n: (n - 1, (n - 1) / n),
    "gather": lambda n: (n - 1, (n - 1) / n),
    "scatter": lambda n: (n - 1, (n - 1) / n),
    "broadcast": lambda n: (1, 1.0),
    "reduce": lambda n: (1, 1.0),
}
# torch.distributed's names, by the ring collective each runs
RING_OF = {"all_reduce": "all_reduce", "barrier": "all_reduce", "broadcast": "broadcast", "reduce": "reduce",
           "all_gather": "all_gather", "all_gather_into_tensor": "all_gather", "all_gather_single": "all_gather",
           "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
           "all_to_all": "all_to_all", "all_to_all_single": "all_to_all", "gather": "gather", "scatter": "scatter"}
# optimizer steps whose end is noted (a step's modeled time is the median gap between them)
STEPS_KEPT = 10000
# events of the timeline kept for the Chrome trace (a long loop repeats the same ones)
TRACE_EVENTS_KEPT = 20000
# the real GPU whose recordings set LAUNCH_S and SYNC_S and against which the model is checked
# (tests/fidelity/calibration/h200.json, recorded by scripts/gpu-check; tests/fidelity/test_calibration.py)
CALIBRATED_ON = "NVIDIA H200"
# ops that make no kernel: metadata and views answer from the tensor's header
NO_KERNEL = frozenset({
    "view", "view_as", "reshape", "reshape_as", "transpose", "t", "permute", "squeeze", "unsqueeze", "expand",
    "expand_as", "narrow", "select", "unbind", "split", "chunk", "flatten", "unflatten", "detach", "detach_",
    "requires_grad_", "size", "dim", "numel", "stride", "data_ptr", "is_contiguous", "as_strided", "diagonal",
    "movedim", "moveaxis", "swapaxes", "retain_grad", "register_hook", "__len__", "__iter__", "__hash__",
    "is_floating_point", "is_complex", "element_size", "nelement", "storage_offset", "untyped_storage",
    "get_device", "__reduce_ex__", "__deepcopy__", "__setstate__", "is_pinned", "record_stream", "type",
    "_is_view", "dtype", "shape", "names", "__format__", "__repr__", "item", "tolist", "__bool__", "__float__",
    "__int__", "__index__", "__array__", "numpy", "backward", "to", "cuda", "cpu", "type_as", "pin_memory",
    "_has_compatible_shallow_copy_type", "is_same_size", "__get__", "__set__",
    # allocations: the caching allocator hands out memory, no kernel runs (torch.empty's values are whatever was
    # there)
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
})
_MATMULS = frozenset({"matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "linear", "addmm", "baddbmm",
                      "addbmm", "einsum", "mv", "dot", "inner", "outer", "tensordot"})
_CONVS = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"})
_PEAK_OF_DTYPE = {torch.float16: "fp16_tensor", torch.bfloat16: "bf16_tensor", torch.float64: "fp64",
                  torch.float8_e4m3fn: "fp8_tensor", torch.float8_e5m2: "fp8_tensor"}


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def matmul_flops(name: str, ins: list, out) -> int:
    """FLOPs of a matrix product, with torch.utils.flop_counter's formulas (2*m*n*k per product)."""
    if name == "linear" and len(ins) >= 2:
        x, w = ins[0], ins[1]
        rows = x.numel() // max(1, x.shape[-1]) if x.dim() else 1
        return mm_flop((rows, x.shape[-1]), (w.shape[-1], w.shape[0])) if w.dim() == 2 else 0
    if name in ("addmm", "baddbmm", "addbmm") and len(ins) >= 3:
        ins = ins[1:]
    if len(ins) < 2 or not isinstance(out, torch.Tensor):
        return 2 * out.numel() if isinstance(out, torch.Tensor) else 0
    a, b = ins[0], ins[1]
    if a.dim() == 2 and b.dim() == 2:
        return mm_flop(tuple(a.shape), tuple(b.shape))
    if a.dim() == 3 and b.dim() == 3:
        return bmm_flop(tuple(a.shape), tuple(b.shape))
    # broadcast matmul, mv, dot: every output element is a dot product over a's last dimension
    k = a.shape[-1] if a.dim() else 1
    return 2 * max(1, out.numel()) * k


def conv_flops(name: str, ins: list, out) -> int:
    if len(ins) < 2 or not isinstance(out, torch.Tensor):
        return 0
    x, w = ins[0], ins[1]
    shape_x = tuple(x.shape) if x.dim() == w.dim() else (1, *x.shape)  # unbatched input
    shape_out = tuple(out.shape) if out.dim() == w.dim() else (1, *out.shape)
    return conv_flop_count(list(shape_x), list(w.shape), list(shape_out), transposed="transpose" in name)


def _keep_freed_memory() -> None:
    """Have glibc keep freed blocks up to 32 MiB for reuse instead of unmapping them: a simulated GPU tensor is
    host memory, and unmapping it when the program drops it (outside any traced call) would read as the
    program's own host time. 32 MiB is glibc's largest mmap threshold on 64-bit (malloc/malloc.c,
    DEFAULT_MMAP_THRESHOLD_MAX)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 128 << 20)  # M_TRIM_THRESHOLD: give memory back to the system only past 128 MiB free
    except (OSError, AttributeError):  # not glibc: only the host-time figures of very large frees differ
        pass


# CPU seconds the tracer's TorchFunctionMode adds to one torch call: measured once by the fork server before it
# forks jobs (tracing/placement.py measure_dispatch), which every job then reads instead of measuring it again (2.4
# ms of each job's CPU); None (a process that did not measure it): each configure() measures it itself
DISPATCH_S: float | None = None


def dispatch_cost() -> float:
    """What the TorchFunctionMode on the mode stack now adds to one torch call (CPU seconds): 200 small products
    with it, less 200 without."""
    t = torch.zeros(4)
    with torch._C.DisableTorchFunction():
        started = _cpu()
        for _ in range(200):
            torch.mul(t, t)
        bare = _cpu() - started
    started = _cpu()
    for _ in range(200):
        torch.mul(t, t)
    return max(0.0, (_cpu() - started - bare) / 200)


class Stream:
    """One stream's modeled queue: when its queued work ends (seconds on the modeled timeline)."""

    __slots__ = ("ready", "row")

    def __init__(self, row: str):
        self.ready = 0.0
        self.row = row


class DeviceClock:
    """The modeled timeline of one job's simulated GPUs, and the host time the program reads.

    `count`/`tick()` keep the interface the tracer used before there was a clock: the number of times the host
    waited for the GPU (a non-blocking copy to the host is safe to read only after one of them).
    """

    def __init__(self):
        self.figures: dict | None = None
        self.line_finder = lambda: None  # the learner's current line (the tracer sets it)
        self.dispatch_s = 0.0  # CPU seconds the tracer adds to one torch call (calibrate())
        self.reset()

    def reset(self) -> None:
        self.count = 0  # host waits for the GPU (syncs)
        self.added = 0.0  # modeled seconds added to the host: launches, waits, sync costs
        self.host = 0.0  # the host's modeled time (seconds since the job's start), what the program's clocks read
        self.streams: dict[tuple[str, int], Stream] = {}
        self.current: dict[str, int] = {}  # device label -> current stream id (0: the default stream)
        self._cpu_mark = _cpu()
        self.calls = 0  # torch calls through the tracer since the last mark (their dispatch is not the program's)
        self._depth = 0
        self._inside_nccl = 0  # > 0: work NCCL does inside its own kernel, which the collective already counts
        self._touched = False
        self._started_cpu = 0.0
        self._bases = (REAL_PERF(), REAL_MONOTONIC(), REAL_TIME())  # the real clocks when the job began
        self._clock_bases = _clock_bases()  # clock_gettime's too
        self.pending_backward = 0.0  # modeled seconds of forward work whose backward is still to come
        self.pending_kernels = 0
        self.gpu_busy = 0.0
        self.copy_time = 0.0
        self.comm_time = 0.0  # collectives' modeled time (NCCL's stream)
        self.collectives = 0
        self.pending_sync = None  # DDP's gradient all-reduce, to model with the next backward (distributed.py)
        self.host_wait = 0.0
        self.gpu_idle = 0.0
        self.kernels = 0
        self.by_line: dict[int, float] = {}  # learner line -> modeled device seconds of its kernels and copies
        self.waits_by_line: dict[int, float] = {}  # learner line -> seconds the host waited for the GPU there
        self.trace: list[tuple] = []  # (row, name, start s, duration s, line, kind)
        self.step_ends: list[float] = []  # when each optimizer step's work is done (the later of host and GPU)
        self.line: int | None = None  # the learner's line of the op being charged
        self.call = 0  # traced calls so far (a torch.profiler recording ties device work to the call that made it)
        # a torch.profiler window being recorded (machine/profiler.py's Recording), else None
        self.recording = None

    # ---------------------------------------------------------------- configuration
    def configure(self, figures: dict | None) -> None:
        """Start the clock for a machine's figures (None: no modeled clock, the program reads real time)."""
        self.figures = figures
        self.dispatch_s = 0.0
        self.reset()
        if figures is not None:
            _keep_freed_memory()
            if DISPATCH_S is None:
                self.calibrate()
            else:  # measured once by the fork server, before it forked this job (measure_dispatch)
                self.dispatch_s = DISPATCH_S
            self.reset()

    @property
    def active(self) -> bool:
        return self.figures is not None

    # ---------------------------------------------------------------- the host's time
    def _commit(self, floor: float) -> None:
        """Add the host's CPU time since the last mark to its modeled time (when longer than floor), less the
        tracer's dispatch of the torch calls made meanwhile."""
        now = _cpu()
        gap = now - self._cpu_mark - self.calls * self.dispatch_s
        if gap > floor:
            self.host += gap
        self._cpu_mark, self.calls = now, 0

    def calibrate(self) -> None:
        """Measure what the tracer's TorchFunctionMode (on the mode stack now) adds to one torch call on this
        machine (CPU time)."""
        self.dispatch_s = dispatch_cost()

    def enter(self):
        """Start of a traced call: the host's own work since its last device call reaches the device (a gap
        shorter than GAP_FLOOR_S is the loop around the launch, which LAUNCH_S already counts)."""
        if self._depth:
            self._depth += 1
            return None
        self._depth = 1
        self._touched = False
        self._commit(GAP_FLOOR_S)
        self.call += 1
        if self.recording is not None:
            self._anchor()
        return True

    def leave(self, started) -> None:
        """End of a traced call: if it did device work its time was emulation, which the program does not see;
        otherwise it was the host's own work (it shows once it adds up past the floor: the next device call or
        clock read says)."""
        if started is None:
            self._depth -= 1
            return
        if self.recording is not None:
            self._anchor()  # the call's end, while it still counts as inside it
        self._depth -= 1
        if self._touched:
            self._cpu_mark = _cpu()

    def touch(self) -> None:
        """The traced call under way is the simulation's work (device work or its bookkeeping)."""
        self._touched = True

    @contextlib.contextmanager
    def excluded(self):
        """Host work of the simulation itself outside any traced call: not the program's time."""
        started = _cpu()
        try:
            yield
        finally:
            self._cpu_mark += _cpu() - started

    @contextlib.contextmanager
    def inside_nccl(self):
        """Torch calls that emulate what NCCL does inside its one kernel (an average's division, an all-gather's
        pieces laid into one tensor): they queue nothing, the collective's ring time counts them."""
        self._inside_nccl += 1
        try:
            yield
        finally:
            self._inside_nccl -= 1

    @contextlib.contextmanager
    def emulating(self):
        """A call whose real time is the simulation's own (a collective's exchange over gloo underneath NCCL's):
        the program's clock does not see it; the torch calls inside still queue their kernels."""
        if not self.active:
            yield
            return
        started = self.enter()
        self._touched = True
        try:
            yield
        finally:
            self._touched = True
            self.leave(started)

    def _advance(self, seconds: float) -> None:
        self.host += seconds
        self.added += seconds

    # ---------------------------------------------------------------- streams
    def stream(self, device: str, stream_id: int | None = None) -> Stream:
        sid = self.current.get(device, 0) if stream_id is None else stream_id
        s = self.streams.get((device, sid))
        if s is None:
            row = f"{device} stream {'default' if sid == 0 else hex(sid)}"
            s = self.streams[(device, sid)] = Stream(row)
        return s

    def _queue(self, s: Stream, seconds: float, name: str, kind: str, row: str | None = None) -> tuple[float, float]:
        """Queue `seconds` of work on stream s as the host launches it; return (start, end)."""
        start = s.ready if s.ready > self.host else self.host
        if self.host > s.ready and s.ready > 0.0:
            self.gpu_idle += self.host - s.ready
        end = start + seconds
        s.ready = end
        line = self.line
        if line is not None:
            self.by_line[line] = self.by_line.get(line, 0.0) + seconds
        self._note((row or s.row, name, start, seconds, line, kind))
        return start, end

    def _note(self, entry: tuple) -> None:
        """One event of the timeline: kept for the run's Chrome trace, and for a torch.profiler window."""
        if len(self.trace) < TRACE_EVENTS_KEPT:
            self.trace.append(entry)
        if self.recording is not None:
            self.recording.note(entry, self.call if self._depth else None)

    def _anchor(self) -> None:
        """Tell a torch.profiler window where the host's modeled time stands now (machine/profiler.py maps the
        profiler's real timestamps onto the modeled clock between these points)."""
        if self.recording is not None:
            self.recording.anchor(self.host, self.call if self._depth else None)

    def _runtime(self, api: str, start: float) -> None:
        """A host-side CUDA runtime call from start to now (a sync), for a torch.profiler window."""
        if self.recording is not None:
            self.recording.runtime(api, start, self.host, self.call if self._depth else None)

    # ---------------------------------------------------------------- charging work
    def peak(self, dtype) -> float:
        peaks = self.figures["peak_flops"]
        key = _PEAK_OF_DTYPE.get(dtype)
        if key is None:
            key = "tf32_tensor" if dtype == torch.float32 and torch._C._get_cublas_allow_tf32() else "fp32"
        return peaks.get(key) or peaks["fp32"]

    def kernel_seconds(self, flops: float, nbytes: float, dtype) -> float:
        f = self.figures
        compute = flops / (self.peak(dtype) * COMPUTE_EFFICIENCY) if flops else 0.0
        memory = nbytes / (f["memory_bandwidth"] * MEMORY_EFFICIENCY)
        return KERNEL_FLOOR_S + (compute if compute > memory else memory)

    def op(self, name: str, device: str, ins: list, outs: list, line: int | None) -> None:
        """One op launched on a simulated GPU: its kernel queued on the current stream, the host's launch paid."""
        if name in NO_KERNEL or self._inside_nccl:
            return
        if outs and not name.endswith("_"):
            for t in outs:
                if not t._is_view():
                    break
            else:
                return  # a view of its input: no kernel
        self._touched = True
        dtype = (ins[0] if ins else outs[0]).dtype if (ins or outs) else torch.float32
        if name in _MATMULS:
            flops = matmul_flops(name, ins, outs[0] if outs else None)
        elif name in _CONVS:
            flops = conv_flops(name, ins, outs[0] if outs else None)
        elif name == "scaled_dot_product_attention" and len(ins) >= 3:
            flops = sdpa_flop_count(tuple(ins[0].shape), tuple(ins[1].shape), tuple(ins[2].shape))
        else:
            flops = 0
        nbytes = 0
        for t in ins:
            nbytes += t.numel() * t.element_size()
        for t in outs:
            nbytes += t.numel() * t.element_size()
        seconds = self.kernel_seconds(flops, nbytes, dtype)
        self.line = line
        self._queue(self.stream(device), seconds, name, "kernel")
        self.gpu_busy += seconds
        self.kernels += 1
        if torch.is_grad_enabled():
            for t in outs:
                if t.requires_grad:
                    self.pending_backward += seconds
                    self.pending_kernels += 1
                    break
        self.host += LAUNCH_S  # _advance, written out (every op comes here)
        self.added += LAUNCH_S

    def backward(self, device: str, line: int | None) -> None:
        """loss.backward(): the backward kernels of the forward work since the last one (twice its time: each
        product has two products in backward), launched by autograd's engine."""
        self._touched = True  # the backward pass's real time on the CPU was emulation
        kernels = 2 * self.pending_kernels
        if not kernels:
            return
        seconds = max(2 * self.pending_backward, kernels * LAUNCH_S)
        self.line = line
        start, _ = self._queue(self.stream(device), seconds, "autograd backward", "kernel")
        self.gpu_busy += seconds
        self.kernels += kernels
        self.pending_backward, self.pending_kernels = 0.0, 0
        self._advance(kernels * LAUNCH_S)
        sync, self.pending_sync = self.pending_sync, None
        if sync is not None:  # a DistributedDataParallel model's forward led here: its gradients are all-reduced
            sync(device, start, seconds)

    def copy(self, src: str, dst: str, nbytes: int, *, pinned: bool, non_blocking: bool, line: int | None) -> None:
        """A copy between devices: host<->device over the host link, device<->device over the GPU link."""
        if self._inside_nccl:
            return
        f = self.figures
        self._touched = True
        self.line = line
        if src == "cpu" or dst == "cpu":
            device = dst if src == "cpu" else src
            asynchronous = non_blocking and (pinned or src != "cpu")  # a copy to the host lands in pinned memory
            rate = f["pinned_bytes_per_s"] if (pinned or asynchronous) else f["pageable_bytes_per_s"]
            kind = "h2d" if src == "cpu" else "d2h"
        else:
            device, asynchronous, rate, kind = src, True, f["gpu_link_bytes_per_s"] or f["memory_bandwidth"], "d2d"
        seconds = KERNEL_FLOOR_S + nbytes / rate
        s = self.stream(device)
        memory = "" if kind == "d2d" else " pinned" if (pinned or asynchronous) else " pageable"
        _, end = self._queue(s, seconds, f"copy {kind} {nbytes / (1 << 20):.1f} MiB{memory}", "copy",
                             row=f"{device} copy engine")
        self.copy_time += seconds
        self._advance(LAUNCH_S)
        if not asynchronous:  # the host waits for the copy (and everything queued before it)
            started = self.host
            self._wait_until(end, count=True)
            self._runtime("cudaStreamSynchronize", started)

    # ---------------------------------------------------------------- collectives
    def collective_seconds(self, op: str, nbytes: float, ranks: int, machines: int = 1) -> float:
        """A ring collective's modeled time: NCCL's latency for its steps plus its bytes at the ring's bus
        bandwidth, over the GPU link within a machine or the network between machines (each of the `machines`
        is crossed once per pass of the ring: `machines` of its `ranks` hops), in the faster protocol."""
        if ranks <= 1:
            return 0.0  # NCCL with one rank copies at most (a no-op in place)
        f = self.figures
        steps, share = _RING[RING_OF.get(op, op)](ranks)
        across = min(steps, round(steps * machines / ranks)) if machines > 1 else 0
        link = f.get("gpu_link_bytes_per_s") or f["pinned_bytes_per_s"]  # no GPU link: through the host's PCIe
        if machines > 1:
            link = min(link, f.get("network_bytes_per_s") or link)
        bus = link * COLLECTIVE_EFFICIENCY
        best = None
        for base, nvlink, pci, net, bw_share in NCCL_RING_PROTOCOLS.values():
            within = nvlink if f.get("gpu_link_nvlink") else pci
            latency = (base + (steps - across) * within + across * net) * 1e-6
            seconds = latency + nbytes * share / (bus * bw_share)
            best = seconds if best is None or seconds < best else best
        return best

    def comm_stream(self, device: str) -> Stream:
        """NCCL's own stream on a device (a row of its own in the trace)."""
        s = self.streams.get((device, -1))
        if s is None:
            s = self.streams[(device, -1)] = Stream(f"{device} nccl")
        return s

    def _comm(self, device: str, name: str, start: float, seconds: float) -> float:
        """Queue a collective on NCCL's stream of `device` from `start`; return its end."""
        comm = self.comm_stream(device)
        start = comm.ready if comm.ready > start else start
        comm.ready = start + seconds
        self.comm_time += seconds
        self.collectives += 1
        if self.line is not None:
            self.by_line[self.line] = self.by_line.get(self.line, 0.0) + seconds
        self._note((comm.row, name, start, seconds, self.line, "collective"))
        return comm.ready

    def collective(self, op: str, device: str, nbytes: float, ranks: int, machines: int, agree, *,
                   blocking: bool = False, line: int | None = None) -> None:
        """One torch.distributed collective on a simulated GPU, as ProcessGroupNCCL runs it: NCCL's stream waits
        for the current stream, the collective starts once every rank has reached it (`agree` gives the latest
        of the ranks' times: a collective is a sync point), and the current stream waits for it. The host only
        launches it, unless `blocking` (barrier waits on the host)."""
        if not self.active:
            return
        outside = not self._depth  # a torch.distributed call: no traced call around it
        if outside:
            self._commit(GAP_FLOOR_S)
        self._touched = True
        self.line = line if line is not None else self.line_finder()
        s = self.stream(device)
        comm = self.comm_stream(device)
        ready = max(self.host, s.ready, comm.ready)
        start = agree(ready)
        size = f"{nbytes / (1 << 20):.1f} MiB" if nbytes >= 1 << 16 else f"{int(nbytes)} B"
        end = self._comm(device, f"nccl {op} {size}", start, self.collective_seconds(op, nbytes, ranks, machines))
        s.ready = end if end > s.ready else s.ready
        self._advance(LAUNCH_S)
        if blocking:
            self._wait_until(end, count=True)
        if outside:
            self._cpu_mark = _cpu()

    def host_agree(self, agree) -> None:
        """A sync point of the ranks' hosts (init_process_group's store barrier, a barrier on the CPU): every
        host's clock moves on to the latest rank's."""
        if not self.active:
            return
        outside = not self._depth
        if outside:
            self._commit(GAP_FLOOR_S)
        self._anchor()
        latest = agree(self.host)
        if latest > self.host:
            self.host = latest
        self._anchor()
        if outside:
            self._cpu_mark = _cpu()

    def gradient_all_reduce(self, device: str, start: float, seconds: float, buckets: list[int], ranks: int,
                            machines: int, agree) -> None:
        """DDP's all-reduce of each gradient bucket, overlapped with the backward pass that ran from `start` for
        `seconds`: a bucket's all-reduce starts on NCCL's stream once its gradients are ready (the backward's
        work is taken as spread evenly over the parameters' bytes, last layer's first) and the previous bucket's
        all-reduce is done; the current stream then waits for the last one (DDP's finalize_backward)."""
        start, seconds = agree((start, seconds))  # the slowest rank's backward paces every bucket
        total, done, end = float(sum(buckets)) or 1.0, 0.0, 0.0
        for nbytes in buckets:
            done += nbytes
            size = f"{nbytes / (1 << 20):.1f} MiB" if nbytes >= 1 << 16 else f"{int(nbytes)} B"
            end = self._comm(device, f"nccl all_reduce (DDP bucket, {size})", start + seconds * done / total,
                             self.collective_seconds("all_reduce", nbytes, ranks, machines))
        s = self.stream(device)
        s.ready = end if end > s.ready else s.ready

    def mark(self, s: Stream, name: str, when: float) -> None:
        """A zero-length mark on a stream's row (an event recorded there)."""
        self._note((s.row, name, when, 0.0, self.line, "mark"))

    # ---------------------------------------------------------------- syncs
    def _wait_until(self, when: float, *, count: bool) -> None:
        if count:
            self.count += 1
        wait = when - self.host
        if wait > 0:
            self.host_wait += wait
            if self.line is not None:
                self.waits_by_line[self.line] = self.waits_by_line.get(self.line, 0.0) + wait
            self._anchor()
            self._advance(wait)
            self._anchor()
            self._note(("host", "wait for GPU", self.host - wait, wait, self.line, "sync"))

    def sync(self, device: str | None = None, *, read: bool = False, line: int | None = None) -> None:
        """The host waits for every stream of `device` (all devices when None) to drain; a read of a value then
        pays a small copy back."""
        self.count += 1
        if not self.active:
            return
        outside = not self._depth  # torch.cuda.synchronize(): no traced call around it
        if outside:
            self._commit(GAP_FLOOR_S)
        self._touched = True
        self.line = line if line is not None else self.line_finder()
        ready = max((s.ready for (d, _), s in self.streams.items() if device is None or d == device), default=0.0)
        started = self.host
        self._anchor()
        self._wait_until(ready, count=False)
        self._advance(SYNC_S)
        self._anchor()
        # torch.cuda.synchronize() waits for the whole device; a value's read waits for its stream
        self._runtime("cudaDeviceSynchronize" if outside else "cudaStreamSynchronize", started)
        self._note(("host", "sync", self.host, 0.0, line, "sync_mark"))
        if outside:
            self._cpu_mark = _cpu()

    def tick(self, *args) -> None:
        """torch.cuda.synchronize() and the like: wait for every GPU."""
        self.sync(None)

    def wait_for(self, when: float, api: str = "cudaEventSynchronize") -> None:
        """Event.synchronize() (Stream.synchronize(): api "cudaStreamSynchronize"): the host waits until that point
        of the timeline."""
        self.count += 1
        if self.active:
            outside = not self._depth
            if outside:
                self._commit(GAP_FLOOR_S)
            self.line = self.line_finder()
            started = self.host
            self._anchor()
            self._wait_until(when, count=False)
            self._anchor()
            self._runtime(api, started)
            if outside:
                self._cpu_mark = _cpu()

    # ---------------------------------------------------------------- the program's clocks
    def now(self) -> float:
        """Seconds on the host's modeled clock: its CPU time outside emulation, plus launches, waits and sleeps.

        Host work shows once it passes GAP_FLOOR_S since the last mark (then in full): what is shorter is the
        Python around a launch, and a launch already costs LAUNCH_S."""
        if not self._depth:
            now = _cpu()
            gap = now - self._cpu_mark - self.calls * self.dispatch_s
            if gap > GAP_FLOOR_S:
                self.host += gap
                self._cpu_mark, self.calls = now, 0
        return self.host

    def sleep(self, seconds) -> None:
        """time.sleep stays real, and the host's clock moves on by what was asked."""
        self._commit(0.0)
        self._anchor()
        REAL_SLEEP(seconds)
        self._commit(0.0)
        self.host += max(0.0, float(seconds))
        self._anchor()

    def rebase(self) -> None:
        """The job starts now, on a clock configured before it came (session.ahead: a pre-forked child builds its
        session while it waits): the real clocks' readings the program's clocks count from, and the host's CPU
        mark, are taken again, as configure() would have taken them now. Nothing else has moved: no learner code
        has run."""
        self._cpu_mark = _cpu()
        self._bases = (REAL_PERF(), REAL_MONOTONIC(), REAL_TIME())
        self._clock_bases = _clock_bases()

    def install_clocks(self, patches) -> None:
        """Replace the program's clocks with ones that read the host's modeled time (from the bases of the job's
        start, read at each call: rebase() may take them again after this)."""
        now = self.now
        patches.set(time, "perf_counter", lambda: self._bases[0] + now())
        patches.set(time, "perf_counter_ns", lambda: int((self._bases[0] + now()) * 1e9))
        patches.set(time, "monotonic", lambda: self._bases[1] + now())
        patches.set(time, "monotonic_ns", lambda: int((self._bases[1] + now()) * 1e9))
        patches.set(time, "time", lambda: self._bases[2] + now())
        patches.set(time, "time_ns", lambda: int((self._bases[2] + now()) * 1e9))
        patches.set(time, "sleep", self.sleep)
        program_perf = time.perf_counter  # the modeled one, set above
        patches.set(timeit, "default_timer", program_perf)
        for function in TIMEIT_DEFAULTS:
            patches.set(function, "__defaults__", tuple(program_perf if default is REAL_PERF else default
                                                        for default in function.__defaults__))

        def clock_gettime(clk_id):
            base = self._clock_bases.get(clk_id)
            return REAL_CLOCK_GETTIME(clk_id) if base is None else base + now()

        def clock_gettime_ns(clk_id):
            base = self._clock_bases.get(clk_id)
            return REAL_CLOCK_GETTIME_NS(clk_id) if base is None else int((base + now()) * 1e9)

        patches.set(time, "clock_gettime", clock_gettime)
        patches.set(time, "clock_gettime_ns", clock_gettime_ns)
        self.install_waits(patches)

    def install_waits(self, patches) -> None:
        """A wait of the program's main thread in a selector that times out moves the host's clock on by its
        timeout, as a sleep moves it by what was asked; one that something ended (a worker's batch came) reads as
        instantaneous, as every other blocking wait does, so the modeled times stay the same under load. Without
        it a wait that gives up at a deadline read on the program's clock never reached the deadline:
        multiprocessing's `Process.join(timeout)`, `Queue.get(timeout=...)` and `Connection.poll(timeout)` select
        until `time.monotonic()` passes it (multiprocessing/connection.py, wait), and a DataLoader iterator given
        up after a worker's exception joins its workers so (5 s each, torch's MP_STATUS_CHECK_INTERVAL): that
        program ran until the sandbox's wall limit. asyncio's timers read the same clock. Another thread's wait, or
        one inside the simulation's own work, moves nothing."""
        main = threading.main_thread().ident
        for cls in SELECTORS:
            real = cls.select

            def select(selector, timeout=None, _real=real):
                if self._depth or threading.get_ident() != main:
                    return _real(selector, timeout)
                ready = _real(selector, timeout)
                if not ready and timeout is not None and timeout > 0:
                    self._commit(0.0)
                    self.host += float(timeout)
                    self._anchor()
                return ready

            patches.set(cls, "select", select)

    def step_done(self) -> None:
        """An optimizer step returned: note when its work ends, the later of the host's time and the GPU's."""
        if self.active and len(self.step_ends) < STEPS_KEPT:
            self.step_ends.append(max([self.host] + [s.ready for s in self.streams.values()]))

    def step_ms(self) -> float | None:
        """The median time between consecutive optimizer steps (a training step's modeled time)."""
        gaps = sorted(b - a for a, b in zip(self.step_ends, self.step_ends[1:]))
        return round(gaps[len(gaps) // 2] * 1e3, 4) if gaps else None

    # ---------------------------------------------------------------- the summary the report carries
    def summary(self) -> dict:
        """The timeline's figures (ms and counts) for the report."""
        total = max([self.host] + [s.ready for s in self.streams.values()])
        ms = {"modeled_ms": total, "gpu_busy_ms": self.gpu_busy, "copy_ms": self.copy_time,
              "comm_ms": self.comm_time, "host_wait_ms": self.host_wait, "gpu_idle_ms": self.gpu_idle}
        return {"machine": (self.figures or {}).get("machine"), "calibrated_on": CALIBRATED_ON,
                **{k: round(v * 1e3, 4) for k, v in ms.items()},
                "syncs": self.count, "kernels": self.kernels, "collectives": self.collectives,
                "step_ms": self.step_ms(),
                "lines": [{"line": line, "ms": round(self.by_line.get(line, 0.0) * 1e3, 4),
                           "wait_ms": round(self.waits_by_line.get(line, 0.0) * 1e3, 4)}
                          for line in sorted(set(self.by_line) | set(self.waits_by_line))]}

    def timeline(self, limit: int) -> dict:
        """The summary, with the rows and the first `limit` events to draw (chrome_trace.drawing)."""
        return {**self.summary(), **chrome_trace.drawing(self.trace, limit)}


def _clock_bases() -> dict[int, float]:
    """The modeled clock ids' real readings now (those this kernel has)."""
    bases = {}
    for clk in MODELED_CLOCK_IDS:
        try:
            bases[clk] = REAL_CLOCK_GETTIME(clk)
        except OSError:  # EINVAL: a clock this kernel lacks; the program gets the same error from the real one
            pass
    return bases


CLOCK = DeviceClock()
