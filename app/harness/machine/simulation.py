"""Logical device labels: GPUs on a host that has none (the "lighter idea" of research section 2).

A tensor created with `device=`, moved with `.to(...)`/`.cuda(...)` or computed from such tensors carries the
label of its simulated device (the attribute `_pt_dev`, e.g. "cuda:1") while its data stays in host memory. Its
`device`, `is_cuda`, `get_device()`, `type()` and repr answer from the label, `.numpy()` refuses like CUDA, an op
that meets two devices (a GPU and the host, or two GPUs) raises the RuntimeError a GPU would, in torch's words
(wording.py), and an ordinal the host does not have raises CUDA's invalid-ordinal error. Random numbers drawn
on a simulated GPU come from that GPU's own generator, so the host's random stream is the one a real machine has.
The Tracer (placement.py) mixes this class in and uses it only when the host has no CUDA.
"""

from __future__ import annotations

import re

import torch

from app.harness.machine import autocast, cuda_streams, dataless, mps
from app.harness.wording import messages, wording

_ORIG_TENSOR_TO = torch._C.TensorBase.to
_ORIG_PARAMETER_NEW = torch.nn.Parameter.__new__
_ORIG_GET_OBJ_STATE = torch._utils._get_obj_state
_REAL_DEVICE = torch._C.device
# calls that may take host and accelerator tensors together (copies, indexing with host indices, printing; and
# Module.to()'s question whether a parameter can take its moved copy's storage: aten's
# _has_compatible_shallow_copy_type compares the two TensorImpls' dispatch keys and runs no kernel
# (aten/src/ATen/native/TypeProperties.cpp), so no device check can fail in it, and rerunning it on meta to word a
# mismatch that cannot happen cost each job 0.17 ms per parameter)
MIXING_ALLOWED = {"__setitem__", "copy_", "__deepcopy__", "__reduce_ex__", "__repr__", "__format__",
                  "__setstate__", "__get__", "__set__", "is_pinned", "pin_memory", "record_stream",
                  "_has_compatible_shallow_copy_type"}
_REPR_SUFFIX = re.compile(r"(, (?:size|dtype|layout|grad_fn|requires_grad|names)=.*)?\)\Z", re.S)
# reading a device tensor's value on the host: the host waits for the device, then copies the value back
SYNC_READS = {"item", "tolist", "__repr__", "__format__", "__bool__", "__float__", "__int__", "__index__"}
# random ops that take a `generator=`: a simulated GPU's draws use that GPU's generator
RANDOM_WITH_GENERATOR = {"randn", "rand", "randint", "randperm", "normal", "bernoulli", "multinomial", "poisson",
                         "normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_",
                         "log_normal_", "cauchy_"}
# random ops without one: they draw from the GPU's generator through the host generator's state, swapped in
RANDOM_WITHOUT_GENERATOR = {"dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout", "dropout1d",
                            "dropout2d", "dropout3d", "rrelu", "randn_like", "rand_like", "randint_like",
                            "native_dropout"}
_LEGACY_TYPES = {torch.float32: "FloatTensor", torch.float64: "DoubleTensor", torch.float16: "HalfTensor",
                 torch.bfloat16: "BFloat16Tensor", torch.int64: "LongTensor", torch.int32: "IntTensor",
                 torch.int16: "ShortTensor", torch.int8: "CharTensor", torch.uint8: "ByteTensor",
                 torch.bool: "BoolTensor"}


def tensors_in(obj, out: list | None = None) -> list[torch.Tensor]:
    """Every tensor in nested tuples/lists/dicts (a hand-written walk: pytree costs ~10x more per call)."""
    if out is None:
        out = []
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            if isinstance(item, (torch.Tensor, list, tuple, dict)):
                tensors_in(item, out)
    elif isinstance(obj, dict):
        for item in obj.values():
            if isinstance(item, (torch.Tensor, list, tuple, dict)):
                tensors_in(item, out)
    return out


