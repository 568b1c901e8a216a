"""The CUDA APIs the simulated host does not reproduce, each answering with one clear line.

A real GPU runs them; here they raise `not simulated on this CPU-only host: <api>; it works on a real GPU`
(messages.NotSimulatedError) instead of an error from torch's insides. The list is what docs/grading.md names.
"""

from __future__ import annotations

import torch

from app.harness.wording.messages import NotSimulatedError

# (module, attribute): replaced by a function or class that raises NotSimulatedError naming it
NOT_SIMULATED = [
    ("torch.cuda", "CUDAGraph"), ("torch.cuda", "graph"), ("torch.cuda", "make_graphed_callables"),
    ("torch.cuda", "graph_pool_handle"), ("torch.cuda", "MemPool"), ("torch.cuda", "use_mem_pool"),
    ("torch.cuda", "memory_snapshot"), ("torch.cuda", "caching_allocator_alloc"),
    ("torch.cuda", "caching_allocator_delete"), ("torch.cuda", "caching_allocator_enable"),
    ("torch.cuda", "get_allocator_backend"), ("torch.cuda", "change_current_allocator"),
    ("torch.cuda", "CUDAPluggableAllocator"), ("torch.cuda", "current_blas_handle"),
    ("torch.cuda", "current_solver_handle"), ("torch.cuda", "get_stream_from_external"),
    ("torch.cuda", "ExternalStream"), ("torch.cuda", "host_memory_stats"),
    ("torch.cuda", "host_memory_stats_as_nested_dict"), ("torch.cuda", "reset_accumulated_host_memory_stats"),
    ("torch.cuda", "reset_peak_host_memory_stats"), ("torch.cuda", "utilization"), ("torch.cuda", "temperature"),
    ("torch.cuda", "power_draw"), ("torch.cuda", "clock_rate"), ("torch.cuda", "memory_usage"),
    ("torch.cuda", "device_memory_used"), ("torch.cuda", "list_gpu_processes"),
    ("torch.cuda.memory", "_record_memory_history"), ("torch.cuda.memory", "_snapshot"),
    ("torch.cuda.memory", "_dump_snapshot"), ("torch.cuda.jiterator", "_create_jit_fn"),
    ("torch.cuda.jiterator", "_create_multi_output_jit_fn"), ("torch.cuda.nccl", "all_reduce"),
    ("torch.cuda.nccl", "reduce"), ("torch.cuda.nccl", "broadcast"), ("torch.cuda.nccl", "all_gather"),
    ("torch.cuda.nccl", "reduce_scatter"), ("torch", "compile"), ("torch.multiprocessing", "spawn"),
]
# what the one line adds after an API's name, where the name alone would not say why or what to do instead
WHY = {
    # multiprocessing's spawn starts a new interpreter, which imports the plain torch of the sandbox: the harness is
    # not there (jobs cannot read it), so its processes have no simulated GPU, and the sandbox gives a one-process job
    # no network for their init_process_group. DDP tutorials start their ranks this way; torchrun is simulated.
    "torch.multiprocessing.spawn": " (the processes it starts are new interpreters, without this host's simulated "
                                   "GPUs; start one process per GPU with torchrun instead)",
}
_LEGACY_TYPES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
                 "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]
_DTYPES = dict(zip(_LEGACY_TYPES, [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]))


def _module(dotted: str):
    module = torch
    for part in dotted.split(".")[1:]:
        module = getattr(module, part)
    return module


def _stand_in(api: str, original):
    """A function, or a class when the original is one (so isinstance() still works), that refuses."""
    def refuse(*args, **kwargs):
        raise NotSimulatedError(api)

    if isinstance(original, type):
        return type(original.__name__, (), {"__new__": lambda cls, *a, **k: refuse(), "__doc__": original.__doc__})
    return refuse


class _LegacyType(type):
    """torch.cuda.FloatTensor and friends: isinstance() answers from the simulated device; building one refuses."""

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, torch.Tensor) and obj.__dict__.get("_pt_dev", "").startswith("cuda")
                and obj.dtype == cls.dtype)

    def __call__(cls, *args, **kwargs):
        raise NotSimulatedError(f"torch.cuda.{cls.__name__} (a legacy tensor type; use torch.tensor(..., "
                                "device='cuda'))")


_REAL_GENERATOR = torch.Generator


class _GeneratorType(type):
    """torch.Generator: host generators as before; one for a simulated GPU refuses in one line."""

    def __call__(cls, device="cpu"):
        if torch._C.device(device).type == "cuda":
            raise NotSimulatedError("torch.Generator(device='cuda') (seed the GPU with torch.cuda.manual_seed)")
        return _REAL_GENERATOR(device)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _REAL_GENERATOR)

    def __getattr__(cls, name):
        return getattr(_REAL_GENERATOR, name)


def install(patches) -> None:
    """Put the stand-ins in place."""
    for dotted, name in NOT_SIMULATED:
        module = _module(dotted)
        original = getattr(module, name, None)
        if original is not None:
            api = f"{dotted}.{name}"
            patches.set(module, name, _stand_in(api + WHY.get(api, ""), original))
    for name in _LEGACY_TYPES:
        patches.set(torch.cuda, name, _LegacyType(name, (), {"dtype": _DTYPES[name]}))
    patches.set(torch.cuda, "is_current_stream_capturing", lambda: False)
    patches.set(torch, "Generator", _GeneratorType("Generator", (), {"__module__": "torch"}))
