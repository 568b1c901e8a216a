"""The placement tracer: where each of the learner's tensors lives, and what their code did with it.

One TorchFunctionMode sees every torch call made from Python. It

* records facts for the grader: moves (`.to`/`.cuda`/`.cpu`), host reads (`.item()`, `.tolist()`, `.numpy()`,
  printing a tensor), `backward()` with the loss value, loss-function calls, mismatches; each with the learner's
  line and the learner's variable names for the tensors involved;
* on a CPU-only host, simulates the GPUs of the simulated host with logical device labels (simulation.py); on a
  host with CUDA nothing is simulated: tensors really live on the GPU and torch raises its own errors.

Module forward pre-hooks, a DataLoader iterator patch, Module.to wrappers and optimizer step hooks add the
facts a training loop is graded on.
"""

from __future__ import annotations

import collections
import os
import sys

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _device as _default_device

from app.harness.machine import autocast, cuda_streams, dataless, simulation
from app.harness.machine.clock import CLOCK, NO_KERNEL, _cpu
from app.harness.machine.devices import Devices
from app.harness.machine.memory import Memory
from app.harness.machine.simulation import Simulation, call_tensors, tensors_in
from app.harness.tracing.hooks import _PLUMBING, Hooks
from app.harness.tracing.linemap import LineMap
from app.harness.wording import wording

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # app/harness/, every module of it
# events of one kind kept in the report; a training loop repeats the same facts thousands of times
EVENTS_PER_KIND = 200
# distinct (line, op, devices) keys kept in the per-call summary
OP_KEYS_KEPT = 500
# loss values kept: the first ones and the last ones (together they say whether "the loss went down")
LOSS_VALUES_HEAD = LOSS_VALUES_TAIL = 1000
_MOVES = {"to", "cuda", "cpu", "type_as"}
_HOST_READS = {"item", "tolist", "numpy", "__array__", "__repr__", "__format__"}
_LOSS_FUNCTIONS = {"mse_loss", "cross_entropy", "nll_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                   "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss",
                   "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss", "margin_ranking_loss",
                   "multilabel_soft_margin_loss", "multi_margin_loss", "cosine_embedding_loss"}
# tensor properties that answer from, or carry, a device label
_LABELLED_PROPERTIES = {"device", "is_cuda", "is_mps", "is_cpu", "grad", "data", "T", "mT", "H", "mH", "real", "imag"}
# reading a device tensor's value on the host: the host waits for the device (the placement map's `sync`)
_SYNCS = {"item", "tolist", "numpy", "__array__", "__repr__", "__format__", "__bool__", "__float__", "__int__",
          "__index__"}
# calls the tracer must always see, labelled inputs or not
_WATCHED = _MOVES | _HOST_READS | _LOSS_FUNCTIONS | {"backward"}
# what a frame's code is to learner_frame: the learner's file, the harness or torch's plumbing between the learner's
# call and the tracer, or anything else (a library the learner called)
_LEARNER, _BETWEEN, _ELSEWHERE = 0, 1, 2
_UNSET = object()  # a frame not looked up yet
# (code object, instruction) -> line entries remembered at most (Tracer.line_of); a file's call sites are far fewer
LINES_KEPT = 20_000
# calls the fused path of an ordinary op (Tracer.ordinary) leaves to the whole chain: each is answered, checked,
# recorded or run differently by some step of it (simulate, run_simulated, _observe, _map). A loss function is
# watched only for its fact, which the fused path keeps too (Tracer._loss_fact), and its result's loss mark: it
# stays out only where another set holds it (none does: no loss function is read, random or a move). The whole
# chain did nothing more for it (~7 us of each training batch's CPU, bench/README.md)
_NOT_ORDINARY = frozenset((_WATCHED - _LOSS_FUNCTIONS) | _SYNCS | simulation.SYNC_READS | dataless.READS
                          | simulation.MIXING_ALLOWED | simulation.RANDOM_WITH_GENERATOR
                          | simulation.RANDOM_WITHOUT_GENERATOR | {"get_device", "type"})
_FALL_BACK = object()  # Tracer.ordinary: not an ordinary op, run the whole chain


