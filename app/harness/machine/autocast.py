"""`torch.autocast("cuda")` for simulated GPU tensors: CUDA's own cast lists, applied where the op is called.

Inside an autocast("cuda") region a real GPU runs matmuls and convolutions in float16 (or bfloat16), reductions
and losses in float32, and refuses `binary_cross_entropy`. torch's CUDA autocast only touches CUDA tensors, so on
this host (where simulated GPU tensors live in host memory) it would do nothing; the simulation casts the
arguments of ops that meet simulated GPU tensors by the same lists instead. The lists follow
aten/src/ATen/autocast_mode.cpp (the CUDA kernels registered as lower_precision_fp, fp32, fp32_set_opt_dtype,
promote and banned), by the names the ops have where Python calls them.
"""

from __future__ import annotations

import torch

from app.harness.wording import messages

LOWER_PRECISION = {
    "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "_convolution", "prelu", "addmm", "addmv", "addr", "matmul", "__matmul__", "__rmatmul__",
    "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul",
    "linalg_multi_dot", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "scaled_dot_product_attention",
}
FP32 = {
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "__pow__", "__rpow__", "softplus", "layer_norm", "group_norm", "norm", "frobenius_norm",
    "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "cross_entropy", "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d",
}
FP32_SET_OPT_DTYPE = {"prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm",
                      "linalg_matrix_norm", "sum"}
PROMOTE = {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
           "scatter_add", "tensordot", "cat", "stack"}
BANNED = {"binary_cross_entropy"}
WATCHED = LOWER_PRECISION | FP32 | FP32_SET_OPT_DTYPE | PROMOTE | BANNED
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def active() -> str | None:
    """The device type of the enabled torch.autocast region ("cuda", or "mps" on a Mac), None outside one.

    MPS autocast casts by the same lists (aten/src/ATen/autocast_mode.cpp registers AutocastMPS with the
    lower_precision_fp and fp32 macros CUDA uses), in float16 or bfloat16 (torch/amp/autocast_mode.py)."""
    if torch.is_autocast_enabled("cuda"):
        return "cuda"
    if torch.is_autocast_enabled("mps"):
        return "mps"
    return None


def cast_arguments(name: str, args, kwargs, on_gpu, kind: str = "cuda"):
    """Return (args, kwargs) cast the way CUDA autocast casts them for op `name`; raise for banned ops."""
    if name in BANNED:
        raise RuntimeError(messages.BCE_UNDER_AUTOCAST)
    if name in LOWER_PRECISION:
        target = torch.get_autocast_dtype(kind)
        return _cast(args, on_gpu, lambda t: target), _cast(kwargs, on_gpu, lambda t: target)
    if name in FP32:
        return _cast(args, on_gpu, _to_fp32), _cast(kwargs, on_gpu, _to_fp32)
    if name in FP32_SET_OPT_DTYPE:
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if first is not None and first.dtype in (torch.float16, torch.bfloat16) and kwargs.get("dtype") is None:
            kwargs = {**kwargs, "dtype": torch.float32}
        return args, kwargs
    widest = _widest(args, kwargs, on_gpu)
    return _cast(args, on_gpu, lambda t: widest), _cast(kwargs, on_gpu, lambda t: widest)


def _to_fp32(t: torch.Tensor):
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def _widest(args, kwargs, on_gpu):
    dtypes = [t.dtype for t in _tensors((args, kwargs)) if on_gpu(t) and t.dtype in _FLOATING]
    return max(dtypes, key=_FLOATING.index, default=torch.float32) if dtypes else None


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)


def _cast(obj, on_gpu, dtype_for):
    if isinstance(obj, torch.Tensor):
        if on_gpu(obj) and obj.dtype in _FLOATING:
            dtype = dtype_for(obj)
            return obj if dtype is None or obj.dtype == dtype else obj.to(dtype)
        return obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(item, on_gpu, dtype_for) for item in obj)
    if isinstance(obj, dict):
        return {k: _cast(v, on_gpu, dtype_for) for k, v in obj.items()}
    return obj
