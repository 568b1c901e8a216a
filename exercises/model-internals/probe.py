"""Runs inside the sandbox after the learner's file: what the learner's models keep, and where `forward` makes tensors.

The probe finds the learner's models by type (nn.Module subclasses defined in the learner's file), whatever the
variables are called; when none is alive at the end (a model built inside `main()`), it builds one from its class.

* Kept tensors: each model's buffers, plain tensor attributes (which `model.to()` does not move) and frozen
  parameters (a buffer in disguise), with the line that assigns them.
* Made tensors: `forward` runs once on the `meta` device (shapes, no data), with the input, the parameters, the
  buffers and even the plain attributes there. A tensor it makes on any other device, or makes elsewhere and
  copies over, is then visible whatever device the learner's own run used. That trial runs under a
  TorchFunctionMode of the probe's own, below the placement tracer and with the global module hooks set aside,
  so the tracer's report of the learner's run stays exactly as it was.
"""

import contextlib
import gc
import inspect
import io
import linecache
import re
import sys
import traceback

import torch
from torch.overrides import TorchFunctionMode

# frames between a learner's call and a TorchFunctionMode that belong to torch's own dispatch
PLUMBING = ("overrides.py", "_tensor.py")
MOVES = {"to", "cuda", "cpu", "type_as", "mps"}
# lines of learner source sent back, for messages that quote what a line does
MAX_LINES = 300
TRIAL_BATCH, TRIAL_LENGTH, DEFAULT_FEATURES = 2, 5, 8
# what every nn.Module keeps in its __dict__ (_parameters, _buffers, hooks ...): not the learner's attributes
MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))


def probe(ns, api):
    """Report the learner's models (what they keep) and a trial of each model's forward on meta."""
    classes, live = learner_models(ns, api.filename)
    models = top_level(live) or fresh_models(classes)
    return {
        "classes": [describe_class(cls, api.filename) for cls in classes],
        "models": [describe_model(m, api) for m in all_learner_modules(models, classes)],
        "built_by_probe": bool(models) and not live,
        "trials": [trial(m, api.filename) for m in one_per_class(models)],
        "lines": source_lines(classes, api.filename),
    }


# ------------------------------------------------------------------ finding the learner's models
def methods(cls, filename):
    """Code objects of the functions the class body defines in the learner's file (methods, properties ...)."""
    out = []
    for value in vars(cls).values():
        func = getattr(value, "fget", None) or getattr(value, "__func__", None) or value
        code = getattr(func, "__code__", None)
        if code is not None and code.co_filename == filename:
            out.append(code)
    return out


def defined_in(cls, filename):
    """True when the class body has a function written in the learner's file."""
    return bool(methods(cls, filename))


def learner_models(ns, filename):
    """The nn.Module classes the learner's file defines, and their instances still alive."""
    objects = list(ns.values()) + gc.get_objects()
    classes, live = [], []
    # type(obj), not isinstance: isinstance may ask a learner object for its __class__, which can be anything
    for obj in objects:
        if issubclass(type(obj), type) and issubclass(obj, torch.nn.Module) and obj not in classes \
                and defined_in(obj, filename):
            classes.append(obj)
    for obj in objects:
        if type(obj) in classes and not any(obj is m for m in live):
            live.append(obj)
    return classes, live


def top_level(models):
    """Learner models that are not a submodule of another learner model."""
    inner = {id(sub) for m in models for sub in list(m.modules())[1:]}
    return [m for m in models if id(m) not in inner]


def fresh_models(classes):
    """Build each learner class that takes no arguments (outside the tracer: this is not the learner's run)."""
    built = []
    for cls in classes:
        try:
            with torch._C.DisableTorchFunction(), contextlib.redirect_stdout(io.StringIO()):
                built.append(cls())
        except BaseException:  # a class that needs arguments, or fails: nothing to look at
            continue
    return top_level(built)


def all_learner_modules(models, classes):
    """Every learner-class module inside the models (the models themselves included), each once."""
    seen, out = set(), []
    for m in models:
        for sub in m.modules():
            if type(sub) in classes and id(sub) not in seen:
                seen.add(id(sub))
                out.append(sub)
    return out


