"""The simulated clock against recordings of a real GPU (tests/fidelity/calibration/h200.json, recorded by
scripts/gpu-check on an H200), through the real sandbox on the simulated H200.

Tolerance: a factor of 2 either way. The model is a roofline with fixed efficiencies (docs/grading.md, "The
simulated clock"): it cannot know cuBLAS's kernel choice per shape or the driver's staging, and the course needs
the right order of magnitude and the right ratios (GPU against host, pinned against pageable, fp32 against bf16),
not the last 10%. The program and the comparison are tests/support/calibration.py's, which `make bench` also uses
for `time_model_error` (bench/clock.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import calibration


@pytest.mark.skipif(not calibration.RECORDED.exists(), reason="no recording of a real H200 yet")
def test_the_modeled_h200_is_within_a_factor_of_two_of_the_recorded_one(tmp_path: Path):
    compared = calibration.pairs(calibration.run_modeled(tmp_path), calibration.recorded())
    assert len(compared) == 10  # 8 matmuls of 1024 and 4096, the h2d copies pageable and pinned
    assert not calibration.outside_tolerance(compared), calibration.outside_tolerance(compared)
