"""Regenerate cuda_device_checks.json from the torchgen data packaged with the installed torch.

Run after every torch upgrade: `python -m app.harness.wording.gen_cuda_checks`. The table maps each ATen op
overload whose CUDA kernel checks that all its tensors share one device ("exact" device check) to the wrapper
name and the tensor argument names torch's generated code quotes in its error message.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def build_table() -> dict[str, list]:
    """Return {overload: [method, [tensor arg names]]} for CUDA kernels with an exact same-device check."""
    import torchgen
    from torchgen.api.types import NativeSignature
    from torchgen.gen import parse_native_yaml
    from torchgen.model import DeviceCheckType, DispatchKey

    base = os.path.join(os.path.dirname(torchgen.__file__), "packaged/ATen/native")
    parsed = parse_native_yaml(os.path.join(base, "native_functions.yaml"), os.path.join(base, "tags.yaml"))
    cuda = parsed.backend_indices[DispatchKey.CUDA]
    by_name = {f.func.name: f for f in parsed.native_functions}
    table = {}
    for f in parsed.native_functions:
        if f.device_check != DeviceCheckType.ExactSame:
            continue
        if f.structured_delegate is not None:
            if not cuda.has_kernel(by_name[f.structured_delegate]):
                continue
            method = "wrapper_CUDA_" + NativeSignature(f.func, prefix="", symint=False).name()
        elif cuda.get_kernel(f) is not None:
            if f.structured:
                method = "wrapper_CUDA_" + NativeSignature(f.func, prefix="", symint=False).name()
            else:
                prefix = f"wrapper_CUDA_{f.func.name.overload_name}_"
                method = NativeSignature(f.func, prefix=prefix, symint=False).name()
        else:
            continue
        args = list(f.func.arguments.out) + list(f.func.arguments.flat_positional)
        table[str(f.func.name)] = [method, [a.name for a in args if a.type.is_tensor_like()]]
    return dict(sorted(table.items()))


if __name__ == "__main__":
    out = Path(__file__).with_name("cuda_device_checks.json")
    out.write_text(json.dumps(build_table(), separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}")
