"""The tracer's hooks outside the TorchFunctionMode: DataLoader batches, module moves and forward passes,
optimizer steps, the learner's questions about devices, and a backward pass that stays traced.

A mixin of the Tracer (placement.py): it uses the tracer's record(), learner_frame(), names_in(), describe().
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import traceback

import torch
import torch.utils.data.dataloader
from torch.autograd import _make_grads, _tensor_or_tensors_to_tuple
from torch.autograd.graph import _engine_run_backward
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.data import TensorDataset, dataloader

from app.harness.machine.clock import CLOCK, _cpu
from app.harness.machine.simulation import tensors_in

# frames that are torch's own torch-function plumbing (between the learner's call and the mode)
_PLUMBING = (os.path.join("torch", "overrides.py"), os.path.join("torch", "_tensor.py"))
# ... and, for forward hooks, nn.Module's call machinery (between `model(xb)` and the hook)
_MODULE_PLUMBING = _PLUMBING + (os.path.join("torch", "nn", "modules", "module.py"),)
_ORIG_MODULE = {name: getattr(torch.nn.Module, name) for name in ("to", "cuda", "cpu")}
# the functions a program asks which device it may use (the answer a hard-coded "cuda" never waits for)
DEVICE_QUERIES = [("torch.cuda", "is_available"), ("torch.cuda", "device_count"),
                  ("torch.backends.mps", "is_available"), ("torch.mps", "is_available"),
                  ("torch.accelerator", "is_available"), ("torch.accelerator", "device_count"),
                  ("torch.accelerator", "current_accelerator")]
_SIGNATURES: dict = {}  # Tensor.backward's and torch.autograd.backward's, read once
# the keywords Tensor.backward hands to the mode, every one of them, by name (torch/_tensor.py, its
# handle_torch_function call): such a call's arguments need no binding to the signature
_BACKWARD_KEYWORDS = frozenset({"gradient", "retain_graph", "create_graph", "inputs"})
_ORIG_NEXT = None  # DataLoader's own __next__, as _patch_dataloader found it
_ORIG_WRAPPER_INIT = torch._utils.ExceptionWrapper.__init__  # torch's, before _patch_worker_errors
_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # app/harness/ (placement.HARNESS_DIR)
_MODULES = {"torch.cuda": torch.cuda, "torch.backends.mps": torch.backends.mps, "torch.mps": torch.mps,
            "torch.accelerator": torch.accelerator}


def _not_the_programs_time(hook):
    """A hook of the tracer's: its time is the simulation's, not the program's (machine/clock.py; CLOCK.excluded
    written out, as it runs for every optimizer step)."""
    def timed(*args):
        started = _cpu()
        try:
            return hook(*args)
        finally:
            CLOCK._cpu_mark += _cpu() - started
    return timed


class Hooks:
    """Installs and runs the hooks; the facts they gather go through the tracer's record()."""

    def install_hooks(self) -> None:
        """Module, optimizer, DataLoader and device-question hooks (before the learner's code runs)."""
        self._observers = [
            torch.nn.modules.module.register_module_forward_pre_hook(self._forward_pre_hook),
            register_optimizer_step_pre_hook(_not_the_programs_time(self._step_pre_hook)),
            register_optimizer_step_post_hook(self._step_post_hook)]
        self._patch_dataloader()
        self._patch_worker_errors()
        self._patch_module_moves()
        self._watch_device_queries()

    def stop_observing(self, *, batches: bool, module_frames: bool = False) -> None:
        """Remove the hooks that only gather facts, for a run whose facts nobody reads (elsewhere.py's run on
        another machine, a run that is not graded): with no global forward hook nn.Module calls take their fast
        path again, and an optimizer step no longer checks its gradients. What changes how the program behaves
        stays (the simulation, module moves' ordinals). batches=True: also give DataLoader its own __next__ back
        (only where no tracer mode runs: the patch keeps a simulated run's fetches untraced). module_frames=True:
        a global forward hook that does nothing stays, so that nn.Module calls keep the frames the traced run
        gives them (torch's `inner`), which a learner's traceback through a module shows."""
        for handle in getattr(self, "_observers", ()):
            handle.remove()
        self._observers = []
        self.observing = False  # nor does the mode count or describe the program's calls (Tracer.observing)
        if module_frames:
            self._observers.append(torch.nn.modules.module.register_module_forward_pre_hook(_no_facts))
        if batches and _ORIG_NEXT is not None:
            dataloader._BaseDataLoaderIter.__next__ = _ORIG_NEXT

    # ---------------------------------------------------------------- where the device came from
    def _watch_device_queries(self) -> None:
        """Record each time the learner's own code asks torch which device is usable."""
        tracer = self
        for module_name, name in DEVICE_QUERIES:
            module, original = _MODULES[module_name], getattr(_MODULES[module_name], name)

            @functools.wraps(original)
            def asked(*args, _original=original, _api=f"{module_name}.{name}", **kwargs):
                answer = _original(*args, **kwargs)
                caller = sys._getframe(1)
                checks_usable = _api != "torch.accelerator.current_accelerator" or kwargs.get(
                    "check_available", args[0] if args else False)
                if caller.f_code.co_filename == tracer.learner_file and checks_usable:
                    tracer.count_only("device_query")  # its count is read (first_placement, picks_device)
                return answer
            setattr(module, name, asked)

    def note_placement(self, device: str) -> None:
        """Remember the first time the learner's code put a tensor on an accelerator, and whether it had asked."""
        if self.first_placement is None:
            frame = self.learner_frame()
            self.first_placement = {"line": self.line_of(frame), "device": device,
                                    "asked": bool(self.counts.get("device_query"))}

    # ---------------------------------------------------------------- batches and module moves
    def _patch_dataloader(self) -> None:
        global _ORIG_NEXT
        tracer, orig_next = self, dataloader._BaseDataLoaderIter.__next__
        if _ORIG_NEXT is None:  # torch's own, even where an earlier tracer in this process patched it
            _ORIG_NEXT = orig_next

        def __next__(it):
            if _untraced_fetch(it):  # nothing labelled can come out: skip ~100 traced calls per batch
                with torch._C.DisableTorchFunction():
                    batch = orig_next(it)
            else:
                batch = orig_next(it)
            index = tracer.batches
            tracer.batches += 1
            for t in tensors_in(batch):
                t._pt_batch, t._pt_moved = index, False
            if tracer.observing:
                tracer.count_only("batch")  # its count is read (training-loop's batch_on_device)
            return batch
        dataloader._BaseDataLoaderIter.__next__ = __next__

    @staticmethod
    def _patch_worker_errors() -> None:
        """A DataLoader worker's exception reaches the program as text (torch._utils.ExceptionWrapper: "Caught
        RuntimeError in DataLoader worker process 0. Original Traceback ..."), formatted in the worker, where the
        tracer and the simulated GPU sit between the learner's __getitem__ and torch. Format it without their
        frames, as a real GPU's worker shows it (grade.format_learner_traceback does the same for the program)."""
        def __init__(wrapper, exc_info=None, where="in background"):
            exc_info = exc_info if exc_info is not None else sys.exc_info()
            _ORIG_WRAPPER_INIT(wrapper, exc_info, where)
            try:
                wrapper.exc_msg = _without_harness_frames(*exc_info)
            except Exception:  # torch's own text stands, harness frames and all
                pass
        torch._utils.ExceptionWrapper.__init__ = __init__

    def _patch_module_moves(self) -> None:
        tracer = self
        for name, orig in _ORIG_MODULE.items():
            def move(module, *args, _orig=orig, _name=name, **kwargs):
                # its facts only where someone reads them: in a run that is not graded, listing the parameters and
                # summing their bytes (a traced call each on the simulated GPU) cost more than the move's own work
                frame = tracer.learner_frame(direct=True) if tracer.observing else None
                if tracer.simulated and _name == "to":  # `model.to(0)`: the C++ parser would ask for a real GPU
                    args, kwargs = tracer.ordinals_named(args, kwargs)
                before = {tracer.device_of(p) for p in module.parameters()} if frame is not None else set()
                out = _orig(module, *args, **kwargs)
                if frame is not None:
                    devices = sorted({tracer.device_of(p) for p in module.parameters()})
                    tracer.note_module_move(frame, module, before, devices)
                    tracer.record("module_move", line=frame.f_lineno, op=_name, module=type(module).__name__,
                                  names=tracer.names_in(frame, module), devices=devices, step=tracer.steps,
                                  forwards=tracer.forwards, id=id(module))
                return out
            setattr(torch.nn.Module, name, move)

    def note_module_move(self, frame, module, before: set, after: list) -> None:
        """Put a module's move on the placement map when its parameters changed device."""
        if not after or set(after) == before:
            return
        # the bytes' numel() and element_size() are the tracer's calls, not the program's: through the mode each was
        # a traced op (~10 us) and showed in the report's ops on the learner's line as if the learner had called it
        with torch._C.DisableTorchFunction():
            nbytes = sum(p.numel() * p.element_size() for p in module.parameters())
        self.lines.note(frame.f_lineno, "to_host" if after[0].startswith("cpu") else "to_device", after[0],
                        names=self.names_in(frame, module), module=type(module).__name__, nbytes=nbytes, op="to")

    # ---------------------------------------------------------------- module and optimizer hooks
    def _forward_pre_hook(self, module, inputs):
        """Every module call: the facts of one the learner's line made itself. Only their gathering is measured out of
        the program's time (CLOCK._cpu_mark), as CLOCK.excluded would: the calls inside a module, most of them, only
        walk to a frame that is not the learner's, and two CPU-clock reads each (a system call in the sandbox) cost
        more than that walk."""
        frame = self.learner_frame(direct=True, plumbing=_MODULE_PLUMBING)
        if frame is None:
            return None
        started = _cpu()
        self.forwards += 1
        try:
            # the facts' own torch calls (each input's dim() and shape) are the tracer's, not the program's: through
            # the mode each was a traced op on the simulated GPU (the clock's enter and leave, a walk to the learner's
            # line); nothing they answer depends on the mode
            with torch._C.DisableTorchFunction():
                self._forward_facts(module, inputs, frame)
        finally:
            CLOCK._cpu_mark += _cpu() - started
        return None

    def _forward_facts(self, module, inputs, frame) -> None:
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        device_of = self.device_of
        host = False  # a host tensor with dimensions went in (not on_accelerator(t) and t.dim() > 0)
        for t in tensors:
            if device_of(t).startswith("cpu") and t.dim() > 0:
                host = True
                break
        if not host and not self.keeping("forward"):
            self.counts["forward"] = self.counts.get("forward", 0) + 1
            return
        params = _parameters(module)
        fact = {"n": self.forwards, "line": self.line_of(frame), "module": type(module).__name__, "id": id(module),
                "step": self.steps, "names": self.names_in(frame, module), "has_params": bool(params),
                "grad": torch.is_grad_enabled(), "param_devices": sorted({device_of(p) for p in params}),
                "inputs": [self.describe(t, frame) for t in tensors],
                "shape": list(tensors[0].shape) if tensors else None}  # samples per step (fits-on-one-gpu)
        self.keep("forward", fact)
        if host:
            self.keep("host_input", {k: v for k, v in fact.items() if k != "n"})

    def _step_pre_hook(self, optimizer, args, kwargs):
        if not self.keeping("step"):  # past the kept ones only counted: no gradients to look at
            self.counts["step"] = self.counts.get("step", 0) + 1
            return
        frame = self.learner_frame()
        with torch._C.DisableTorchFunction():
            params = [p for g in optimizer.param_groups for p in g["params"]]
            grads = [p.grad for p in params if p.grad is not None]
            known = [g for g in grads if not g.is_meta and "_pt_nodata" not in g.__dict__]
            # a data-less gradient's values are unknown: assume what a real GPU would most likely have. The sum's
            # comparison with 0 in Python, as a float: the same answer (a NaN's is no) for one torch call less
            nonzero = len(known) < len(grads) or any(float(g.detach().abs().sum()) > 0 for g in known)
        device_of = self.device_of
        self.keep("step", {"line": self.line_of(frame), "n": self.steps, "params": len(params),
                           "grads": len(grads), "nonzero": nonzero, "backwards": self.counts.get("backward", 0),
                           "devices": sorted({device_of(p) for p in params})})

    def _step_post_hook(self, optimizer, args, kwargs):
        self.steps += 1
        CLOCK.step_done()

    def _traced_backward(self, func, args, kwargs):
        """Run backward with the mode back on, so Python code inside it (custom autograd Functions, hooks) is
        traced like the forward pass. torch.autograd.backward's own steps, up to the engine, which never
        dispatches to a mode (calling backward itself again would only come back here)."""
        if func is torch.Tensor.backward and len(args) == 1 and _BACKWARD_KEYWORDS.issuperset(kwargs):
            bound = {"self": args[0], **kwargs}  # what binding says, without its ~14 us (each loss.backward())
        else:
            signature = _SIGNATURES.get(func) or _SIGNATURES.setdefault(func, inspect.signature(func))
            bound = signature.bind(*args, **kwargs).arguments
        tensors = bound.get("self", bound.get("tensors"))
        tensors = (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors)
        inputs = bound.get("inputs")
        inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs) if inputs is not None else ()
        create_graph = bool(bound.get("create_graph", False))
        retain_graph = bound.get("retain_graph")
        with self.mode:
            grads = _make_grads(tensors, _tensor_or_tensors_to_tuple(
                bound.get("gradient", bound.get("grad_tensors")), len(tensors)), is_grads_batched=False)
            _engine_run_backward(tensors, grads, create_graph if retain_graph is None else retain_graph,
                                 create_graph, inputs, allow_unreachable=True, accumulate_grad=True)
        if self.simulated:
            # the gradients it made live on the GPU now (torch.OutOfMemoryError here when they do not fit); from a
            # data-less loss their values are unknown
            self.memory.sweep_grads(valueless=any("_pt_nodata" in t.__dict__ for t in tensors))
        return None



