"""Simulated GPU tensors without values: shapes at a real card's scale in a job of 1 GiB.

A tensor on a simulated GPU too large for the job's host memory (Host.dataless_tensor_bytes, or once the tensors
with values hold Host.device_data_bytes) is made a meta tensor wearing the GPU's label and marked `_pt_nodata`:
its shape, dtype, strides, device and memory (memory.py) are simulated, its values are not. An op that meets such
a tensor runs on meta tensors (torch's meta kernels: shapes, dtypes and errors as on the card, no arithmetic): the
real tensors among its inputs are handed to it as meta twins, its outputs are data-less too, and a tensor an
in-place op wrote into keeps its storage but loses its values (marked). Autograd flows through the twins: a real
tensor that needs a gradient gets one, marked as data-less, so nothing downstream pretends to know its values.

Reading the values of a data-less tensor (printing it, `.item()`, `.tolist()`, `.numpy()`, `.cpu()`, `if t:`)
raises messages.ValuesNotSimulatedError: one line with its shape and size, never invented numbers. Small tensors
keep real values: every exercise and the fidelity corpus run as before.
"""

from __future__ import annotations

import torch

from app.harness.wording import messages

# calls that hand a tensor's values to the host (or to Python)
READS = {"item", "tolist", "numpy", "__array__", "__repr__", "__format__", "__bool__", "__float__", "__int__",
         "__index__", "__complex__", "__str__", "__dlpack__"}
# calls that make no new memory (views, metadata): past the budget of tensors with values they still run for real
NO_NEW_MEMORY = READS | {"view", "view_as", "reshape", "reshape_as", "expand", "expand_as", "t", "transpose",
                         "permute", "squeeze", "unsqueeze", "flatten", "unflatten", "narrow", "select", "__getitem__",
                         "split", "chunk", "unbind", "detach", "detach_", "as_strided", "untyped_storage", "storage",
                         "data_ptr", "size", "stride", "dim", "numel", "element_size", "is_contiguous", "__len__",
                         "__iter__", "requires_grad_", "retain_grad", "register_hook", "__hash__", "__eq__",
                         # a tensor like a real one stays real (an optimizer's state must sit where its parameter does)
                         "zeros_like", "ones_like", "empty_like", "full_like", "clone"}
# in-place operators Python spells with dunders
_INPLACE_DUNDERS = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
                    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "__setitem__"}


def is_dataless(t: torch.Tensor) -> bool:
    """True when t's values are not simulated."""
    return "_pt_nodata" in t.__dict__


def mark(t: torch.Tensor, why: str = "derived") -> None:
    """Say t's values are not simulated, and why (a key of messages.NO_VALUES_BECAUSE): it is too large ("large"),
    it came once the GPU's tensors with values filled the job's budget ("budget"), or an op computed or wrote it
    from tensors without values ("derived")."""
    t.__dict__["_pt_nodata"] = why


def any_dataless(tensors) -> bool:
    """True when a tensor among `tensors` has no values."""
    for t in tensors:
        if "_pt_nodata" in t.__dict__:
            return True
    return False


def refuse(t: torch.Tensor, device: str, what: str = "cannot read its values") -> messages.ValuesNotSimulatedError:
    """The error for reading a data-less tensor's values."""
    with torch._C.DisableTorchFunction():
        shape, dtype, nbytes = tuple(t.shape), t.dtype, t.numel() * t.element_size()
    why = t.__dict__.get("_pt_nodata")
    return messages.ValuesNotSimulatedError(shape, dtype, nbytes, device, what,
                                            why if why in messages.NO_VALUES_BECAUSE else "derived")


def adopt(t: torch.Tensor, new: torch.Tensor) -> bool:
    """`t.data = new` where new has no values and t does: give t new's tensor in place, as set_data does on a real
    card (Module.to() keeps each Parameter object and sets its .data). torch's own set_data refuses a meta tensor
    for a CPU one ("incompatible tensor type"), so swap the two tensors' insides and keep t's requires_grad.
    False (nothing done) when set_data can do it itself."""
    if "_pt_nodata" not in new.__dict__:
        return False
    with torch._C.DisableTorchFunction():
        if torch._has_compatible_shallow_copy_type(t, new):
            return False
        requires_grad = t.requires_grad
        torch._C._swap_tensor_impl(t, new)
        t.requires_grad_(requires_grad)
    mark(t)
    return True


