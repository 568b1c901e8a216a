"""torch 2.13's own words for what goes wrong on a CUDA host, and the one line for what is not simulated.

Derived from torch's sources, not recorded on a GPU (none was available); each constant names where it comes from.
The device-mismatch wording is in wording.py.
"""

from __future__ import annotations

import torch

# c10/cuda/CUDAException.cpp: c10_cuda_check_implementation, with get_cuda_error_help ("invalid device ordinal"),
# get_cuda_async_error_suffix (the default branch) and, without TORCH_USE_CUDA_DSA,
# c10_retrieve_device_side_assertion_info. Raised as torch.AcceleratorError (a RuntimeError).
INVALID_ORDINAL = ("CUDA error: invalid device ordinal\n"
                   "GPU device may be out of range, do you have enough GPUs?\n"
                   "For more detailed error information, run with CUDA_LOG_FILE=stderr\n"
                   "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
# c10/cuda/CUDAFunctions.cpp: device_count_impl (cudaErrorInsufficientDriver, no driver at all)
NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
             "driver from http://www.nvidia.com/Download/index.aspx")
# c10/cuda/CUDAFunctions.cpp: device_count_ensure_non_zero (a driver, but CUDA_VISIBLE_DEVICES hides every GPU)
NO_GPUS = "No CUDA GPUs are available"
# torch/cuda/__init__.py: _lazy_init on a build without CUDA (what torch itself raises on the CPU-only wheel)
NOT_COMPILED = "Torch not compiled with CUDA enabled"
# c10/core/DeviceGuard / torch/csrc/utils/tensor_numpy.cpp: what .numpy() says about an accelerator tensor
NUMPY_ON_DEVICE = ("can't convert {device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                   "memory first.")
# aten/src/ATen/autocast_mode.cpp: binary_cross_entropy_banned
BCE_UNDER_AUTOCAST = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")
# aten/src/ATen/cuda/CUDAEvent.h: CUDAEvent::elapsed_time (TORCH_CHECK_VALUE: a ValueError)
EVENT_TIMING = "Both events must be created with argument 'enable_timing=True'."
EVENT_NOT_RECORDED = "Both events must be recorded before calculating elapsed time."
# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (C10D_NCCL_CHECK) around NCCL's init.cc, which refuses two ranks
# of one communicator on one GPU ("%lx": the GPU's PCI bus id); raised as torch.distributed.DistBackendError.
# The NCCL version is the one torch's CUDA 12.8 wheels bundle.
NCCL_DUPLICATE_GPU = ("NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, invalid usage (run "
                      "with NCCL_DEBUG=WARN for details), NCCL version 2.27.3\n"
                      "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
                      "Last error:\n"
                      "Duplicate GPU detected : rank {rank} and rank {other} both on CUDA device {bus:x}000")
# torch/csrc/distributed/c10d/ProcessGroup.hpp: getBackend, for a host tensor on a group whose only backend is NCCL
NO_BACKEND_FOR_CPU = "No backend type associated with device type cpu"


class NotSimulatedError(RuntimeError):
    """A CUDA API the simulated host does not reproduce; on a real GPU it works."""

    __module__ = "builtins"  # tracebacks print `NotSimulatedError: ...`, not the harness's module path

    def __init__(self, api: str):
        super().__init__(f"not simulated on this CPU-only host: {api}; it works on a real GPU")
        self.api = api


def invalid_ordinal() -> Exception:
    """The error a CUDA host raises for `cuda:N` when it has N GPUs or fewer."""
    return torch.AcceleratorError(INVALID_ORDINAL)


def numpy_on_device(device: str) -> TypeError:
    """The TypeError `.numpy()` raises for a tensor on an accelerator."""
    return TypeError(NUMPY_ON_DEVICE.format(device=device))


class ValuesNotSimulatedError(RuntimeError):
    """Reading the values of a simulated GPU tensor kept without values (dataless.py): one line, never numbers."""

    __module__ = "builtins"

    def __init__(self, shape, dtype, nbytes: int, device: str, what: str = "cannot read its values",
                 why: str = "large"):
        kind = str(dtype).replace("torch.", "")
        super().__init__(f"{what}: this tensor on {device} has shape {list(shape)} ({kind}, {_size(nbytes)}); "
                         f"{NO_VALUES_BECAUSE[why]}; a real GPU computes them")


# why a simulated GPU tensor has no values (dataless.mark), as the refusal says it: a 0-d loss of a large model is
# not itself large, so it is told where its values went
NO_VALUES_BECAUSE = {
    "large": "values of tensors this large are not simulated here",
    "budget": "values of new tensors are not simulated here once the GPU's tensors with values fill this job's memory",
    "derived": "it was computed from tensors whose values are not simulated here (too large for this job's memory)",
}


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} bytes"
