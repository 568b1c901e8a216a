"""The Dockerfile passes hadolint, and the committed Pygments stylesheet matches its generator."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from app import ROOT
from app.content.pygments_css import stylesheet


def hadolint() -> str:
    return shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")


def test_dockerfile_passes_hadolint():
    result = subprocess.run([hadolint(), "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_installs_like_the_makefile():
    dockerfile, makefile = (ROOT / "Dockerfile").read_text(), (ROOT / "Makefile").read_text()
    assert 'ARG TORCH_SPEC="torch==2.13.0"' in dockerfile and "TORCH   ?= torch==2.13.0" in makefile
    assert "pip install --require-hashes -r requirements/runtime.txt" in dockerfile  # tests/test_lock.py
    assert "pip install --no-deps -e ." in dockerfile and "HEALTHCHECK" in dockerfile
    assert "\nUSER 10001\n" in dockerfile


def test_healthz_answers(site_client):
    assert site_client.get("/healthz").json()["status"] == "ok"


def test_committed_pygments_css_is_current():
    committed = (ROOT / "static" / "css" / "pygments.css").read_text()
    assert committed == stylesheet(), "run: .venv/bin/python -m app.content.pygments_css > static/css/pygments.css"