def meta_like(t: torch.Tensor) -> torch.Tensor:
    """A meta tensor of t's shape, strides and dtype (no values, no memory)."""
    with torch._C.DisableTorchFunction():
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


class _Lift(torch.autograd.Function):
    """A real tensor entering a data-less op: forward hands the op a meta twin; backward gives the real tensor a
    gradient of its own shape, whose values are unknown (zeros in host memory, marked data-less)."""

    @staticmethod
    def forward(ctx, t):
        ctx.shape, ctx.dtype = t.shape, t.dtype
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")

    @staticmethod
    def backward(ctx, grad):
        with torch._C.DisableTorchFunction():
            out = torch.zeros(ctx.shape, dtype=ctx.dtype)
        mark(out)
        return out


def _twin(t: torch.Tensor, twins: dict) -> torch.Tensor:
    with torch._C.DisableTorchFunction():
        if t.is_meta:
            return t
        if t.requires_grad and torch.is_grad_enabled():
            out = _Lift.apply(t)
        else:
            out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    twins[id(out)] = t
    return out


def lift(t: torch.Tensor) -> torch.Tensor:
    """A meta twin of a real tensor (autograd flows back to it), or the tensor itself when it is meta."""
    return _twin(t, {})


def _lift(obj, twins: dict):
    if isinstance(obj, torch.Tensor):
        return _twin(obj, twins)
    if isinstance(obj, (list, tuple)):
        items = [_lift(item, twins) for item in obj]
        return type(obj)(items) if isinstance(obj, list) or type(obj) is tuple else type(obj)(*items)
    if isinstance(obj, dict):
        return {k: _lift(v, twins) for k, v in obj.items()}
    return obj


def _targets(name: str, args, kwargs) -> list[torch.Tensor]:
    """The tensors an in-place call writes into."""
    out = []
    inplace = name in _INPLACE_DUNDERS or (name.endswith("_") and not name.startswith("__"))
    if inplace and args:
        first = args[0]
        out += [first] if isinstance(first, torch.Tensor) else [t for t in first if isinstance(t, torch.Tensor)] \
            if isinstance(first, (list, tuple)) else []
    dest = kwargs.get("out")
    if isinstance(dest, torch.Tensor):
        out.append(dest)
    elif isinstance(dest, (list, tuple)):
        out += [t for t in dest if isinstance(t, torch.Tensor)]
    return out


def _restore(out, twins: dict):
    """Hand back the learner's own tensors where the op returned the twin it wrote into."""
    if isinstance(out, torch.Tensor):
        original = twins.get(id(out))
        return original if original is not None else out
    if isinstance(out, (list, tuple)) and any(isinstance(t, torch.Tensor) and id(t) in twins for t in out):
        items = [_restore(t, twins) for t in out]
        return type(out)(items) if isinstance(out, list) or type(out) is tuple else type(out)(*items)
    return out


def run(func, name: str, args, kwargs, device_of, why: str = "derived"):
    """Run a call that meets a data-less tensor (or comes past the job's budget: why="budget") on meta twins; its
    outputs (and what it wrote into) are data-less."""
    twins: dict = {}
    targets = _targets(name, args, kwargs)
    try:
        out = func(*_lift(args, twins), **_lift(kwargs, twins))
    except (NotImplementedError, RuntimeError) as exc:
        if isinstance(exc, NotImplementedError) or "meta" in str(exc).lower():
            first = next(t for t in _tensors((args, kwargs)) if is_dataless(t))
            raise refuse(first, device_of(first), f"{name}() needs its values") from None
        raise
    for t in targets:
        mark(t, why)
    out = _restore(out, twins)
    for t in _tensors(out):
        with torch._C.DisableTorchFunction():
            meta = t.is_meta
        if meta:
            mark(t, why)
    return out


def _tensors(obj, found: list | None = None) -> list[torch.Tensor]:
    found = [] if found is None else found
    if isinstance(obj, torch.Tensor):
        found.append(obj)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _tensors(item, found)
    elif isinstance(obj, dict):
        for item in obj.values():
            _tensors(item, found)
    return found