def one_per_class(models):
    """The first model of each class: one trial per class is enough."""
    seen, out = set(), []
    for m in models:
        if type(m) not in seen:
            seen.add(type(m))
            out.append(m)
    return out


# ------------------------------------------------------------------ what a model keeps
def describe_class(cls, filename):
    """Name and line span of a learner class."""
    lines, start = class_source(cls, filename)
    return {"name": cls.__name__, "line": start, "end": start + len(lines) - 1}


def class_source(cls, filename):
    """(lines, first line number) of the class in the learner's file: from `class` to its last method line.

    Not inspect.getsourcelines: it looks the file up through the class's module, and `__main__` is the harness.
    """
    codes = methods(cls, filename)
    source = linecache.getlines(filename)
    if not codes or not source:
        return [], 0
    first = min(c.co_firstlineno for c in codes)
    last = max(max((n for _, _, n in c.co_lines() if n), default=c.co_firstlineno) for c in codes)
    header = re.compile(rf"\s*class\s+{re.escape(cls.__name__)}\b")
    start = next((n for n in range(first, 0, -1) if header.match(source[n - 1])), first)
    return source[start - 1:last], start


def assignment_line(cls, attr, filename):
    """The line in the class that assigns `self.<attr>` (or the class attribute), else the class's first line."""
    lines, start = class_source(cls, filename)
    pattern = re.compile(rf"^\s*(?:self\.)?{re.escape(attr)}\s*(?::[^=]*)?=(?!=)")
    for i, text in enumerate(lines):
        if pattern.search(text):
            return start + i
    return start or None


def kept_attributes(module):
    """(name, value) of the module's own attributes that hold tensors outside its parameters and buffers."""
    return [(k, v) for k, v in list(vars(module).items()) if k not in MODULE_INTERNALS and tensors_of(v)]


def tensors_of(value):
    """The tensors a value holds: itself, or the tensors directly in a list, tuple or dict."""
    if isinstance(value, torch.Tensor):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return [v for v in items if isinstance(v, torch.Tensor)]


def describe_model(module, api):
    """Buffers, plain tensor attributes (instance or class) and frozen parameters of one learner module."""
    cls = type(module)
    plain = []
    kept = [(name, value, "instance") for name, value in kept_attributes(module)]
    kept += [(name, value, "class") for name, value in vars(cls).items() if tensors_of(value)]
    for name, value, owner in kept:
        found = tensors_of(value)
        plain.append({"attr": name, "device": api.device_of(found[0]), "dim": found[0].dim(), "owner": owner,
                      "container": not isinstance(value, torch.Tensor),
                      "line": assignment_line(cls, name, api.filename)})
    frozen = [{"attr": name, "line": assignment_line(cls, name, api.filename)}
              for name, p in module._parameters.items() if p is not None and not p.requires_grad]
    return {"class": cls.__name__, "buffers": [n for n, b in module._buffers.items() if b is not None],
            "plain": plain, "frozen_parameters": frozen}


def source_lines(classes, filename):
    """{line: text} of the learner's classes, for messages that quote what a line does."""
    out = {}
    for cls in classes:
        lines, start = class_source(cls, filename)
        for i, text in enumerate(lines[:max(0, MAX_LINES - len(out))]):
            out[start + i] = text.rstrip()
    return out


# ------------------------------------------------------------------ where forward makes tensors
class Watch(TorchFunctionMode):
    """Runs every call untraced and notes the tensors the learner's own lines make or copy off the meta device."""

    def __init__(self, filename):
        super().__init__()
        self.filename, self.made, self.copied = filename, [], []

    def learner_line(self):
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name == self.filename:
                return frame.f_lineno
            if not name.endswith(PLUMBING):
                return None  # torch's own code made the call, not the learner's line
            frame = frame.f_back
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        line = self.learner_line() if name not in ("__get__", "__set__") else None
        inputs = [t for t in flatten((args, kwargs)) if isinstance(t, torch.Tensor)]
        try:
            with torch._C.DisableTorchFunction():
                out = func(*args, **kwargs)
        except Exception:
            if line and not inputs and kwargs.get("device") is not None:
                self.note_made(line, name, str(kwargs["device"]), 1)
            raise
        if line:
            self.observe(line, name, inputs, out)
        return out

    def observe(self, line, name, inputs, out):
        outs = [t for t in flatten(out) if isinstance(t, torch.Tensor)]
        if not outs or outs[0].device.type == "meta":
            if name in MOVES and inputs and inputs[0].device.type != "meta" and outs:
                self.copied.append({"line": line, "op": name, "src": str(inputs[0].device)})
            return
        if not inputs:  # a factory: torch.arange, torch.zeros, torch.tensor ...
            self.note_made(line, name, str(outs[0].device), outs[0].dim())

    def note_made(self, line, op, device, dim):
        if dim > 0 and not any(m["line"] == line and m["op"] == op for m in self.made):
            self.made.append({"line": line, "op": op, "device": device})


