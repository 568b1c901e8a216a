"""torch.distributed in a job: the facts a grader reads per rank, and NCCL on simulated GPUs.

Facts, through the tracer's record() (each with the learner's line):

    pg_init        init_process_group: the backend the learner asked for, init_method, device_id, whether it worked
    pg_destroy     destroy_process_group
    collective     a torch.distributed call the learner made: all_reduce, broadcast, barrier, ...
    ddp_wrap       a DistributedDataParallel built: the devices of the module's parameters when it was wrapped,
                   device_ids, and a digest of the parameters right after (rank 0's broadcast)
    loader         a DataLoader built: its sampler, whether it also shuffles
    sampler        a DistributedSampler built: its rank and replicas
    sampler_epoch  one pass over a DistributedSampler: its epoch and the order of the indices it gave
    set_epoch      sampler.set_epoch(n)
    save           torch.save: what was saved and whether its keys carry DDP's `module.` prefix

`final()` adds, after the learner's code, a digest of the parameters every optimizer trained: ranks that
trained in step end with the same digest.

On simulated GPUs (a CPU-only torch), NCCL does not exist. A process group asked for with nccl (or with no
backend: nccl for CUDA tensors on a CUDA build) runs over gloo underneath, which moves the simulated GPU tensors'
host data; `get_backend()` and `is_nccl_available()` answer as on the CUDA build, and `device_id`/`device_ids`,
which would make gloo allocate on a real GPU, are recorded and left out of the call. Where the job has real CUDA
nothing is swapped: nccl runs on the GPUs.

With the simulated GPUs' clock (clock.py), collectives cost modeled time: each collective on GPU tensors runs on
NCCL's stream for a ring's time, starting once every rank of its group has reached it, and a
DistributedDataParallel model's gradients are all-reduced bucket by bucket as its backward pass makes them
ready. The ranks tell each other their times with one small MAX all-reduce over gloo of their own (`agreement`),
outside the learner's view; host-side meeting points (init_process_group, a barrier on the CPU) move every
rank's host clock to the latest.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import sys
from collections.abc import Mapping

import torch
import torch.distributed as dist
import torch.nn.parallel
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils.data import DataLoader, DistributedSampler

from app.harness.machine.clock import CLOCK, RING_OF
from app.harness.machine.simulation import tensors_in
from app.harness.wording import messages

# the learner's torch.distributed calls recorded as `collective` facts
COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "all_gather_single", "reduce",
               "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter",
               "barrier", "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list")
# all-gathers into one tensor, which NCCL has and gloo (underneath simulated NCCL) has not; all_gather_single is
# torch 2.13's new name, and accelerate's `gather` calls it when it exists (accelerate/utils/operations.py)
ONE_TENSOR_GATHERS = ("all_gather_into_tensor", "all_gather_single")
# libraries whose collectives, made on the learner's behalf, are recorded with the function the learner called
LIBRARIES = ("accelerate",)
# indices of a sampler pass kept in full (the first passes: enough to see the shards); later passes keep a digest
INDICES_KEPT, PASSES_WITH_INDICES = 4096, 2
# optimizers whose parameters are digested at the end (a script trains one model; a few is plenty)
OPTIMIZERS_KEPT = 4
# the store keys under which simulated NCCL ranks tell each other their GPU (as NCCL's bootstrap does)
NCCL_DEVICE_KEY = "course/simulated-nccl/device/{rank}"
# the PCI bus of simulated GPU i (cuda_runtime.CudaDeviceProperties): what NCCL names a GPU by
BUS_FIRST, BUS_STEP = 0x18, 0x10
_DDP = torch.nn.parallel.DistributedDataParallel
_ORIGINALS = {"init_process_group": dist.init_process_group, "destroy_process_group": dist.destroy_process_group,
              "get_backend": dist.get_backend, "is_nccl_available": dist.is_nccl_available,
              **{name: getattr(dist, name) for name in COLLECTIVES if hasattr(dist, name)}}
_DDP_INIT, _DDP_FORWARD, _SAVE = _DDP.__init__, _DDP.forward, torch.save
_LOADER_INIT, _SAMPLER_INIT = DataLoader.__init__, DistributedSampler.__init__
_SAMPLER_ITER, _SET_EPOCH = DistributedSampler.__iter__, DistributedSampler.set_epoch
_LOADER_SIGNATURE = inspect.signature(DataLoader.__init__)


def underlying_backend(backend) -> str:
    """The backend that runs on simulated GPUs: gloo, for every part a real host would give to NCCL."""
    text = str(backend).lower() if backend is not None else "cpu:gloo,cuda:nccl"
    return "gloo" if "nccl" in text or text in ("undefined", "gloo") else str(backend)


def bucket_sizes(sizes: list[int], limits: list[int]) -> list[int]:
    """The bytes of DDP's gradient buckets: tensors, in the order given, fill the current bucket until it holds at
    least its limit; the next bucket has the next limit, the last limit repeats (torch's
    `_compute_bucket_assignment_by_size`, torch/csrc/distributed/c10d/reducer.cpp)."""
    buckets, current = [], 0
    for n in sizes:
        current += n
        if current >= limits[min(len(buckets), len(limits) - 1)]:
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    return buckets


def params_digest(params) -> str:
    """A digest of parameter values: equal on two ranks exactly when their parameters are bit-for-bit equal."""
    digest = hashlib.sha256()
    with torch._C.DisableTorchFunction(), torch.no_grad():
        for p in params:
            if p.is_meta or "_pt_nodata" in p.__dict__:  # no values (dataless.py): its shape is all there is
                digest.update(f"dataless {tuple(p.shape)} {p.dtype}".encode())
                continue
            digest.update(p.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def _saved(obj) -> dict:
    """What torch.save was given: a whole module, or a (checkpoint) dict whose state-dict keys may carry the
    `module.` prefix of a DistributedDataParallel wrapper."""
    if isinstance(obj, torch.nn.Module):
        return {"what": "module", "type": type(obj).__name__, "ddp": isinstance(obj, _DDP), "prefixed": False}
    if isinstance(obj, Mapping):
        keys = [k for k in obj if isinstance(k, str)]
        for value in obj.values():  # {"model": model.state_dict(), "epoch": 3}
            if isinstance(value, Mapping):
                keys += [k for k in value if isinstance(k, str)]
            elif isinstance(value, torch.nn.Module):
                return {"what": "module", "type": type(value).__name__, "ddp": isinstance(value, _DDP),
                        "prefixed": False}
        return {"what": "dict", "prefixed": any(k.startswith("module.") for k in keys), "keys": keys[:6]}
    return {"what": type(obj).__name__, "prefixed": False}


def _counted(indices: list, fact: dict):
    """Yield the indices, counting in fact["used"] how many were taken."""
    for index in indices:
        fact["used"] = fact.get("used", 0) + 1
        yield index


def _device_name(device) -> str:
    if isinstance(device, int) and not isinstance(device, bool):
        return f"cuda:{device}"
    return str(device)


class Distributed:
    """The patches of one job (installed once, before the learner's code) and the facts they record."""

    def __init__(self, tracer, *, simulated: bool):
        self.tracer, self.simulated = tracer, simulated
        self.requested: dict[object, object] = {}  # process group -> the backend the learner asked for
        self.optimizers: list = []
        self.communicator: str | None = None  # the GPU this rank's (simulated) NCCL communicator was made on
        self.bound_device: str | None = None  # init_process_group(device_id=...)
        # Every DistributedDataParallel made, kept until the process ends (os._exit: no finalisers). Freed while
        # the program runs (a model local to main()), a DDP's reducer can be the last holder of a gloo process
        # group, and it is destroyed holding the GIL while a gloo worker thread needs the GIL to drop its last
        # work item: a deadlock (pytorch/pytorch#56297). Real NCCL jobs do not meet it; gloo underneath must not.
        self.wrapped: list = []
        self.ddp_syncs: dict[int, int] = {}  # id of a DDP -> its forward passes that will all-reduce gradients

    # ---------------------------------------------------------------- facts
    def _record(self, kind: str, **fact) -> dict:
        """Record a fact; return the kept dict, which the caller completes once the call it describes returned."""
        before = len(self.tracer.events.get(kind, ()))
        self.tracer.record(kind, **fact)
        kept = self.tracer.events.get(kind, [])
        return kept[-1] if len(kept) > before else {}  # past the events kept per kind, only counted

    def _line(self, direct: bool = False) -> int | None:
        frame = self.tracer.learner_frame(direct=direct)
        return frame.f_lineno if frame is not None else None

    def final(self, digest: bool = True) -> dict:
        """The facts known only at the end: a digest of every trained parameter, per optimizer (digest=False: no
        digest, which only ranks compare)."""
        params = [p for opt in self.optimizers for g in opt.param_groups for p in g["params"]]
        return {"params_digest": params_digest(params) if params and digest else None, "params": len(params),
                "optimizers": len(self.optimizers)}

    # ---------------------------------------------------------------- install
    def install(self) -> None:
        """Wrap torch.distributed's entry points, DDP, DataLoader, DistributedSampler and torch.save."""
        for name, method in (("init_process_group", self.init_process_group),
                             ("destroy_process_group", self.destroy_process_group),
                             ("get_backend", self.get_backend), ("is_nccl_available", self.is_nccl_available)):
            setattr(dist, name, functools.wraps(_ORIGINALS[name])(lambda *a, _m=method, **k: _m(*a, **k)))
        for name in COLLECTIVES:
            if name in _ORIGINALS:
                setattr(dist, name, self._collective(name, _ORIGINALS[name]))
        me = self
        _DDP.__init__ = functools.wraps(_DDP_INIT)(lambda ddp, module, *a, **k: me.wrap_ddp(ddp, module, a, k))
        _DDP.forward = functools.wraps(_DDP_FORWARD)(lambda ddp, *a, **k: me.ddp_forward(ddp, a, k))
        DataLoader.__init__ = functools.wraps(_LOADER_INIT)(lambda loader, *a, **k: me.new_loader(loader, a, k))
        DistributedSampler.__init__ = functools.wraps(_SAMPLER_INIT)(lambda s, *a, **k: me.new_sampler(s, a, k))
        DistributedSampler.__iter__ = lambda sampler: me.sampler_pass(sampler)
        DistributedSampler.set_epoch = functools.wraps(_SET_EPOCH)(lambda s, epoch: me.set_epoch(s, epoch))
        torch.save = functools.wraps(_SAVE)(lambda obj, f, *a, **k: me.save(obj, f, a, k))
        register_optimizer_step_pre_hook(self._remember_optimizer)

    def _remember_optimizer(self, optimizer, args, kwargs) -> None:
        if len(self.optimizers) < OPTIMIZERS_KEPT and not any(o is optimizer for o in self.optimizers):
            self.optimizers.append(optimizer)

    # ---------------------------------------------------------------- process groups
    def init_process_group(self, backend=None, init_method=None, *args, **kwargs):
        """Record the call; on simulated GPUs run the group over gloo (see the module docstring)."""
        device_id = kwargs.get("device_id")
        fact = self._record("pg_init", line=self._line(), backend=None if backend is None else str(backend),
                            init_method=init_method, device_id=None if device_id is None else _device_name(device_id),
                            ok=False, error=None, collectives_before=self.tracer.counts.get("collective", 0))
        real_backend = backend
        if self.simulated:
            real_backend = underlying_backend(backend)
            kwargs.pop("device_id", None)
        try:
            _ORIGINALS["init_process_group"](real_backend, init_method, *args, **kwargs)
        except Exception as exc:
            fact["error"] = f"{type(exc).__name__}: {exc}"[:300]
            raise
        fact["ok"] = True
        self.requested[dist.GroupMember.WORLD] = backend
        self.bound_device = fact.get("device_id")
        if self.simulated and CLOCK.active:  # the store's barrier: every rank's host leaves it together
            CLOCK.host_agree(self.agreement(None))

    def destroy_process_group(self, group=None):
        """Record the call and destroy the group."""
        self.tracer.record("pg_destroy", line=self._line(), initialized=dist.is_initialized())
        if group is None:
            self.requested.clear()
        return _ORIGINALS["destroy_process_group"](group)

    def get_backend(self, group=None):
        """The backend the learner asked for, where the simulation runs another underneath."""
        actual = _ORIGINALS["get_backend"](group)
        asked = self.requested.get(group if group is not None else dist.GroupMember.WORLD)
        if self.simulated and asked is not None and "nccl" in str(asked).lower():
            return dist.Backend("nccl") if str(asked).lower() == "nccl" else actual
        return actual

    def is_nccl_available(self) -> bool:
        """A CUDA build of torch has NCCL; the simulated one does too."""
        if self.simulated and self.tracer.devices.host.cuda:
            return True
        return _ORIGINALS["is_nccl_available"]()

    def _collective(self, name: str, original):
        me = self

        @functools.wraps(original)
        def collective(*args, **kwargs):
            # the wrapper's own work (the learner's line, the NCCL checks, the modeled charge) and the real exchange
            # over gloo are the simulation's time: the clock models NCCL's, and the program's host work up to the
            # call counts on entry. Counted as host time, this work passed the clock's 1 ms floor on one rank of a
            # busy CI machine, and the other rank waited for it
            with CLOCK.emulating():
                return me._run_collective(name, original, args, kwargs)
        return collective

    def _run_collective(self, name: str, original, args, kwargs):
        line = self._line(direct=True)
        if line is not None:
            self.tracer.record("collective", op=name, line=line, initialized=dist.is_initialized())
        else:
            self._through_library(name)
        if not self.simulated:
            return original(*args, **kwargs)
        barrier_device = None
        if name == "barrier":
            ids = kwargs.pop("device_ids", None)  # gloo would allocate its barrier tensor on that (real) GPU
            if self.nccl_only():  # torch's choice: device_ids, else the bound device, else the current one
                barrier_device = (_device_name(ids[0]) if ids else self.bound_device
                                  or f"cuda:{torch.cuda.current_device()}")
                self.as_nccl([barrier_device])
        else:
            self.as_nccl([self.tracer.device_of(t) for t in tensors_in((args, kwargs))][:1])
        if name == "all_reduce" and self.averages(args, kwargs):
            result = self.all_reduce_average(original, args, kwargs)
        elif name in ONE_TENSOR_GATHERS and self.asked_nccl():
            result = self.all_gather_into_tensor(args, kwargs)
        else:
            result = original(*args, **kwargs)
        if CLOCK.active and dist.is_initialized():
            self.charge(name, original, args, kwargs, barrier_device)
        return result

    # ---------------------------------------------------------------- the collectives' modeled time
    def agreement(self, group):
        """A function giving the latest of the group's ranks' values (a float, or a tuple of them, each the
        maximum over the ranks): one small all-reduce over the group's gloo, the simulation's own, not NCCL's."""
        def agree(values):
            single = not isinstance(values, tuple)
            with torch._C.DisableTorchFunction():  # a host tensor of the harness: never traced, never on a GPU
                t = torch.tensor([values] if single else list(values), dtype=torch.float64, device="cpu")
                _ORIGINALS["all_reduce"](t, op=dist.ReduceOp.MAX, group=group)
                out = t.tolist()
            return out[0] if single else tuple(out)
        return agree

    def ring(self, group) -> tuple[int, int]:
        """(ranks, machines) of a group's ring: its size, and how many simulated machines its ranks are on."""
        try:
            ranks = dist.get_process_group_ranks(group if group is not None else dist.GroupMember.WORLD)
        except (RuntimeError, ValueError, AttributeError, TypeError):
            return dist.get_world_size(group), 1
        per = int(os.environ.get("LOCAL_WORLD_SIZE") or 0) or len(ranks)
        machines = len({r // per for r in ranks}) if int(os.environ.get("GROUP_WORLD_SIZE") or 1) > 1 else 1
        return len(ranks), machines

    def charge(self, name: str, original, args, kwargs, barrier_device: str | None) -> None:
        """Queue a collective the learner (or a library for them) made on the simulated GPUs' clock: its ring time
        on NCCL's stream, from when the last rank of its group reached it. A collective on host tensors (the
        learner's gloo) is the host's own time, as before; a barrier over gloo meets on the hosts."""
        if name not in RING_OF:
            return  # the *_object collectives: pickles through the ones above, not modeled apart
        try:
            bound = inspect.signature(original).bind(*args, **kwargs).arguments
        except TypeError:
            return
        group = bound.get("group")
        ranks, machines = self.ring(group)
        agree, line = self.agreement(group), self._line()
        if name == "barrier":
            if barrier_device is not None:  # ProcessGroupNCCL's barrier: a one-element all-reduce the host waits for
                CLOCK.collective("barrier", barrier_device, 4, ranks, machines, agree, blocking=True, line=line)
            else:
                CLOCK.host_agree(agree)
            return
        with torch._C.DisableTorchFunction():
            sides = [tensors_in(v) for v in list(bound.values())[:2]]
            sizes = [sum(t.numel() * t.element_size() for t in side) for side in sides]
        devices = [self.tracer.device_of(t) for side in sides for t in side]
        if not devices or not devices[0].startswith("cuda"):
            return
        # S as nccl-tests counts it: the larger side (an all-gather's output, a reduce-scatter's input)
        nbytes = max(sizes)
        if RING_OF[name] in ("all_gather", "gather") and min(sizes):
            nbytes = max(nbytes, ranks * min(sizes))  # a rank that holds no output list still sends its share
        CLOCK.collective(name, devices[0], nbytes, ranks, machines, agree, line=line)

    def averages(self, args, kwargs) -> bool:
        """`all_reduce(t, op=ReduceOp.AVG)` on a group the learner asked NCCL for (gloo underneath has no AVG)."""
        op = kwargs.get("op", args[1] if len(args) > 1 else None)
        asked = str(self.requested.get(dist.GroupMember.WORLD) or "nccl").lower()
        return op == dist.ReduceOp.AVG and "nccl" in asked

    def _through_library(self, op: str) -> None:
        """A collective a library function made for the learner (accelerate's `gather_for_metrics`, `reduce`,
        ...): record it as a `library_collective` fact naming the function the learner's line called."""
        learner = self.tracer.learner_frame()
        f = sys._getframe(3)  # past _run_collective and the wrapper
        while f is not None and f.f_back is not learner:
            f = f.f_back
        if learner is None or f is None:
            return
        module = str(f.f_globals.get("__name__", ""))
        if module.split(".")[0] in LIBRARIES:
            self.tracer.record("library_collective", op=op, line=learner.f_lineno, module=module,
                               via=f.f_code.co_qualname)

    def asked_nccl(self) -> bool:
        """Whether the learner asked NCCL for the default group (then gloo runs underneath)."""
        return "nccl" in str(self.requested.get(dist.GroupMember.WORLD) or "nccl").lower()

    def all_gather_into_tensor(self, args, kwargs):
        """NCCL's all-gather into one tensor (accelerate's `gather` and `gather_for_metrics` use it whenever the
        backend is not gloo: `all_gather_single`, else `all_gather_into_tensor`), as gloo can do it: gloo has no
        `_allgather_base`, so all_gather into a list, then the pieces copied in rank order into the output, which
        holds them concatenated or stacked (one layout in memory). Synchronous: with async_op=True the work
        returned is already complete."""
        names = ("output_tensor", "input_tensor", "group", "async_op")
        bound = {**dict(zip(names, args)), **kwargs}
        output, tensor, group = bound["output_tensor"], bound["input_tensor"], bound.get("group")
        with CLOCK.inside_nccl():  # NCCL gathers straight into the output: no kernels of these pieces
            parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
            work = _ORIGINALS["all_gather"](parts, tensor, group=group, async_op=bool(bound.get("async_op")))
            if work is not None:
                work.wait()
            with torch.no_grad():
                output.view(-1).copy_(torch.cat([p.reshape(-1) for p in parts]))
        return work

    def all_reduce_average(self, original, args, kwargs):
        """NCCL's average, as gloo can do it: a sum, then a division by the group's size, in place."""
        tensor, group = args[0], kwargs.get("group", args[2] if len(args) > 2 else None)
        rest = {k: v for k, v in kwargs.items() if k not in ("op", "group")}
        work = original(tensor, dist.ReduceOp.SUM, group, *args[3:], **rest)
        if work is not None:  # async_op=True: the division waits for the sum
            work.wait()
        with torch.no_grad(), CLOCK.inside_nccl():  # ncclAvg divides inside NCCL's kernel: no kernel of its own
            tensor.div_(dist.get_world_size(group))
        return work

    # ---------------------------------------------------------------- what NCCL refuses, on simulated GPUs
    def nccl_only(self) -> bool:
        """Whether the default group's backend, as the learner asked for it, is NCCL alone."""
        asked = self.requested.get(dist.GroupMember.WORLD)
        return dist.is_initialized() and asked is not None and str(asked).lower() == "nccl"

    def as_nccl(self, devices: list[str]) -> None:
        """Refuse what a real NCCL group refuses: a host tensor, and two ranks on one GPU (its first collective
        makes the communicator; NCCL's bootstrap compares the ranks' GPUs)."""
        if not self.nccl_only() or not devices:
            return
        device = devices[0]
        if not device.startswith("cuda"):
            raise RuntimeError(messages.NO_BACKEND_FOR_CPU)
        if self.communicator is not None:
            return
        self.communicator = device
        store, rank = dist.distributed_c10d._get_default_store(), dist.get_rank()
        # NCCL tells GPUs apart by host and bus: the same cuda:0 on two machines is two GPUs
        where = f"{os.environ.get('GROUP_RANK', '0')}/{device}"
        store.set(NCCL_DEVICE_KEY.format(rank=rank), where)
        for other in range(dist.get_world_size()):
            if other != rank and store.get(NCCL_DEVICE_KEY.format(rank=other)).decode() == where:
                bus = BUS_FIRST + BUS_STEP * int(device.rsplit(":", 1)[1])
                raise dist.DistBackendError(messages.NCCL_DUPLICATE_GPU.format(rank=rank, other=other, bus=bus))

    # ---------------------------------------------------------------- DistributedDataParallel
    def wrap_ddp(self, ddp, module, args, kwargs):
        """DistributedDataParallel.__init__: record where the module was when it was wrapped, and how."""
        frame = self.tracer.learner_frame()
        device_ids = kwargs.get("device_ids", args[0] if args else None)
        params = list(module.parameters())
        kept = self._record("ddp_wrap", line=frame.f_lineno if frame is not None else None,
                            module=type(module).__name__, names=self.tracer.names_in(frame, module), id=id(ddp),
                            module_id=id(module), param_devices=sorted({self.tracer.device_of(p) for p in params}),
                            device_ids=None if device_ids is None else [_device_name(d) for d in device_ids],
                            ok=False, digest=None)
        if self.simulated and params:
            device = self.tracer.device_of(params[0])
            if device != "cpu":
                self.as_nccl([device])  # DDP's first broadcast makes the communicator
            elif not device_ids and self.nccl_only():  # (with device_ids, torch itself refuses a CPU module first)
                raise RuntimeError(messages.NO_BACKEND_FOR_CPU)
        _DDP_INIT(ddp, module, *args, **kwargs)
        self.wrapped.append(ddp)
        kept.update(ok=True, digest=params_digest(params) if params else None)
        device = self.tracer.device_of(params[0]) if params else "cpu"
        if self.simulated and CLOCK.active and device.startswith("cuda"):
            # DDP's constructor broadcasts rank 0's parameters and buffers to every rank (_sync_module_states)
            with torch._C.DisableTorchFunction():
                nbytes = sum(t.numel() * t.element_size() for t in [*params, *module.buffers()])
            ranks, machines = self.ring(ddp.process_group)
            CLOCK.collective("broadcast", device, nbytes, ranks, machines, self.agreement(ddp.process_group),
                             line=kept.get("line"))

    def ddp_forward(self, ddp, args, kwargs):
        """DistributedDataParallel.forward: with the clock, the backward pass its output leads to all-reduces the
        gradients bucket by bucket (unless under `no_sync()`, as DDP itself decides at forward)."""
        if self.simulated and CLOCK.active and torch.is_grad_enabled() and ddp.require_backward_grad_sync:
            with CLOCK.excluded():  # the simulation's bookkeeping, not the program's host time
                CLOCK.pending_sync = self.gradient_sync(ddp)
        return _DDP_FORWARD(ddp, *args, **kwargs)

    def gradient_sync(self, ddp):
        """What DDP's reducer all-reduces after this forward: one bucket of every gradient on the first iteration
        (torch 2.13 buckets nothing until it has seen the order gradients come in), then buckets rebuilt in that
        order, the first up to 1 MiB and the others up to 25 MiB (`bucket_cap_mb`'s default;
        torch/nn/parallel/distributed.py: _DEFAULT_BUCKET_CAP_MB, dist._DEFAULT_FIRST_BUCKET_BYTES)."""
        with torch._C.DisableTorchFunction():
            sizes = [p.numel() * p.element_size() for p in ddp.module.parameters() if p.requires_grad]
        sizes.reverse()  # the last layer's gradients are ready first
        seen = self.ddp_syncs.get(id(ddp), 0)
        self.ddp_syncs[id(ddp)] = seen + 1
        config = getattr(ddp, "_bucket_config", None)
        cap = getattr(config, "bucket_bytes_cap", None) or getattr(ddp, "bucket_bytes_cap", 25 << 20)
        first = getattr(config, "first_bucket_bytes_cap", None) or dist._DEFAULT_FIRST_BUCKET_BYTES
        buckets = [sum(sizes)] if not seen else bucket_sizes(sizes, [first, cap])
        ranks, machines = self.ring(ddp.process_group)
        agree = self.agreement(ddp.process_group)

        def sync(device: str, start: float, seconds: float) -> None:
            CLOCK.gradient_all_reduce(device, start, seconds, buckets, ranks, machines, agree)
        return sync

    # ---------------------------------------------------------------- data
    def new_loader(self, loader, args, kwargs):
        """DataLoader.__init__: record its sampler and whether it also shuffles (torch refuses both), where someone
        reads the facts (not in a run that is not graded: binding the arguments alone cost ~15 us)."""
        frame = self.tracer.learner_frame() if self.tracer.observing else None
        if frame is None:
            return _LOADER_INIT(loader, *args, **kwargs)
        try:
            bound = _LOADER_SIGNATURE.bind(loader, *args, **kwargs).arguments
        except TypeError:
            bound = {}
        sampler, dataset = bound.get("sampler"), bound.get("dataset")
        try:
            size = len(dataset)
        except TypeError:
            size = None
        # direct: the learner built it; else a library did on the learner's line (accelerate's prepare)
        kept = self._record("loader", line=frame.f_lineno, id=id(loader),
                            direct=self.tracer.learner_frame(direct=True) is not None,
                            sampler=type(sampler).__name__ if sampler is not None else None,
                            shuffle=bool(bound.get("shuffle")), dataset_len=size, error=None)
        try:
            _LOADER_INIT(loader, *args, **kwargs)
        except Exception as exc:
            kept["error"] = f"{type(exc).__name__}: {exc}"[:300]
            raise

    def new_sampler(self, sampler, args, kwargs):
        """DistributedSampler.__init__: record the rank and replicas it shards for."""
        _SAMPLER_INIT(sampler, *args, **kwargs)
        self.tracer.record("sampler", line=self._line(), id=id(sampler), rank=sampler.rank,
                           num_replicas=sampler.num_replicas, shuffle=sampler.shuffle, dataset_len=len(sampler.dataset))

    def sampler_pass(self, sampler):
        """One pass (an epoch) over a DistributedSampler: record the order it gives, and how much of it was used
        (a peek such as `next(iter(loader))` takes one batch; training takes them all)."""
        indices = list(_SAMPLER_ITER(sampler))
        passes = sum(1 for e in self.tracer.events.get("sampler_epoch", ()) if e["id"] == id(sampler))
        kept = self._record("sampler_epoch", id=id(sampler), epoch=sampler.epoch, rank=sampler.rank,
                            num_replicas=sampler.num_replicas, shuffle=sampler.shuffle,
                            dataset_len=len(sampler.dataset), n=len(indices), used=0,
                            order=hashlib.sha256(repr(indices).encode()).hexdigest()[:16],
                            indices=indices[:INDICES_KEPT] if passes < PASSES_WITH_INDICES else None)
        return _counted(indices, kept)

    def set_epoch(self, sampler, epoch):
        """DistributedSampler.set_epoch: record the value."""
        self.tracer.record("set_epoch", line=self._line(), id=id(sampler),
                           value=epoch if isinstance(epoch, int) else repr(epoch)[:20])
        return _SET_EPOCH(sampler, epoch)

    # ---------------------------------------------------------------- checkpoints
    def save(self, obj, f, args, kwargs):
        """torch.save: record which rank saved what."""
        line = self._line()
        if line is not None:
            self.tracer.record("save", line=line, rank=int(os.environ.get("RANK", "0") or 0), **_saved(obj))
        return _SAVE(obj, f, *args, **kwargs)
