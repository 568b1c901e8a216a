"""Logical device labels: an accelerator on a host that has none (the "lighter idea" of research section 2).

A tensor created with `device="cuda"`, moved with `.to(device)`/`.cuda()`, or computed from such tensors carries
the label `cuda:0` (the attribute `_pt_dev`) while its data stays in host memory. Its `device`, `is_cuda` and repr
answer from the label, `.numpy()` refuses like CUDA does, and an op that meets a labelled tensor and an unlabelled
non-scalar tensor raises the RuntimeError a GPU would, in torch's words (wording.py). The Tracer (placement.py)
mixes this class in and uses it only when the host has no CUDA.
"""

from __future__ import annotations

import re

import torch

from app.sandbox.harness import wording

_ORIG_TENSOR_TO = torch._C.TensorBase.to
_ORIG_PARAMETER_NEW = torch.nn.Parameter.__new__
# calls that may take host and accelerator tensors together (copies, indexing with host indices, printing)
MIXING_ALLOWED = {"__setitem__", "copy_", "__deepcopy__", "__reduce_ex__", "__repr__", "__format__",
                  "__setstate__", "__get__", "__set__", "is_pinned", "pin_memory"}
_REPR_SUFFIX = re.compile(r"(, (?:size|dtype|layout|grad_fn|requires_grad|names)=.*)?\)\Z", re.S)


def normalise(device) -> torch.device:
    """Return a torch.device with an explicit index for accelerators ("cuda" -> cuda:0, 1 -> cuda:1)."""
    if isinstance(device, int):
        return torch.device("cuda", device)
    d = torch.device(device)
    return torch.device(d.type, d.index or 0) if d.type != "cpu" else d


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


class Simulation:
    """The label-keeping half of the Tracer: moves, factories, NumPy, mixing checks, reprs."""

    def _patch_parameter(self) -> None:
        def parameter_new(cls, data=None, requires_grad=True):
            param = _ORIG_PARAMETER_NEW(cls, data, requires_grad)
            if isinstance(data, torch.Tensor) and data.__dict__.get("_pt_dev"):
                param._pt_dev = data._pt_dev  # nn.Linear(..., device="cuda") builds its weight this way
            return param
        torch.nn.Parameter.__new__ = staticmethod(parameter_new)

    @staticmethod
    def _label(t: torch.Tensor, label: str | None) -> None:
        if label:
            t._pt_dev = label
        else:
            t.__dict__.pop("_pt_dev", None)

    def _refuse_numpy(self, name, t, kwargs) -> None:
        if self.on_accelerator(t) and not kwargs.get("force", False):
            frame = self.learner_frame()
            self.record("numpy_on_accelerator", line=frame.f_lineno if frame else None, op=name,
                        names=self.names_in(frame, t), device=self.device_of(t))
            raise TypeError(f"can't convert {self.device_of(t)} device type tensor to numpy. "
                            "Use Tensor.cpu() to copy the tensor to host memory first.")

    def _check_mixing(self, func, name, args, kwargs) -> None:
        if name in MIXING_ALLOWED:
            return
        tensors = tensors_in((args, kwargs))
        on_accel = [t for t in tensors if self.on_accelerator(t)]
        if not on_accel or not any(not self.on_accelerator(t) and t.dim() > 0 for t in tensors):
            return
        message = wording.mismatch_message(func, args, kwargs, self.on_accelerator, self.device_of(on_accel[0]))
        if message:
            self._record_mismatch(name, args, kwargs, message)
            raise RuntimeError(message)

    def _record_mismatch(self, name, args, kwargs, message) -> None:
        frame = self.learner_frame()
        self.record("mismatch", line=frame.f_lineno if frame else None, op=name, message=message,
                    tensors=[self.describe(t, frame) for t in tensors_in((args, kwargs))][:6])

    def _factory(self, func, name, args, kwargs, target: torch.device):
        if target.type == "cpu":
            return self._finish(func, name, args, kwargs, func(*args, **kwargs))
        out = func(*args, **{**kwargs, "device": "cpu"})
        for t in tensors_in(out):
            t._pt_dev = str(target)
        return self._finish(func, name, args, kwargs, out, propagate=False)

    def _finish(self, func, name, args, kwargs, out, propagate=True):
        if propagate:
            self._propagate(name, args, kwargs, out)
        self._observe(name, args, kwargs, out)
        return out

    def _move(self, func, name, args, kwargs):
        src = args[0]
        dtype, non_blocking, copy = None, kwargs.get("non_blocking", False), kwargs.get("copy", False)
        memory_format = kwargs.get("memory_format") or torch.preserve_format
        if name in ("to", "type_as"):
            other = args[1] if len(args) > 1 else kwargs.get("other")
            if isinstance(other, torch.Tensor):
                target, dtype = torch.device(self.device_of(other)), other.dtype
            else:
                parse = {k: v for k, v in kwargs.items() if k != "copy"}  # _parse_to knows every argument but copy
                device, dtype, non_blocking, parsed_format = torch._C._nn._parse_to(*args[1:], **parse)
                memory_format = parsed_format or memory_format
                target = normalise(device) if device is not None else torch.device(self.device_of(src))
        elif name == "cuda":
            index = args[1] if len(args) > 1 else kwargs.get("device")
            target = normalise(index if isinstance(index, int) else (index or "cuda"))
        else:
            target = torch.device("cpu")
        current = self.device_of(src)
        moving = str(target) != current
        out = _ORIG_TENSOR_TO(src, "cpu", dtype=dtype or src.dtype, non_blocking=non_blocking,
                              copy=bool(copy or moving), memory_format=memory_format)
        if out is not src:
            self._label(out, str(target) if target.type != "cpu" else None)
            for key in ("_pt_batch", "_pt_loss"):
                if key in src.__dict__:
                    out.__dict__[key] = src.__dict__[key]
            if "_pt_batch" in src.__dict__:
                out._pt_moved = target.type != "cpu" or bool(src.__dict__.get("_pt_moved"))
        self._observe(name, args, kwargs, out, move=(current, str(target)))
        return out

    def repr_with_device(self, t: torch.Tensor, text: str) -> str:
        """Add the device suffix torch prints for an accelerator tensor to a host tensor's repr."""
        label = t.__dict__.get("_pt_dev") if self.simulated else None
        if not label or "device=" in text:
            return text
        match = _REPR_SUFFIX.search(text)
        if match is None:
            return text
        return text[:match.start()] + f", device='{label}'" + text[match.start():]