class Tracer(Hooks, Simulation):
    """All placement facts of one job, and the switches that install the tracing."""

    def __init__(self, learner_file: str, *, simulated: bool, devices: Devices, memory: Memory | None = None,
                 accelerator: str = "cuda:0"):
        self.learner_file = learner_file
        self.simulated = simulated  # True: the GPUs are labels on host tensors (a host without CUDA)
        self.devices, self.memory = devices, memory or Memory()
        self.accelerator = accelerator
        self.events: dict[str, list] = {}
        self.counts: dict[str, int] = {}
        self.losses: list[float] = []  # the first LOSS_VALUES_HEAD values ...
        self.losses_tail: collections.deque = collections.deque(maxlen=LOSS_VALUES_TAIL)  # ... and the latest
        self.steps = 0
        self.forwards = 0
        self.batches = 0
        self.ops: dict[tuple, int] = {}  # (learner line, op, devices) -> calls
        self.first_placement: dict | None = None  # the first tensor the learner's code put on an accelerator
        self.lines = LineMap()  # the placement map: what happened on each learner line
        self.mode: PlacementMode | None = None
        self.mps = None  # the Mac's GPU (machine/mps.py), set by the session
        # plumbing -> {id of a code object: _LEARNER, _BETWEEN or _ELSEWHERE}; the code objects classified
        self._frame_kinds: dict[tuple, dict] = {}
        self._frame_codes: list = []
        # (id of a code object, its instruction) -> its line (line_of); id -> the code object (keeps the id its own)
        self._lines_at: dict[tuple[int, int], int] = {}
        self._line_codes: dict[int, object] = {}
        # False once nobody will read the facts (Hooks.stop_observing): the calls the program makes are then only
        # simulated, not counted or described
        self.observing = True

    # ---------------------------------------------------------------- facts
    def count_op(self, line: int, name: str, devices: tuple) -> None:
        """Count one torch call the learner's line made, with the devices of its tensors."""
        key = (line, name, devices)
        ops = self.ops
        calls = ops.get(key)
        if calls is not None:
            ops[key] = calls + 1
        elif len(ops) < OP_KEYS_KEPT:
            ops[key] = 1

    def keeping(self, kind: str) -> bool:
        """True while facts of this kind are still kept (past that, only counted: cheaper in long loops)."""
        return len(self.events.get(kind, ())) < EVENTS_PER_KIND

    def record(self, kind: str, **fact) -> None:
        """Keep one fact (the first EVENTS_PER_KIND of each kind) and count all of them."""
        self.keep(kind, fact)

    def keep(self, kind: str, fact: dict) -> None:
        """record() of a fact the caller built as a dict, in its keys' order (the report's): the facts gathered for
        every move, loss, backward, forward pass and step build theirs once, not once as keywords and again
        as record's. A fact does not repeat its kind: the report lists facts under their kind (events[kind])."""
        counts = self.counts
        counts[kind] = counts.get(kind, 0) + 1
        kept = self.events.get(kind)
        if kept is None:
            kept = self.events[kind] = []
        if len(kept) < EVENTS_PER_KIND:
            kept.append(fact)

    def count_only(self, kind: str) -> None:
        """Count a fact of a kind whose count alone is read downstream (a DataLoader's batches, the learner's device
        queries): no fact is built or kept."""
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def device_of(self, t: torch.Tensor) -> str:
        """The device the learner's tensor lives on: its label when simulated, its real device otherwise."""
        if self.simulated:  # every tensor is physically on the host; a label says it is "on the accelerator"
            return t.__dict__.get("_pt_dev") or "cpu"
        with torch._C.DisableTorchFunction():
            return str(t.device)

    def on_accelerator(self, t: torch.Tensor) -> bool:
        """True when t lives (logically) on an accelerator."""
        return not self.device_of(t).startswith("cpu")

    # ---------------------------------------------------------------- learner frames and names
    def learner_frame(self, *, direct: bool = False, plumbing: tuple = _PLUMBING):
        """The nearest frame of the learner's file; with direct=True only if the learner made the call itself."""
        kinds = self._frame_kinds.get(plumbing)
        if kinds is None:
            kinds = self._frame_kinds[plumbing] = {}
        f = sys._getframe(1)
        while f is not None:
            code = f.f_code
            kind = kinds.get(id(code))
            if kind is None:  # each code object is classified once, not once per op that passes through it
                kind = kinds[id(code)] = self._frame_kind(code, plumbing)
            if kind == _LEARNER:
                return f
            if kind == _ELSEWHERE:
                if direct:
                    return None
                return self._nearest_learner(f.f_back)
            f = f.f_back
        return None

    def line_of(self, frame) -> int | None:
        """frame.f_lineno (None for no frame), found once per code location: Python finds it by decoding the code
        object's line table from its start up to the frame's instruction, each time it is asked (0.4-0.7 us at
        training-loop's loop, 2.6-3.6 us 200 lines into a file; a hit here 0.1-0.2 us; timeit), and every traced op's
        kernel, count and fact asks (549 times at 18 locations in a graded training-loop run). An instruction of a
        code object is on one line for good."""
        if frame is None:
            return None
        code = frame.f_code
        key = (id(code), frame.f_lasti)
        line = self._lines_at.get(key)
        if line is None:
            line = frame.f_lineno
            if len(self._lines_at) < LINES_KEPT:
                self._lines_at[key] = line
                self._line_codes.setdefault(id(code), code)
        return line

    def _nearest_learner(self, f):
        """The first frame of the learner's file from f up (what the walks above want once they have passed a frame
        of a library: only the file matters from there)."""
        learner = self.learner_file
        while f is not None and f.f_code.co_filename != learner:
            f = f.f_back
        return f

    def learner_frames(self, plumbing: tuple = _PLUMBING, start=None) -> tuple:
        """(learner_frame(direct=True), learner_frame()) in one walk up the stack: a device op inside a module's
        forward needs both (the direct caller for its facts, the nearest learner line for its kernel). `start`: the
        frame to begin with, past the harness's own frames the caller knows it is called from (default: the
        caller's)."""
        kinds = self._frame_kinds.get(plumbing)
        if kinds is None:
            kinds = self._frame_kinds[plumbing] = {}
        f = sys._getframe(1) if start is None else start
        while f is not None:
            code = f.f_code
            kind = kinds.get(id(code))
            if kind is None:
                kind = kinds[id(code)] = self._frame_kind(code, plumbing)
            if kind == _LEARNER:
                return f, f
            if kind == _ELSEWHERE:
                return None, self._nearest_learner(f.f_back)
            f = f.f_back
        return None, None

    def _frame_kind(self, code, plumbing: tuple) -> int:
        # the walks key their classifications by id(code): hashing a code object hashes its constants, each time
        # (0.36 us for nn.Module._call_impl's, which every op inside a module passes); the code object is kept
        # here, so its id names no other while the classification stands
        self._frame_codes.append(code)
        filename = code.co_filename
        if filename == self.learner_file:
            return _LEARNER
        return _BETWEEN if filename.startswith(HARNESS_DIR) or filename.endswith(plumbing) else _ELSEWHERE

    @staticmethod
    def names_in(frame, obj) -> list[str]:
        """The learner's variable names bound to obj in frame (identity, not equality).

        Read from the frame's own variables, not a copy of them: nothing runs between the items read but the two
        tests (a module's 25-odd globals: 1.3 -> 0.8 us a lookup, and every fact looks up one to three); should a
        finalizer change them meanwhile, the lookup is made again on a copy, as it was always made."""
        if frame is None:
            return []
        try:
            try:
                return [k for k, v in frame.f_locals.items() if v is obj and not k.startswith("__")][:3]
            except RuntimeError:  # changed while read
                return [k for k, v in list(frame.f_locals.items()) if v is obj and not k.startswith("__")][:3]
        except Exception:  # a learner object with odd semantics must never break grading
            return []

    def describe(self, t: torch.Tensor, frame, names: list[str] | None = None) -> dict:
        """A tensor as the report shows it: names (`names_in`, unless the caller has them), device, dimensions: what
        the checks read of a module's inputs, a loss function's and a mismatch's tensors. Its batch, move and loss
        marks are left out: nothing downstream read them (bench/README.md, the graded report's size)."""
        return {"names": self.names_in(frame, t) if names is None else names,
                "device": (t.__dict__.get("_pt_dev") or "cpu") if self.simulated else self.device_of(t),
                "dim": t.dim()}

    # ---------------------------------------------------------------- install
    def install(self) -> None:
        """Start tracing: the mode, module hooks, the DataLoader patch and the optimizer hooks."""
        self.install_hooks()
        if self.simulated:
            self.install_simulation()
        self.mode = PlacementMode(self)
        self.mode.__enter__()

    def uninstall(self) -> None:
        """Stop the mode (hooks stay: the process ends right after grading)."""
        if self.mode is not None:
            try:
                self.mode.__exit__(None, None, None)
            except Exception:  # the learner may have pushed or popped modes of their own
                pass
            self.mode = None

    # ---------------------------------------------------------------- the mode's work
    def on_property(self, func, attr: str, args):
        """Property get/set: answer devices from labels; keep labels on .grad and .data.

        The simulation's own work here (adopting values, labelling a new tensor and counting its memory) is not the
        program's time and is measured out (CLOCK._cpu_mark, the CPU clock read around it); reading or setting the
        property is the program's, and the mode's dispatch is the calibrated figure every call pays
        (clock.DISPATCH_S). Most reads (an optimizer's `p.grad`, `.device`) do no such work and read no clock: two
        CPU-clock reads per property were most of what such a read cost."""
        setting = func.__name__ == "__set__"
        t = args[0]
        if not setting and self.simulated and isinstance(t, torch.Tensor):
            label = t.__dict__.get("_pt_dev")
            if not label:  # a host tensor's property: nothing to answer from a label, nothing to carry on
                return func(*args)
            if attr == "device":
                return _device_object(label)
            if attr in ("is_cuda", "is_mps", "is_cpu"):
                return label.startswith(attr[3:])
        if setting and attr == "data" and self.simulated and isinstance(args[1], torch.Tensor):
            started = _cpu()
            adopted = dataless.adopt(t, args[1])  # a data-less tensor set as .data of one with values
            CLOCK._cpu_mark += _cpu() - started
            out = None if adopted else func(*args)  # (Module.to() of a large weight)
        else:
            out = func(*args)
        if self.simulated and isinstance(t, torch.Tensor):
            if setting and attr == "data" and isinstance(args[1], torch.Tensor):
                started = _cpu()
                self.set_label(t, args[1].__dict__.get("_pt_dev"))
                CLOCK._cpu_mark += _cpu() - started
            elif not setting and isinstance(out, torch.Tensor) and out is not t and t.__dict__.get("_pt_dev"):
                if attr in ("grad", "data", "T", "mT", "H", "mH", "real", "imag") and "_pt_dev" not in out.__dict__:
                    started = _cpu()
                    if "_pt_nodata" in t.__dict__ or _meta(out):
                        out.__dict__["_pt_nodata"] = True
                    self.set_label(out, t._pt_dev)
                    CLOCK._cpu_mark += _cpu() - started
        return out

    def on_call(self, func, name: str, args, kwargs):
        """One torch call: simulate the GPUs where needed, run it, propagate labels, record facts."""
        if self.simulated and CLOCK.active:
            started = CLOCK.enter()
            try:
                return self._on_clock(func, name, args, kwargs)
            finally:
                CLOCK.leave(started)
        frame, ins = self.learner_frame(direct=True), None
        if frame is not None:
            ins = call_tensors(args, kwargs)  # once: counting, then propagating, read them
            self.count_op(self.line_of(frame), name, tuple(self.device_of(t) for t in ins[:4]))
        if self.simulated and name == "backward":
            out = self._traced_backward(func, args, kwargs)
        elif self.simulated:
            out = self.simulate(func, name, args, kwargs)
            if out is not NotImplemented:
                return out
            out = self.run_simulated(func, name, args, kwargs)
        else:
            out = self.run_recording_mismatch(func, name, args, kwargs)
        self._propagate(name, args, kwargs, out, ins)
        self._observe(name, args, kwargs, out, frame=frame)
        return out

    def ordinary(self, func, name: str, args, kwargs, caller):
        """The common case of a traced call on a simulated GPU with a clock, in one function: an ordinary op (no
        move, read, factory, random draw, collective; autocast off or not casting it; a loss function's fact kept)
        whose tensors all carry one GPU's label, apart from host scalars (0-dim), and hold values, within the job's
        memory budget. It does what on_call -> _on_clock -> simulate -> run_simulated -> _propagate -> _observe ->
        _charge do for such a call, in the same order (count, run, label and count memory, queue the kernel),
        without each step asking again what kind of call it is (~3 us of each such op's CPU, bench/README.md).
        Anything else returns _FALL_BACK before it has done anything, and the whole chain runs
        (tests/harness/test_fused_path.py holds the two to the same report). `caller`: the frame that made the torch
        call. The mode hands it only the functions whose kind allows it (an ordinary op's name, no collective, no cast
        of autocast's: _func_info, once per function); the rest it checks here, per call."""
        if not self.simulated or CLOCK.figures is None or "device" in kwargs or "pin_memory" in kwargs:
            return _FALL_BACK
        memory = self.memory
        if memory.host_bytes >= self.devices.host.device_data_bytes:  # past the budget (Memory.over_budget)
            return _FALL_BACK
        ins = call_tensors(args, kwargs)
        label = None
        for t in ins:
            d = t.__dict__
            if d:
                if "_pt_nodata" in d:
                    return _FALL_BACK
                on = d.get("_pt_dev")
                if on is not None:
                    if label is None:
                        if type(on) is not str or not on.startswith("cuda:"):
                            return _FALL_BACK
                        label = on
                    elif on != label:
                        return _FALL_BACK  # two devices: the mixing check words the error
                    continue
            if t.dim() > 0:
                return _FALL_BACK  # a host tensor beside a GPU one: the mixing check words the error
        if label is None:
            return _FALL_BACK
        started = CLOCK.enter()
        try:
            frame, nearest = self.learner_frames(start=caller)
            line = self.line_of(nearest)
            if frame is not None and self.observing:
                self.count_op(self.line_of(frame), name, tuple([t.__dict__.get("_pt_dev") or "cpu" for t in ins[:4]]))
            try:
                out = func(*args, **kwargs)
            except RuntimeError as exc:  # as run_simulated: a meta tensor torch made itself met one with values
                if "meta" in str(exc) and any(_meta(t) for t in call_tensors(args, kwargs)):
                    out = dataless.run(func, name, args, kwargs, self.device_of)
                else:
                    raise
            outs = tensors_in(out)
            if outs:  # _propagate: results live where their inputs live; batch and loss marks follow
                batch, loss = None, name in _LOSS_FUNCTIONS
                for t in ins:
                    d = t.__dict__
                    if batch is None and "_pt_batch" in d:
                        batch = t
                    if not loss and d.get("_pt_loss"):
                        loss = True
                for t in outs:
                    if _among(t, ins):
                        continue
                    self.set_label(t, label)
                    if batch is not None:
                        t._pt_batch, t._pt_moved = batch._pt_batch, bool(batch.__dict__.get("_pt_moved"))
                    if loss and t.dim() == 0:
                        t._pt_loss = True
            if self.observing and name in _LOSS_FUNCTIONS:  # _observe: a loss function's fact, nothing else
                self._loss_fact(name, args, kwargs, nearest)
            if name not in NO_KERNEL:  # _charge
                CLOCK.op(name, label, ins, outs, line)
            return out
        finally:
            CLOCK.leave(started)

    def _on_clock(self, func, name, args, kwargs):
        """on_call on a simulated GPU with a clock (its real time is emulation when it did device work): the same
        work, and the call's kernel queued on the modeled timeline."""
        # one walk: the direct caller's frame, and the nearest learner line; from the frame that made the torch call
        # (above this one, on_call and the mode's __torch_function__, which are the harness's)
        frame, nearest = self.learner_frames(start=sys._getframe(3))
        line = self.line_of(nearest)
        ins = call_tensors(args, kwargs)  # once: counting, the mixing check, propagating and the charge read them
        if frame is not None and self.observing:  # device_of(t) of a simulated GPU's tensors
            self.count_op(self.line_of(frame), name, tuple([t.__dict__.get("_pt_dev") or "cpu" for t in ins[:4]]))
        if name == "backward":
            label = next((t.__dict__.get("_pt_dev") for t in tensors_in(args[:1]) if "_pt_dev" in t.__dict__),
                         None)
            out = self._traced_backward(func, args, kwargs)
            if label:
                CLOCK.backward(label, line)
            self._propagate(name, args, kwargs, out, ins)
            self._observe(name, args, kwargs, out, frame=frame)
        else:
            out = self.simulate(func, name, args, kwargs, ins, (frame, nearest))  # a move's, a read's frames
            outs = None
            if out is NotImplemented:
                out = self.run_simulated(func, name, args, kwargs, ins)
                outs = tensors_in(out)
                self._propagate(name, args, kwargs, out, ins, outs)
                self._observe(name, args, kwargs, out, frame=frame, nearest=nearest)
            if name not in NO_KERNEL and not _collective(func):
                self._charge(name, args, kwargs, out, line, ins, outs)
        return out

    def _line(self, frame) -> int | None:
        """The learner's line a device op belongs to (the nearest one, for ops inside a module's forward)."""
        if frame is None:
            frame = self.learner_frame()
        return self.line_of(frame)

    def _charge(self, name, args, kwargs, out, line: int | None, ins: list | None = None,
                outs: list | None = None) -> None:
        """Queue the kernel of a call that ran on a simulated GPU (`line`: the nearest learner line; `ins`, `outs`:
        the call's tensors and its result's, when the caller has them)."""
        if outs is None:
            outs = tensors_in(out)
        label = next((t.__dict__["_pt_dev"] for t in outs if "_pt_dev" in t.__dict__), None)
        if ins is None:
            ins = call_tensors(args, kwargs)
        if label is None:
            label = next((t.__dict__["_pt_dev"] for t in ins if "_pt_dev" in t.__dict__), None)
            if label is None:
                return
        CLOCK.op(name, label, ins, outs, line)

    def ordinals_named(self, args, kwargs):
        """`model.to(0)` and `device=0`: name the ordinal's device, as torch does on a build with an accelerator."""
        args = tuple(self.devices.label(a) if type(a) is int else a for a in args)
        if type(kwargs.get("device")) is int:
            kwargs = {**kwargs, "device": self.devices.label(kwargs["device"])}
        return args, kwargs

    def run_recording_mismatch(self, func, name, args, kwargs):
        """Run func; record torch's own device-mismatch error (real GPUs raise it themselves) and re-raise."""
        try:
            return func(*args, **kwargs)
        except RuntimeError as exc:
            if wording.SAME_DEVICE_PREFIX in str(exc) or "should be the same" in str(exc):
                self._record_mismatch(name, args, kwargs, str(exc))
            raise

    def _propagate(self, name, args, kwargs, out, ins: list | None = None, outs: list | None = None) -> None:
        """Outputs live where their inputs live; batch and loss marks follow derived tensors. `ins`, `outs`: the
        call's tensors and its result's, when the caller has them."""
        if outs is None:
            outs = tensors_in(out)
        if not outs:
            return
        if ins is None:
            ins = call_tensors(args, kwargs)
        # one pass over the inputs: the first label, the first batch-marked tensor, any loss mark
        label = batch = None
        loss = name in _LOSS_FUNCTIONS
        for t in ins:
            d = t.__dict__
            if d:
                if label is None:
                    label = d.get("_pt_dev") or None
                if batch is None and "_pt_batch" in d:
                    batch = t
                if not loss and d.get("_pt_loss"):
                    loss = True
        if label is None and batch is None and not loss:
            return  # nothing to carry over (host tensors without marks)
        for t in outs:
            if _among(t, ins):  # in-place or returned-self: the tensor keeps its own place
                continue
            if self.simulated and label:
                self.set_label(t, label)
            if batch is not None:
                t._pt_batch, t._pt_moved = batch._pt_batch, bool(batch.__dict__.get("_pt_moved"))
            if loss and t.dim() == 0:
                t._pt_loss = True

    def _observe(self, name, args, kwargs, out, move=None, non_blocking=False, frame=_UNSET,
                 nearest=_UNSET) -> None:
        """Record the facts the grader reads: moves, host reads, backward, losses. `frame`: the learner's frame
        that made the call directly (learner_frame(direct=True)), `nearest`: the nearest one (learner_frame()), when
        the caller looked them up already (a loss function's facts name the learner's line that called it, through
        the learner's loss module or not)."""
        if not self.observing:  # no facts; only the loss mark, which decides how later calls on the loss are traced
            if name == "backward" and args and isinstance(args[0], torch.Tensor):
                if frame is _UNSET:
                    frame = self.learner_frame(direct=True)
                if frame is not None:
                    args[0]._pt_loss = True
            return
        frame, names = self._map(name, args, kwargs, out, move, frame)
        events, counts = self.events, self.counts
        if name in _LOSS_FUNCTIONS:
            self._loss_fact(name, args, kwargs, self.learner_frame() if nearest is _UNSET else nearest)
            return  # no loss function moves, reads a value or is backward (_NOT_ORDINARY)
        if name not in _HOST_READS and name not in _MOVES and name != "backward":
            return
        # printing a tensor gets its own kind, so a long loop of .item() calls cannot crowd it out of the report
        kind = ("move" if move is not None else "backward" if name == "backward"
                else "tensor_print" if name in ("__repr__", "__format__") else "host_read")
        if kind != "backward":
            kept = events.get(kind)
            if kept is not None and len(kept) >= EVENTS_PER_KIND:
                counts[kind] = counts.get(kind, 0) + 1
                return
        if frame is _UNSET:
            frame = self.learner_frame(direct=True)
        if frame is None or not args or not isinstance(args[0], torch.Tensor):
            return
        src = args[0]
        # each kind's own fields first, then the tensor's (describe's, and its autograd state): the report's order
        if move is not None:
            fact = {"src_device": move[0], "dst_device": move[1], "non_blocking": bool(non_blocking)}
        elif kind == "backward":
            fact = {"step": self.steps, "value": None}  # its value once the tensor's fields are read
        else:
            copied_at = src.__dict__.get("_pt_copied_at")  # a non-blocking copy from a GPU landed here ...
            fact = {"force": bool(kwargs.get("force", False)),  # ... and the host has not waited since
                    "unsynced": copied_at is not None and copied_at == cuda_streams.CLOCK.count,
                    "prints_repr": name == "__repr__" or (name == "__format__" and src.dim() > 0)}
        # (the tensor's batch and move marks and its requires_grad are not among them: nothing downstream read them)
        d = src.__dict__
        fact["line"] = self.line_of(frame)
        fact["op"] = name
        fact["names"] = self.names_in(frame, src) if names is None else names
        fact["device"] = (d.get("_pt_dev") or "cpu") if self.simulated else self.device_of(src)
        fact["dim"] = src.dim()
        fact["loss"] = bool(d.get("_pt_loss"))
        fact["grad_fn"] = src.grad_fn is not None
        if kind == "backward":
            value = _first_value(src) if src.numel() and "_pt_nodata" not in d \
                else float("nan")  # a data-less loss has no value to record
            (self.losses if len(self.losses) < LOSS_VALUES_HEAD else self.losses_tail).append(value)
            src._pt_loss = True
            fact["value"] = value
        self.keep(kind, fact)

    def _loss_fact(self, name, args, kwargs, nearest) -> None:
        """A loss function's fact (_observe's, and the fused path's: Tracer.ordinary), the inputs described in
        `nearest`, the nearest learner frame (the learner's line that called it, through their loss module or not)."""
        kept = self.events.get("loss_fn")
        if kept is not None and len(kept) >= EVENTS_PER_KIND:  # past the kept ones only counted: no names to look up
            self.counts["loss_fn"] = self.counts.get("loss_fn", 0) + 1
            return
        self.keep("loss_fn", {"fn": name, "line": self.line_of(nearest),
                              "inputs": [self.describe(t, nearest) for t in call_tensors(args, kwargs)][:3]})

    def _map(self, name, args, kwargs, out, move, frame=_UNSET) -> tuple:
        """Count the call on the placement map when it moved, synced or created a tensor on a device.

        Return (the learner's frame, the learner's names of args[0]) as far as they were looked up (else _UNSET
        and None): _observe describes the same tensor in the same frame, and names_in reads every variable."""
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        names = None
        if name in _MOVES and first is not None and isinstance(out, torch.Tensor):
            src, dst = move or (self.device_of(first), self.device_of(out))
            if src != dst:
                if frame is _UNSET:
                    frame = self.learner_frame(direct=True)
                names = self.names_in(frame, first)
                self.lines.note(self.line_of(frame), "to_host" if dst.startswith("cpu") else "to_device",
                                dst, names=names, shape=first.shape,
                                nbytes=first.numel() * first.element_size(), op=name)
        elif name in _SYNCS and first is not None and self.on_accelerator(first):
            if frame is _UNSET:
                frame = self.learner_frame(direct=True)
            names = self.names_in(frame, first)
            self.lines.note(self.line_of(frame), "sync", self.device_of(first),
                            names=names, shape=first.shape, op=name)
        elif "device" in kwargs and name not in _MOVES and isinstance(out, torch.Tensor) and self.on_accelerator(out):
            if frame is _UNSET:
                frame = self.learner_frame(direct=True)
            self.lines.note(self.line_of(frame), "created_on_device", self.device_of(out),
                            shape=out.shape, op=name)
        return frame, names

    def report(self) -> dict:
        """The facts as JSON-ready data."""
        ops = [{"line": line, "op": op, "devices": list(devices), "calls": n}
               for (line, op, devices), n in sorted(self.ops.items(), key=lambda kv: kv[0][0])]
        return {"events": self.events, "counts": self.counts, "losses": self.losses + list(self.losses_tail),
                "steps": self.steps,
                "forwards": self.forwards, "batches": self.batches, "ops": ops,
                "first_placement": self.first_placement, "lines": self.lines.report()}


