"""`make setup TORCH_BUILD=cuda` and the Dockerfile's TORCH_BUILD install the CUDA build of the same pinned torch.

No CUDA wheel can be downloaded on the machines that run this suite, so the Makefile's recipe is read with
`make -n` (nothing runs) and scripts/torch-build, which makes both fail on the wrong build, is run for real.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from app import ROOT


def make_n(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-n", "-B", "setup", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_cuda_build_installs_the_same_pinned_torch_from_pypi_then_checks_it():
    recipe = make_n("TORCH_BUILD=cuda").stdout
    assert '--isolated --index-url https://pypi.org/simple "torch==2.13.0"' in recipe
    assert recipe.index("torch-build cuda 2>/dev/null || ") < recipe.index("--isolated")  # a CPU torch goes first
    assert recipe.index("--isolated") < recipe.rindex("scripts/torch-build cuda\n")
    assert "touch .venv/.installed-cuda" in recipe


def test_the_default_stays_the_cpu_wheel():
    recipe = make_n().stdout
    assert '.venv/bin/pip install --quiet  "torch==2.13.0"' in recipe and "--isolated" not in recipe
    assert "scripts/torch-build cpu\n" in recipe and "touch .venv/.installed-cpu" in recipe


def test_an_unknown_build_is_refused_before_anything_is_installed():
    done = subprocess.run(["make", "-B", "setup", "TORCH_BUILD=rocm"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "TORCH_BUILD must be cpu or cuda, not rocm" in done.stdout


@pytest.mark.parametrize(("build", "code"), [("cpu", 0), ("cuda", 1), ("rocm", 2)])
def test_torch_build_says_which_build_is_installed(build, code):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "torch-build"), build], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == code, done.stderr
    assert (code == 0) == (done.stderr == "")


def test_dockerfile_has_the_same_build_argument():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG TORCH_BUILD=cpu" in dockerfile
    assert 'cuda) index="${TORCH_INDEX_URL:-https://pypi.org/simple}"' in dockerfile
    assert 'python scripts/torch-build "$TORCH_BUILD"' in dockerfile
    case = dockerfile[dockerfile.index('RUN case "$TORCH_BUILD"'):dockerfile.index(" && python -m venv")]
    script = case.removeprefix("RUN ").replace("\\\n", "\n").rstrip() + '; echo "$index"'
    for build, index in (("cpu", "https://download.pytorch.org/whl/cpu"), ("cuda", "https://pypi.org/simple")):
        assert subprocess.run(["sh", "-c", script], env={"TORCH_BUILD": build, "TORCH_INDEX_URL": ""},
                              capture_output=True, text=True).stdout.strip() == index
    refused = subprocess.run(["sh", "-c", script], env={"TORCH_BUILD": "rocm"}, capture_output=True, text=True)
    assert refused.returncode == 2 and "cpu or cuda" in refused.stderr
