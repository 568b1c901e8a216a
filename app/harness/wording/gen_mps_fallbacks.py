"""Regenerate mps_missing_ops.json: the ATen overloads torch 2.13 has no MPS kernel for.

Run after every torch upgrade: `python -m app.harness.wording.gen_mps_fallbacks`. Derived from the torchgen data
packaged with the installed torch (torchgen/packaged/ATen/native/native_functions.yaml): an overload counts as
missing on MPS when it has a CPU or CUDA kernel but no MPS one, is not composite (a CompositeImplicitAutograd op
decomposes into other ops before any backend is asked; a CompositeExplicitAutograd kernel serves every backend)
and, when structured_delegate names the op that does its work, that op has no MPS kernel either. On a Mac such an
overload reaches torch's MPS fallback (aten/src/ATen/mps/MPSFallback.mm): NotImplementedError, or with
PYTORCH_ENABLE_MPS_FALLBACK=1 a run on the CPU. MPSFallback.mm also sends a few overloads that have no MPS kernel
to the CPU whatever the variable says; they are listed under "always_fallback".
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# aten/src/ATen/mps/MPSFallback.mm, TORCH_LIBRARY_IMPL(aten, MPS, m): overloads registered to mps_fallback itself
ALWAYS_FALLBACK = ["col2im", "embedding_renorm_", "linalg_svd", "linalg_svd.U", "upsample_nearest3d.vec"]


def build_table() -> dict[str, list[str]]:
    """Return {"missing": [...], "always_fallback": [...]} (overload names as `name` or `name.overload`)."""
    import torchgen
    from torchgen.gen import parse_native_yaml
    from torchgen.model import DispatchKey

    base = os.path.join(os.path.dirname(torchgen.__file__), "packaged/ATen/native")
    parsed = parse_native_yaml(os.path.join(base, "native_functions.yaml"), os.path.join(base, "tags.yaml"))
    index = parsed.backend_indices
    mps, cpu, cuda = index[DispatchKey.MPS], index[DispatchKey.CPU], index[DispatchKey.CUDA]
    by_name = {f.func.name: f for f in parsed.native_functions}

    def kernel_of(backend, f) -> bool:
        if backend.has_kernel(f):
            return True
        return f.structured_delegate is not None and backend.has_kernel(by_name[f.structured_delegate])

    missing = []
    for f in parsed.native_functions:
        if (f.has_composite_implicit_autograd_kernel or f.has_composite_explicit_autograd_kernel
                or f.has_composite_explicit_autograd_non_functional_kernel):
            continue
        if kernel_of(mps, f) or not (kernel_of(cpu, f) or kernel_of(cuda, f)):
            continue
        missing.append(str(f.func.name))
    # MPSFallback.mm's own registrations win over composite kernels too (linalg_svd is CompositeImplicitAutograd)
    return {"missing": sorted(set(missing) - set(ALWAYS_FALLBACK)), "always_fallback": ALWAYS_FALLBACK}


if __name__ == "__main__":
    out = Path(__file__).with_name("mps_missing_ops.json")
    out.write_text(json.dumps(build_table(), indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}")