# nn.Module's own methods that list a module's parameters (Module.parameters -> named_parameters -> _named_members
# -> named_modules, each submodule's named_modules in turn, which skips a module it met by a set: by hash and ==)
_PARAMETERS, _NAMED_PARAMETERS = torch.nn.Module.parameters, torch.nn.Module.named_parameters
_NAMED_MEMBERS, _NAMED_MODULES = torch.nn.Module._named_members, torch.nn.Module.named_modules
_HASH, _EQ = object.__hash__, object.__eq__


def _parameters(module) -> list:
    """The tensors list(module.parameters()) gives, in some order and maybe repeated, for a module the learner's
    line called (its forward facts ask only whether there are any and on which devices): read from the modules'
    own dicts where every class on the way walks and compares them as nn.Module does (~1.2 us instead of ~3 for a
    Sequential of three, timeit); else, and on any error, torch's walk, which says what it says."""
    cls = type(module)
    if cls.parameters is not _PARAMETERS or cls.named_parameters is not _NAMED_PARAMETERS \
            or cls._named_members is not _NAMED_MEMBERS:
        return list(module.parameters())
    params, seen, stack = [], set(), [module]
    try:
        while stack:
            m = stack.pop()
            if id(m) in seen:
                continue
            kind = type(m)
            if kind.named_modules is not _NAMED_MODULES or kind.__hash__ is not _HASH or kind.__eq__ is not _EQ:
                return list(module.parameters())
            seen.add(id(m))
            for p in m._parameters.values():
                if p is not None:
                    params.append(p)
            for child in m._modules.values():
                if child is not None:
                    stack.append(child)
    except Exception:  # a module without its dicts (no nn.Module.__init__), a dict that is not one ...
        return list(module.parameters())
    return params


