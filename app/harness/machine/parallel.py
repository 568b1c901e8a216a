"""nn.DataParallel on simulated GPUs: its scatter/gather/broadcast primitives, and its replicas run in turn.

DataParallel is Python over a few C++ copies (`torch._C._scatter`, `_gather`, `_broadcast_coalesced`) that
this host lacks; here they are the same copies done with `.to(device)` through the tracer, so every chunk and
replica carries its GPU's label. A real GPU runs the replicas in threads; the tracer follows one thread (a
TorchFunctionMode is per thread), so the replicas run one after the other, with the same results.
"""

from __future__ import annotations

import sys
import threading
import types

import torch
import torch.nn.parallel.comm
import torch.nn.parallel.parallel_apply

# the module, not the function of the same name that torch.nn.parallel exports over it
parallel_apply_module = sys.modules["torch.nn.parallel.parallel_apply"]
comm_module = sys.modules["torch.nn.parallel.comm"]


def _device(index) -> str:
    return "cpu" if index is None or index == -1 else f"cuda:{index}"


def scatter(tensor, devices, chunk_sizes=None, dim=0, streams=None):
    """torch._C._scatter: split along dim (torch.chunk's sizes unless given) and copy chunk i to devices[i]."""
    if chunk_sizes is None:
        chunks = tensor.chunk(len(devices), dim)
    else:
        chunks = tensor.split(list(chunk_sizes), dim)
    return [chunk.to(_device(index)) for chunk, index in zip(chunks, devices)]


def gather(tensors, dim=0, destination=None):
    """torch._C._gather: copy every piece to the destination and concatenate them there."""
    target = _device(destination)
    return torch.cat([t.to(target) for t in tensors], dim)


def broadcast_coalesced(tensors, devices, buffer_size=None):
    """torch._C._broadcast_coalesced: a copy of every tensor on every device.

    (CUDA hands back the tensors themselves for the first device; autograd then wraps them in new views that
    this tracer never sees being made, so here that device gets copies too.)
    """
    return [[t.to(_device(index), copy=True) for t in tensors] for index in devices]


def broadcast(tensor, devices):
    """torch._C._broadcast: one copy per device (the tensor itself on its own device)."""
    return [tensor if str(tensor.device) == _device(index) else tensor.to(_device(index)) for index in devices]


def _label(grads, devices):
    """Gradients the autograd engine made in C++ (unlabelled) sit where their forward outputs sat."""
    for grad, index in zip(grads, devices):
        if isinstance(grad, torch.Tensor) and "_pt_dev" not in grad.__dict__ and _device(index) != "cpu":
            grad._pt_dev = _device(index)
    return grads


def _with_labelled_grads(patches) -> None:
    """Wrap DataParallel's autograd functions so their Python backward sees labelled gradients."""
    fns = torch.nn.parallel._functions
    gather_bw, scatter_fw, scatter_bw = fns.Gather.backward, fns.Scatter.forward, fns.Scatter.backward
    broadcast_bw = fns.Broadcast.backward

    def gather_backward(ctx, grad_output):
        _label([grad_output], [ctx.target_device])
        return gather_bw(ctx, grad_output)

    def scatter_forward(ctx, target_gpus, chunk_sizes, dim, input):
        ctx.sim_targets = [torch.cuda._utils._get_device_index(x, True) for x in target_gpus]
        return scatter_fw(ctx, target_gpus, chunk_sizes, dim, input)

    def scatter_backward(ctx, *grad_output):
        return scatter_bw(ctx, *_label(grad_output, ctx.sim_targets))

    def broadcast_backward(ctx, *grad_outputs):
        per = max(1, getattr(ctx, "num_inputs", 1))
        return broadcast_bw(ctx, *_label(grad_outputs, [ctx.target_gpus[i // per] for i in range(len(grad_outputs))]))

    for cls, name, fn in ((fns.Gather, "backward", gather_backward), (fns.Scatter, "forward", scatter_forward),
                          (fns.Scatter, "backward", scatter_backward),
                          (fns.Broadcast, "backward", broadcast_backward)):
        patches.set(cls, name, staticmethod(fn))


class _InlineThread:
    """A Thread that runs its target when started, in the caller's thread (where the tracer is)."""

    def __init__(self, target=None, args=(), kwargs=None, **_ignored):
        self._run = lambda: target(*args, **(kwargs or {}))

    def start(self) -> None:
        self._run()

    def join(self, timeout=None) -> None:
        return None


def install(patches) -> None:
    """Give DataParallel its primitives on the simulated GPUs."""
    for name, fn in (("_scatter", scatter), ("_gather", gather), ("_broadcast_coalesced", broadcast_coalesced),
                     ("_broadcast", broadcast)):
        patches.set(torch._C, name, fn)
    patches.set(parallel_apply_module, "threading", types.SimpleNamespace(Thread=_InlineThread,
                                                                          Lock=threading.Lock))
    # reduce_add's copy-and-add path: torch.cuda.nccl.reduce is not simulated. Only comm.py's view of NCCL says
    # so; the learner's torch.cuda.nccl.is_available() answers as a CUDA build's (cuda_runtime.py)
    patches.set(comm_module, "nccl", types.SimpleNamespace(is_available=lambda tensors: False))
    _with_labelled_grads(patches)
