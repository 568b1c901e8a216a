"""The calibration files (tests/fidelity/calibration/<machine>.json, written by calibrate.py on a real GPU) keep
the one shape the simulated clock's comparison reads, and each names a machine profile that exists."""

from __future__ import annotations

import json

import pytest
import torch

from app.harness.machine.machines import load_all
from tests.fidelity.calibrate import CALIBRATION, MATMUL_KINDS, MATMUL_SIZES, calibrate

FILES = sorted(p for p in CALIBRATION.glob("*.json") if not p.stem.endswith("-card"))


def shape_problems(data: dict, sizes=MATMUL_SIZES, copies: bool = True) -> list[str]:
    """What is missing or mistyped in one calibration record ([] when it has the documented shape)."""
    problems = []
    for key, kind in (("machine", str), ("torch", str), ("device_name", str), ("launch_us", float),
                      ("item_us", float), ("mlp_step_ms", float)):
        if not isinstance(data.get(key), kind):
            problems.append(f"{key}: {data.get(key)!r} is not a {kind.__name__}")
    matmul = {(r["n"], r["dtype"], r["tf32"]) for r in data.get("matmul", []) if isinstance(r.get("ms"), float)}
    problems += [f"matmul {want} missing" for want in ((n, d, t) for n in sizes for d, t in MATMUL_KINDS)
                 if want not in matmul]
    copy = {(r["direction"], r["pinned"]) for r in data.get("copy", []) if isinstance(r.get("ms"), float)}
    if copies:
        problems += [f"copy {want} missing" for want in ((d, p) for d in ("h2d", "d2h") for p in (False, True))
                     if want not in copy]
    if not any(r.get("op") == "add" and isinstance(r.get("ms"), float) for r in data.get("elementwise", [])):
        problems.append("elementwise add missing")
    return problems


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_recorded_calibration_has_the_shape_and_names_a_profile(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    assert shape_problems(data) == []
    assert data["machine"] == path.stem and data["machine"] in load_all()
    assert all(r["ms"] > 0 for r in data["matmul"] + data["copy"] + data["elementwise"])


def test_calibrate_writes_that_shape():
    """The script itself, on the CPU with tiny sizes (--dry-run): the figures mean nothing, the shape must hold."""
    data = calibrate("cpu", torch.device("cpu"), dry_run=True)
    assert shape_problems(data, sizes=(32, 64), copies=False) == []