def flatten(obj):
    """Everything inside nested lists, tuples and dicts, in order."""
    if isinstance(obj, (list, tuple)):
        return [y for x in obj for y in flatten(x)]
    if isinstance(obj, dict):
        return [y for x in obj.values() for y in flatten(x)]
    return [obj]


def feature_size(module):
    """The width of the input the model expects: its first Linear's in_features or Embedding's embedding_dim."""
    for sub in module.modules():
        for attr in ("in_features", "embedding_dim"):
            if isinstance(getattr(sub, attr, None), int):
                return getattr(sub, attr)
    return DEFAULT_FEATURES


def input_name(module):
    """The name of forward's first parameter, for messages (`x` in `def forward(self, x)`)."""
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return "x"
    return params[0] if params else "x"


def to_meta(value):
    """The same value with every tensor in it replaced by an empty one of its shape on meta."""
    if isinstance(value, torch.Tensor):
        return torch.empty_like(value, device="meta")
    if isinstance(value, dict):
        return {k: to_meta(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_meta(v) for v in value)
    return value


@contextlib.contextmanager
def on_meta(module):
    """Put every tensor the model holds (parameters, buffers, plain and class attributes) on meta; restore after."""
    saved = []
    with torch._C.DisableTorchFunction():
        for sub in module.modules():
            for store in (sub._parameters, sub._buffers):
                for key, value in store.items():
                    if value is not None:
                        saved.append((store, key, value))
                        store[key] = to_meta(value)
            for key, value in kept_attributes(sub):
                saved.append((vars(sub), key, value))
                vars(sub)[key] = to_meta(value)
        classes = {type(sub) for sub in module.modules()}
        swapped = [(cls, key, value) for cls in classes for key, value in list(vars(cls).items()) if tensors_of(value)]
        for cls, key, value in swapped:  # a tensor kept on the class itself
            setattr(cls, key, to_meta(value))
    try:
        yield
    finally:
        for store, key, value in reversed(saved):
            store[key] = value
        for cls, key, value in swapped:
            setattr(cls, key, value)


@contextlib.contextmanager
def module_hooks_set_aside():
    """The tracer watches forward calls through global module hooks; the trial is not the learner's run."""
    from torch.nn.modules import module as nn_module

    stores = [getattr(nn_module, n) for n in ("_global_forward_pre_hooks", "_global_forward_hooks")
              if isinstance(getattr(nn_module, n, None), dict)]
    saved = [dict(s) for s in stores]
    for s in stores:
        s.clear()
    try:
        yield
    finally:
        for s, items in zip(stores, saved):
            s.clear()
            s.update(items)


def trial(module, filename):
    """Call forward once with everything on meta; report the tensors made or copied off meta, and any error."""
    shape = [TRIAL_BATCH, TRIAL_LENGTH, feature_size(module)]
    watch = Watch(filename)
    error = None
    with torch._C.DisableTorchFunction():
        x = torch.zeros(shape, device="meta")
    try:
        with module_hooks_set_aside(), on_meta(module), torch.no_grad(), \
                contextlib.redirect_stdout(io.StringIO()), watch:
            module(x)
    except BaseException as exc:  # the learner's forward failed (or exited) on meta: a fact, with its line
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
        error = {"type": type(exc).__name__, "message": str(exc).splitlines()[0][:200] if str(exc) else "",
                 "line": lines[-1] if lines else None}
    return {"class": type(module).__name__, "input": input_name(module), "shape": shape,
            "made": watch.made, "copied": watch.copied, "error": error}