def _no_facts(module, inputs):
    """The global forward pre-hook of a run whose facts nobody reads (stop_observing's module_frames)."""
    return None


def warm_up() -> None:
    """Read backward's signatures now (the fork server calls this through harness.load()): each job read them
    again at its first backward() that binds them (torch.autograd.backward, or arguments by position), 0.2 ms of
    its CPU."""
    for func in (torch.Tensor.backward, torch.autograd.backward):
        _SIGNATURES.setdefault(func, inspect.signature(func))


def _untraced_fetch(it) -> bool:
    """True when a DataLoader's next batch can be fetched without the tracer: a TensorDataset of unlabelled,
    unmarked tensors, the default collate, one process, no pinning. Nothing in that fetch is the learner's code,
    and nothing it returns can carry a device label, so tracing it (an index, a stack and a few views per sample,
    thousands of calls in a training loop) would only cost time. Anything else, e.g. a learner's Dataset whose
    __getitem__ moves tensors, is traced as usual."""
    dataset = getattr(it, "_dataset", None)
    return (type(it) is dataloader._SingleProcessDataLoaderIter and not it._pin_memory
            and type(dataset) is TensorDataset
            and getattr(it, "_collate_fn", None) in (dataloader.default_collate, dataloader.default_convert)
            and not any(isinstance(t, torch.Tensor) and t.__dict__ for t in dataset.tensors))


def _without_harness_frames(exc_type, exc, tb) -> str:
    """traceback.format_exception(exc_type, exc, tb) without the harness's frames and torch's torch-function
    plumbing (torch/overrides.py), which exist only because the tracer and the simulation are on."""
    formatted = traceback.TracebackException(exc_type, exc, tb)
    formatted.stack = traceback.StackSummary.from_list(
        [fs for fs in formatted.stack if not fs.filename.startswith(_HARNESS_DIR)
         and not fs.filename.endswith(_PLUMBING[0])])
    return "".join(formatted.format())