def _first_value(t: torch.Tensor) -> float:
    """The first element of a tensor with values, as a Python float (float(t.reshape(-1)[0])): a loss is one
    element, whose item() of its detached self is the same number without the view and the indexing (5.3 -> 0.6 us
    per loss.backward(), timeit); item() of the loss itself would warn about its requires_grad."""
    t = t.detach()
    return float(t.item() if t.numel() == 1 else t.reshape(-1)[0])


def _meta(t: torch.Tensor) -> bool:
    with torch._C.DisableTorchFunction():
        return t.is_meta


_DEVICE_OBJECTS: dict[str, torch.device] = {}


def _device_object(label: str) -> torch.device:
    """The torch.device a label names (made once: `.device` is read in every loop)."""
    device = _DEVICE_OBJECTS.get(label)
    if device is None:
        device = _DEVICE_OBJECTS[label] = torch._C.device(label)
    return device


class PlacementMode(TorchFunctionMode):
    """The TorchFunctionMode that hands every torch call to the tracer."""

    def __init__(self, tracer: Tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        CLOCK.calls += 1  # the dispatch to this mode is the simulation's time, not the program's
        try:
            info = _FUNCS.get(func)
        except TypeError:  # an unhashable callable: looked at each time
            info = None
        if info is None:
            info = _func_info(func)
        name, prop, watched, ordinary, autocast_watched = info
        if prop is not None:  # a tensor property's __get__ / __set__
            if prop is _UNLABELLED:  # dtype, shape, requires_grad ...
                return func(*args)
            return self.tracer.on_property(func, prop, args)  # it measures its own work out
        kwargs = kwargs or {}
        default = _default_device.CURRENT_DEVICE  # set_default_device / `with torch.device(...)`
        if default is not None and default.type != "cpu" and self.tracer.simulated and kwargs.get("device") is None \
                and func in _default_device._device_constructors():
            # torch's DeviceContext sits at the bottom of the mode stack (torch/utils/_device.py), below this mode:
            # it would fill device= only after the simulation let the call through, and a CPU-only torch cannot
            # make a CUDA tensor. Fill it here, as it would, so the simulation places the tensor.
            kwargs = {**kwargs, "device": default}
        if not watched and "device" not in kwargs and "pin_memory" not in kwargs and not _marked(args):
            # fast path: nothing labelled or marked goes in, nothing to record (e.g. a Dataset's indexing)
            caller = sys._getframe(1)
            if caller.f_code.co_filename == self.tracer.learner_file and name != "__get__" and self.tracer.observing:
                tensors = call_tensors(args, kwargs)
                tracer = self.tracer
                tracer.count_op(tracer.line_of(caller), name, tuple(tracer.device_of(t) for t in tensors[:4]))
            if self.tracer.simulated:
                return func(*args, **kwargs)
            return self.tracer.run_recording_mismatch(func, name, args, kwargs)
        # the fused path (Tracer.ordinary), for a function it may take: it would fall back at once for any other,
        # and for one autocast casts while a region is on
        if ordinary and not (autocast_watched and autocast.active()):
            out = self.tracer.ordinary(func, name, args, kwargs, sys._getframe(1))
            if out is not _FALL_BACK:
                return out
        out = self.tracer.on_call(func, name, args, kwargs)
        if name == "__repr__" and isinstance(out, str) and args and isinstance(args[0], torch.Tensor):
            return self.tracer.repr_with_device(args[0], out)
        return out


# what the mode needs to know of each function torch hands it, looked up once per function, not per call:
# func -> (name, the tensor property it gets or sets (_UNLABELLED: one that carries no device label) or None,
# watched: the tracer always sees it, ordinary: Tracer.ordinary may take it, autocast casts it)
_FUNCS: dict = {}
# functions remembered at most (a program that hands the mode a new callable each time must not grow it forever)
FUNCS_KEPT = 4096
_UNLABELLED = "<unlabelled property>"


def _func_info(func) -> tuple:
    name = getattr(func, "__name__", "")
    prop = None
    if name == "__get__" or name == "__set__":
        descriptor = getattr(func, "__self__", None)
        if type(descriptor).__name__ == "getset_descriptor":
            prop = descriptor.__name__ if descriptor.__name__ in _LABELLED_PROPERTIES else _UNLABELLED
    module = getattr(func, "__module__", "")
    ordinary = name not in _NOT_ORDINARY and type(module) is str and not module.startswith("torch.distributed")
    info = (name, prop, name in _WATCHED, ordinary, name in autocast.WATCHED)
    if len(_FUNCS) < FUNCS_KEPT:
        try:
            _FUNCS[func] = info
        except TypeError:  # unhashable
            pass
    return info


def measure_dispatch() -> float:
    """Measure once what PlacementMode adds to a torch call (clock.DISPATCH_S), for every job forked after it:
    the fork server calls it after its warm-up. The mode is pushed around the measurement only, over a tracer that
    installs nothing (no hooks, no patches: the server must stay as it was); the call it times takes the mode's
    fast path, as the per-job measurement did."""
    from app.harness.contract import DEFAULT_HOST
    from app.harness.machine import clock

    tracer = Tracer("<dispatch>", simulated=True, devices=Devices(DEFAULT_HOST))
    calls = CLOCK.calls
    with PlacementMode(tracer):
        clock.DISPATCH_S = clock.dispatch_cost()
    CLOCK.calls = calls
    return clock.DISPATCH_S


def _collective(func) -> bool:
    """torch.distributed's functions (dist.all_reduce ... reach the mode through their handle_torch_function): their
    GPU work is NCCL's kernel, which machine/distributed.py queues on NCCL's stream (clock.collective), never a
    kernel of their own on the current stream."""
    return getattr(func, "__module__", "").startswith("torch.distributed")


def _among(t, tensors: list) -> bool:
    """True when t is one of tensors (by identity: `in` would compare values)."""
    for other in tensors:
        if other is t:
            return True
    return False


def _marked(args) -> bool:
    """True when a tensor among args (or one level down in a list/tuple) carries a label or a mark."""
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.__dict__:
                return True
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor) and b.__dict__:
                    return True
    return False