def call_tensors(args, kwargs) -> list[torch.Tensor]:
    """tensors_in((args, kwargs)), in the same order, with a call's usual arguments (tensors and scalars) looked at
    here rather than one recursive call each: every traced call reads its tensors."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple, dict)):
            tensors_in(a, out)
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, torch.Tensor):
                out.append(a)
            elif isinstance(a, (list, tuple, dict)):
                tensors_in(a, out)
    return out


def _unpack_saved(t):
    return t


def _is_meta(t: torch.Tensor) -> bool:
    with torch._C.DisableTorchFunction():
        return t.is_meta


def _int_device(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Simulation:
    """The label-keeping half of the Tracer: moves, factories, ordinals, NumPy, mixing checks, reprs."""

    # ---------------------------------------------------------------- labels
    def set_label(self, t: torch.Tensor, label: str | None) -> None:
        """Put t on a simulated device (or back on the host: None), and count its memory there (which raises
        torch.OutOfMemoryError when the card cannot hold it)."""
        if label and label != "cpu":
            if label.startswith("mps"):  # the Mac's GPU: no float64, and its own allocator
                mps.refuse_dtype(t.dtype)
                if self.mps is not None:
                    self.mps.track(t)
            t._pt_dev = label
            if "_pt_nodata" in t.__dict__:
                self.keep_saved_tensors()
            self.memory.track(t, label)
        else:
            t.__dict__.pop("_pt_dev", None)
            self.memory.untrack(t)

    def install_simulation(self) -> None:
        """Patch what the mode cannot see: Parameter construction and pinned memory (also used by threads)."""
        sim = self

        def parameter_new(cls, data=None, requires_grad=True):
            param = _ORIG_PARAMETER_NEW(cls, data, requires_grad)
            if isinstance(data, torch.Tensor) and "_pt_nodata" in data.__dict__:
                dataless.mark(param, data.__dict__["_pt_nodata"])
            if isinstance(data, torch.Tensor) and data.__dict__.get("_pt_dev"):
                sim.set_label(param, data._pt_dev)  # nn.Linear(..., device="cuda") builds its weight this way
            return param

        def pin_memory(t, device=None):
            if t.__dict__.get("_pt_dev"):  # aten/src/ATen/native/Memory.cpp: _pin_memory
                kind = t.__dict__["_pt_dev"].split(":")[0]
                raise RuntimeError(f"cannot pin 'torch.{kind}.{_LEGACY_TYPES.get(t.dtype, 'Tensor')}' only dense CPU "
                                   "tensors can be pinned")
            if t.__dict__.get("_pt_pinned"):
                return t
            with torch._C.DisableTorchFunction():
                out = t.clone()
            for key in ("_pt_batch", "_pt_moved"):
                if key in t.__dict__:
                    out.__dict__[key] = t.__dict__[key]
            out._pt_pinned = True
            return out

        def obj_state(obj):
            """A tensor's pickled Python state, without the simulation's own attributes."""
            state = _ORIG_GET_OBJ_STATE(obj)
            if isinstance(state, dict) and any(k.startswith("_pt_") for k in state):
                state = {k: v for k, v in state.items() if not k.startswith("_pt_")}
            return state

        torch.nn.Parameter.__new__ = staticmethod(parameter_new)
        torch._utils._get_obj_state = obj_state
        torch.Tensor.pin_memory = pin_memory
        torch.Tensor.is_pinned = lambda t, device=None: bool(t.__dict__.get("_pt_pinned"))
        # simulated streams are no torch.Stream for the C++ argument parser; the GPU is idle anyway
        torch.Tensor.record_stream = lambda t, stream: None

    # ---------------------------------------------------------------- the calls the simulation answers
    def simulate(self, func, name: str, args, kwargs, ins: list | None = None, frames: tuple | None = None):
        """Answer a call that a simulated device changes; return NotImplemented for an ordinary call. `ins`: the
        call's tensors (tensors_in), when the caller has them; `frames`: (the learner's frame that made the call
        directly, the nearest learner frame), learner_frames() of the call, when the caller walked the stack
        already (the tracer's _on_clock: a move, a read, would walk it again from here to the same frames)."""
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if first is not None:
            if name in ("to", "cuda", "cpu", "type_as"):
                return self._move(func, name, args, kwargs, frames)
            if name in ("numpy", "__array__"):
                self._refuse_numpy(name, first, kwargs)
            label = first.__dict__.get("_pt_dev")
            if label and name == "get_device":
                return int(label.rsplit(":", 1)[1])
            if label and name == "type" and len(args) == 1 and not kwargs:
                return f"torch.{label.split(':')[0]}.{_LEGACY_TYPES.get(first.dtype, 'Tensor')}"
            if label and name in SYNC_READS:  # reading a GPU value waits for the GPU
                if not cuda_streams.CLOCK.active:
                    line = None
                elif frames is not None:
                    line = self.line_of(frames[1])
                else:
                    frame = self.learner_frame()
                    line = frame.f_lineno if frame else None
                cuda_streams.CLOCK.sync(label, read=True, line=line)
            if label and name in dataless.READS and "_pt_nodata" in first.__dict__:
                raise dataless.refuse(first, label)
        target = kwargs.get("device")
        if (target is not None or kwargs.get("pin_memory")) and name not in MIXING_ALLOWED:
            return self._factory(func, name, args, kwargs, "cpu" if target is None else target)
        self._check_mixing(func, name, args, kwargs, ins)
        return NotImplemented

    def run_simulated(self, func, name: str, args, kwargs, ins: list | None = None):
        """Run an ordinary call that meets simulated GPU tensors: autocast casts and the GPU's random state. `ins`:
        the call's tensors, when the caller has them."""
        if ins is None:
            ins = call_tensors(args, kwargs)
        # past the job's budget for GPU tensors with values, results are kept without values too
        if dataless.any_dataless(ins):
            valueless = "derived"  # why its results have no values (dataless.mark)
        elif name not in dataless.NO_NEW_MEMORY and self.memory.over_budget(self.devices.host):
            valueless = "budget"
        else:
            valueless = None
        kind = autocast.active()
        if kind and name in autocast.WATCHED:
            args, kwargs = autocast.cast_arguments(name, args, kwargs, self.on_accelerator, kind)
            ins = call_tensors(args, kwargs)  # the cast tensors from here on
        if valueless:
            return dataless.run(func, name, args, kwargs, self.device_of, why=valueless)
        if name in RANDOM_WITH_GENERATOR or name in RANDOM_WITHOUT_GENERATOR:
            label = next((t.__dict__["_pt_dev"] for t in tensors_in(args) if t.__dict__.get("_pt_dev")), None)
            if label:
                return self._with_gpu_random(label, func, name, args, kwargs)
        try:
            if self.devices.host.mps and self._on_mps(ins):
                return self.mps.run(func, args, kwargs)  # ops without an MPS kernel fail (or fall back) here
            return func(*args, **kwargs)
        except RuntimeError as exc:  # a meta tensor torch made itself (a gradient) met one with values
            if "meta" in str(exc) and any(_is_meta(t) for t in call_tensors(args, kwargs)):
                return dataless.run(func, name, args, kwargs, self.device_of)
            raise

    @staticmethod
    def _on_mps(ins: list) -> bool:
        return any(t.__dict__.get("_pt_dev", "").startswith("mps") for t in ins)

    def keep_saved_tensors(self) -> None:
        """From the first data-less tensor on, count what autograd saves for backward until its graph is gone
        (activations are most of a large model's memory; values of small programs are not affected)."""
        if not getattr(self, "_saving", False):
            torch._C._autograd._push_saved_tensors_default_hooks(self.memory.pack_saved, _unpack_saved)
            self._saving = True

    # ---------------------------------------------------------------- NumPy and mixing
    def _refuse_numpy(self, name, t, kwargs) -> None:
        if self.on_accelerator(t) and not kwargs.get("force", False):
            frame = self.learner_frame()
            self.record("numpy_on_accelerator", line=frame.f_lineno if frame else None, op=name,
                        names=self.names_in(frame, t), device=self.device_of(t))
            raise messages.numpy_on_device(self.device_of(t))

    def _check_mixing(self, func, name, args, kwargs, tensors: list | None = None) -> None:
        if name in MIXING_ALLOWED:
            return
        if tensors is None:
            tensors = call_tensors(args, kwargs)
        labels = {t.__dict__.get("_pt_dev") for t in tensors} - {None}
        if not labels:
            return
        host = any("_pt_dev" not in t.__dict__ and t.dim() > 0 for t in tensors)
        if len(labels) < 2 and not host:
            return
        message = wording.mismatch_message(func, args, kwargs, self.device_of)
        if message:
            self._record_mismatch(name, args, kwargs, message)
            raise RuntimeError(message)

    def _record_mismatch(self, name, args, kwargs, message) -> None:
        frame = self.learner_frame()
        tensors = [self.describe(t, frame) for t in call_tensors(args, kwargs)][:6]
        self.record("mismatch", line=frame.f_lineno if frame else None, op=name, message=message, tensors=tensors)
        self.lines.note(frame.f_lineno if frame else None, "mismatch",
                        " and ".join(sorted({t["device"] for t in tensors})),
                        names=[n for t in tensors for n in t["names"][:1]], op=name)

    # ---------------------------------------------------------------- factories and moves
    def _target(self, device) -> str | None:
        """The label for a simulated placement on `device`, after CUDA's checks; None when not simulated."""
        label = self.devices.label(device)
        if not self.devices.simulates(label):
            return None
        return self.devices.place(label)

    def _factory(self, func, name, args, kwargs, device):
        target = self._target(device)
        if target is None:  # the host, or a device this build lacks (torch raises its own error)
            pinned = bool(kwargs.get("pin_memory")) and self.devices.host.cuda
            if pinned:  # host memory a CUDA build can pin (torch.empty(..., pin_memory=True))
                kwargs = {**kwargs, "pin_memory": False}
            out = func(*args, **kwargs)
            for t in tensors_in(out) if pinned else ():
                t._pt_pinned = True
            return self._finish(func, name, args, kwargs, out, propagate=False)
        planned, why = self._plan_factory(func, args, kwargs, target)
        if planned is not None:  # too large to keep values: the meta result is the tensor
            for t in tensors_in(planned):
                dataless.mark(t, why)
                self.set_label(t, target)
            self.note_placement(target)
            return self._finish(func, name, args, kwargs, planned, propagate=False)
        kwargs = {**kwargs, "device": "cpu"}
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False
        if name in RANDOM_WITH_GENERATOR and kwargs.get("generator") is None:
            kwargs["generator"] = self._gpu_generator(target)
        out = func(*args, **kwargs) if "generator" in kwargs or name not in RANDOM_WITHOUT_GENERATOR \
            else self._with_gpu_random(target, func, name, args, kwargs)
        for t in tensors_in(out):
            self.set_label(t, target)
        self.note_placement(target)
        return self._finish(func, name, args, kwargs, out, propagate=False)

    def _plan_factory(self, func, args, kwargs, target: str):
        """Size a factory's result on meta first: raise the card's out-of-memory error before any host memory is
        touched; return the meta result and why it keeps no values (memory.dataless_reason) when it is kept
        without values, else (None, None): make it for real."""
        meta_kwargs = {k: v for k, v in kwargs.items() if k not in ("generator", "pin_memory")}
        meta_kwargs["device"] = "meta"
        try:
            with torch._C.DisableTorchFunction():
                out = func(*args, **meta_kwargs)
                outs = tensors_in(out)
                nbytes = sum(t.untyped_storage().nbytes() for t in outs)
        except Exception:  # no meta kernel, or arguments torch refuses: the real call raises torch's own error
            return None, None
        self.memory.preflight(target, nbytes)
        why = self.memory.dataless_reason(nbytes, self.devices.host) if outs and nbytes else None
        return (out, why) if why else (None, None)

    def _finish(self, func, name, args, kwargs, out, propagate=True):
        if propagate:
            self._propagate(name, args, kwargs, out)
        self._observe(name, args, kwargs, out)
        return out

    def _move_target(self, name, src, args, kwargs):
        """(target device label or None, dtype, non_blocking, memory_format) of a .to/.cuda/.cpu/.type_as call."""
        if name == "to" and len(args) == 2 and not kwargs and type(args[1]) is _REAL_DEVICE:
            # `t.to(device)`, every batch of a training loop: what _parse_to answers for a device alone
            return self.devices.label(args[1]), None, False, torch.preserve_format
        dtype, non_blocking = None, kwargs.get("non_blocking", False)
        memory_format = kwargs.get("memory_format") or torch.preserve_format
        if name in ("to", "type_as"):
            other = args[1] if len(args) > 1 else kwargs.get("other")
            if isinstance(other, torch.Tensor):
                return self.device_of(other), other.dtype, non_blocking, memory_format
            rest = tuple(self.devices.label(a) if _int_device(a) else a for a in args[1:])
            parse = {k: (self.devices.label(v) if k == "device" and _int_device(v) else v)
                     for k, v in kwargs.items() if k != "copy"}  # _parse_to knows every argument but copy
            device, dtype, non_blocking, parsed_format = torch._C._nn._parse_to(*rest, **parse)
            label = self.devices.label(device) if device is not None else self.device_of(src)
            return label, dtype, non_blocking, parsed_format or memory_format
        if name == "cuda":
            index = args[1] if len(args) > 1 else kwargs.get("device")
            device = index if index is not None else "cuda"
            device = _REAL_DEVICE("cuda", device) if _int_device(device) else device
            return self.devices.label(device), None, non_blocking, memory_format
        return "cpu", None, non_blocking, memory_format

    def _move(self, func, name, args, kwargs, frames: tuple | None = None):
        """A .to/.cuda/.cpu/.type_as call on a simulated host. `frames`: learner_frames() of the call, when the
        caller has them (simulate says)."""
        src = args[0]
        label, dtype, non_blocking, memory_format = self._move_target(name, src, args, kwargs)
        if label != "cpu" and not self.devices.simulates(label):
            return func(*args, **kwargs)  # a device this build does not have: torch's own error
        if label != "cpu":
            label = self.devices.place(label)
        current = self.device_of(src)
        moving = label != current
        if moving and label != "cpu":
            self.note_placement(label)
        out = self._move_data(src, label, current, dtype, non_blocking, bool(kwargs.get("copy", False) or moving),
                              memory_format)
        clock = cuda_streams.CLOCK
        seen = {} if frames is None else {"frame": frames[0]}
        if clock.active and out is not src and (moving or label != "cpu"):
            # one walk (none when the caller made it): the copy's line, and the move's facts below
            direct, frame = self.learner_frames() if frames is None else frames
            seen["frame"] = direct
            line = self.line_of(frame)
            if moving:
                clock.copy(current, label, src.numel() * src.element_size(), line=line, non_blocking=non_blocking,
                           pinned=bool(src.__dict__.get("_pt_pinned")))
            else:  # a cast or a copy on the same GPU: one elementwise kernel
                clock.op("_to_copy", label, [src], [out], line)
        if out is not src:
            self.set_label(out, label if label != "cpu" else None)
            for key in ("_pt_batch", "_pt_loss"):
                if key in src.__dict__:
                    out.__dict__[key] = src.__dict__[key]
            if "_pt_batch" in src.__dict__:
                out._pt_moved = label != "cpu" or bool(src.__dict__.get("_pt_moved"))
            if moving and label == "cpu":
                self._arrived_on_host(out, non_blocking)
        self._observe(name, args, kwargs, out, move=(current, label), non_blocking=non_blocking, **seen)
        return out

    def _move_data(self, src, label, current, dtype, non_blocking, copy, memory_format):
        """The moved tensor: a host copy (what every simulated GPU tensor is), or, for a tensor too large to keep
        values, a meta one; the card's out-of-memory error first when the copy lands on a GPU that cannot hold it."""
        # a meta tensor torch made itself (inside a decomposition, say) has no values either
        valueless = "_pt_nodata" in src.__dict__ or _is_meta(src)
        if valueless and label == "cpu" and current != "cpu":
            raise dataless.refuse(src, current, "cannot copy its values to the host")
        dtype = dtype or src.dtype
        if label != "cpu" and (copy or dtype != src.dtype):
            nbytes = src.numel() * dtype.itemsize
            self.memory.preflight(label, nbytes)
            why = "derived" if valueless else self.memory.dataless_reason(nbytes, self.devices.host)
            if why:
                base = src if valueless else dataless.lift(src)
                out = _ORIG_TENSOR_TO(base, "meta", dtype=dtype, copy=True, memory_format=memory_format)
                dataless.mark(out, why)
                return out
        if valueless:  # same device, same dtype, no copy: the tensor itself
            return _ORIG_TENSOR_TO(src, "meta", dtype=dtype, copy=copy, memory_format=memory_format)
        return _ORIG_TENSOR_TO(src, "cpu", dtype=dtype, non_blocking=non_blocking, copy=copy,
                               memory_format=memory_format)

    @staticmethod
    def _arrived_on_host(out: torch.Tensor, non_blocking: bool) -> None:
        """A GPU-to-host copy: a blocking one waits for the GPU; a non-blocking one lands in pinned memory."""
        if non_blocking:
            out._pt_pinned = True  # torch allocates the destination pinned, so the copy really is asynchronous
            out._pt_copied_at = cuda_streams.CLOCK.count
        elif not cuda_streams.CLOCK.active:  # with a clock, the copy itself waited (and counted)
            cuda_streams.CLOCK.tick()

    # ---------------------------------------------------------------- random numbers of a simulated GPU
    def _gpu_generator(self, label: str):
        index = int(label.rsplit(":", 1)[1])
        if label.startswith("mps"):  # the Mac's one generator (torch.mps.manual_seed seeds it)
            return self.mps.generator if self.mps is not None else None
        generators = torch.cuda.default_generators if label.startswith("cuda") else ()
        return generators[index] if index < len(generators) else None

    def _with_gpu_random(self, label, func, name, args, kwargs):
        generator = self._gpu_generator(label)
        if generator is None:
            return func(*args, **kwargs)
        if name in RANDOM_WITH_GENERATOR and kwargs.get("generator") is None:
            return func(*args, **{**kwargs, "generator": generator})
        host = torch.default_generator
        saved = host.get_state()
        host.set_state(generator.get_state())
        try:
            return func(*args, **kwargs)
        finally:
            generator.set_state(host.get_state())
            host.set_state(saved)

    # ---------------------------------------------------------------- printing
    def repr_with_device(self, t: torch.Tensor, text: str) -> str:
        """Add the device suffix torch prints for an accelerator tensor to a host tensor's repr."""
        label = t.__dict__.get("_pt_dev") if self.simulated else None
        if not label or "device=" in text:
            return text
        match = _REPR_SUFFIX.search(text)
        if match is None:
            return text
        return text[:match.start()] + f", device='{label}'" + text[match.start():]
