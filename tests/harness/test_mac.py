"""The simulated Mac (app/harness/machine/mps.py): what torch's MPS backend does differently from CUDA, through
`course run --machine mac-m3-max` and the real sandbox. The fidelity corpus's mac_* programs hold the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.harness.machine import mps

COURSE = [str(Path(sys.executable).with_name("course"))]
MAC_PROGRAM = '''
import torch
from torch import nn

def attempt(label, fn):
    try:
        fn()
        print(label, "ran")
    except Exception as exc:
        print(label, type(exc).__name__, str(exc).splitlines()[0])

x = torch.ones(3, device="mps")
attempt("factory", lambda: torch.zeros(2, dtype=torch.float64, device="mps"))
attempt("move", lambda: torch.randn(3, dtype=torch.float64).to("mps"))
attempt("double", lambda: x.double())
attempt("eig", lambda: torch.linalg.eig(torch.randn(3, 3, device="mps")))
attempt("linear", lambda: nn.Linear(3, 3).to("mps")(torch.randn(2, 3)))
attempt("mm", lambda: torch.mm(torch.randn(3, 3, device="mps"), torch.randn(3, 3)))
attempt("embedding", lambda: nn.Embedding(10, 3).to("mps")(torch.tensor([1, 2])))
attempt("synchronize", torch.mps.synchronize)
attempt("cuda", lambda: torch.ones(1).cuda())
print("memory", torch.mps.current_allocated_memory() > 0, torch.mps.recommended_max_memory())
'''


def test_the_missing_ops_file_matches_torchs_native_functions_yaml():
    from app.harness.wording.gen_mps_fallbacks import build_table

    path = Path(mps.__file__).parents[1] / "wording" / "mps_missing_ops.json"
    assert build_table() == json.loads(path.read_text("utf-8"))


def test_the_missing_ops_are_the_ones_without_an_mps_kernel():
    assert "linalg_eig" in mps.MISSING and "heaviside" in mps.MISSING
    # structured delegates (add.Tensor -> add.out), composites (linear, conv2d) and MPS kernels are not missing
    for present in ("add.Tensor", "add.out", "addmm", "mm", "linear", "conv2d", "convolution", "softmax",
                    "_log_softmax", "nll_loss_forward", "native_layer_norm", "index_select", "embedding"):
        assert present not in mps.MISSING, present
    assert "linalg_svd" in mps.ALWAYS_FALLBACK


def test_the_mac_answers_in_mps_words_through_the_sandbox(tmp_path):
    program = tmp_path / "mac.py"
    program.write_text(MAC_PROGRAM, encoding="utf-8")
    done = subprocess.run([*COURSE, "run", "--machine", "mac-m3-max", str(program)], capture_output=True, text=True,
                          timeout=240, env={**os.environ, "COURSE_ENV": "development"})
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    for label in ("factory", "move", "double"):
        assert lines[label] == f"TypeError {mps.FLOAT64_REFUSED}"
    assert lines["eig"].startswith("NotImplementedError The operator 'aten::linalg_eig' is not currently implemented "
                                   "for the MPS device.")
    assert lines["linear"] == "RuntimeError Tensor for argument input is on cpu but expected on mps"
    assert lines["mm"] == "RuntimeError Placeholder storage has not been allocated on MPS device!"
    assert lines["embedding"] == "RuntimeError Placeholder storage has not been allocated on MPS device!"
    assert lines["synchronize"] == "ran"
    assert lines["cuda"] == "AssertionError Torch not compiled with CUDA enabled"
    assert lines["memory"] == f"True {int(0.75 * (48 << 30))}"
    assert "CUDA" not in "".join(v for k, v in lines.items() if k != "cuda")
