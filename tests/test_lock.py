"""The locks pin every Python dependency with its hashes: requirements/dev.txt (the runtime and the dev extra, what
`make setup` installs) and requirements/runtime.txt (the runtime alone, what the Dockerfile installs), both written
by `make lock`. These tests fail when pyproject.toml and a lock disagree, when a lock holds torch or a CUDA wheel,
and when this venv holds other versions than the lock. They read files and this venv's metadata: no network.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import subprocess
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from app import ROOT

LOCK = ROOT / "requirements" / "dev.txt"
RUNTIME_LOCK = ROOT / "requirements" / "runtime.txt"
TORCH_IN = ROOT / "requirements" / "torch.in"
OVERRIDES = ROOT / "requirements" / "overrides.txt"  # what the lock must never resolve (torch)
# what setup installs outside the lock: torch first, pip by its own upgrade, and this project editable (--no-deps)
OUTSIDE_THE_LOCK = {"torch", "pip", "course"}
REFRESH = "run `make lock` (it keeps every pin it can) and commit requirements/"


@dataclass(frozen=True)
class Pin:
    """One requirement of a lock: name==version, the marker it applies under, and the hashes pip accepts."""

    requirement: Requirement
    hashes: frozenset[str]

    @property
    def version(self) -> str:
        return next(iter(self.requirement.specifier)).version

    def applies(self) -> bool:
        """Say whether pip installs this pin on this interpreter (e.g. async-timeout only below 3.11.3)."""
        marker = self.requirement.marker
        return marker is None or marker.evaluate({"extra": ""})


@cache
def read_lock(path: Path) -> dict[str, Pin]:
    """Return a lock's pins by canonical name."""
    pins = {}
    for line in path.read_text().replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        requirement, *hashes = re.split(r"\s+--hash=", line)
        req = Requirement(requirement)
        pins[canonicalize_name(req.name)] = Pin(req, frozenset(h.strip() for h in hashes))
    return pins


def pyproject_requirements(*, dev: bool) -> list[Requirement]:
    """Return pyproject.toml's runtime requirements (and its dev extra's), then requirements/torch.in's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *(project["optional-dependencies"]["dev"] if dev else [])]
    return [Requirement(r) for r in wanted] + torch_in()


def torch_in() -> list[Requirement]:
    """Return requirements/torch.in's requirements."""
    lines = [line.split("#")[0].strip() for line in TORCH_IN.read_text().splitlines()]
    return [Requirement(line) for line in lines if line]


LOCKS = {"requirements/dev.txt": (LOCK, True), "requirements/runtime.txt": (RUNTIME_LOCK, False)}


def applies(req: Requirement, extras: set[str]) -> bool:
    """Say whether a package's requirement applies here when it is installed with these extras."""
    return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras})


def overridden() -> set[str]:
    """Names requirements/overrides.txt takes out of the lock whoever asks for them (torch: installed first)."""
    lines = [line.split("#")[0].strip() for line in OVERRIDES.read_text().splitlines()]
    return {canonicalize_name(Requirement(line).name) for line in lines if line}


def closure(roots: list[Requirement]) -> set[str]:
    """Return the canonical names of roots and of everything they need here, read from the installed metadata
    (what the overrides take out, and what only it needs, left aside)."""
    seen: dict[str, set[str]] = {}
    skip = overridden()
    todo = [(canonicalize_name(r.name), set(r.extras)) for r in roots if applies(r, set())]
    while todo:
        name, extras = todo.pop()
        if name in skip or (name in seen and extras <= seen[name]):
            continue
        seen.setdefault(name, set()).update(extras)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} is needed but not installed here, so what it needs is unknown: run `make lock` "
                        "when pyproject.toml changed, then `make setup`")
        for req in map(Requirement, requires):
            if applies(req, seen[name]):
                todo.append((canonicalize_name(req.name), set(req.extras)))
    return set(seen)


def is_cuda_wheel(name: str) -> bool:
    """Say whether a name is torch or one of the CUDA wheels its PyPI build pulls (nvidia-ml-py, NVML, is not)."""
    return name in {"torch", "triton"} or (name.startswith(("nvidia-", "cuda-")) and name != "nvidia-ml-py")


# --- pyproject.toml and the locks agree ----------------------------------------------------------------------


@pytest.mark.parametrize("lock_name", LOCKS)
def test_every_requirement_is_locked_inside_its_range(lock_name):
    path, dev = LOCKS[lock_name]
    pins = read_lock(path)
    for req in pyproject_requirements(dev=dev):
        pin = pins.get(canonicalize_name(req.name))
        assert pin, f"pyproject.toml or requirements/torch.in asks for {req}; {lock_name} has no pin for it: {REFRESH}"
        assert req.specifier.contains(pin.version, prereleases=True), \
            f"{lock_name} pins {req.name}=={pin.version}, outside pyproject.toml's {req}: {REFRESH}"


@pytest.mark.parametrize("lock_name", LOCKS)
def test_the_lock_holds_only_what_pyproject_needs(lock_name):
    path, dev = LOCKS[lock_name]
    locked = {name for name, pin in read_lock(path).items() if pin.applies()}
    needed = closure(pyproject_requirements(dev=dev))
    assert not needed - locked, f"needed here but missing from {lock_name}: {sorted(needed - locked)}: {REFRESH}"
    assert not locked - needed, (f"{lock_name} pins what nothing in pyproject.toml or requirements/torch.in needs: "
                                 f"{sorted(locked - needed)}: {REFRESH}")


def test_every_pin_is_exact_and_hashed():
    for path in (LOCK, RUNTIME_LOCK):
        for name, pin in read_lock(path).items():
            (spec,) = pin.requirement.specifier
            assert spec.operator == "==" and "*" not in spec.version, f"{path.name}: {name} is not pinned with =="
            assert pin.hashes and all(h.startswith("sha256:") for h in pin.hashes), \
                f"{path.name}: {name} has no sha256 hash, so `pip install --require-hashes` refuses it: {REFRESH}"


def test_the_runtime_lock_is_the_dev_locks_runtime_part():
    dev = read_lock(LOCK)
    for name, pin in read_lock(RUNTIME_LOCK).items():
        assert name in dev and (pin.version, pin.hashes) == (dev[name].version, dev[name].hashes), \
            f"requirements/runtime.txt pins {name} otherwise than requirements/dev.txt: {REFRESH}"


def test_no_lock_holds_torch_or_a_cuda_wheel():
    for path in (LOCK, RUNTIME_LOCK):
        cuda = sorted(name for name in read_lock(path) if is_cuda_wheel(name))
        assert not cuda, (f"{path.name} pins {cuda}: torch is installed before the lock, never from it (a resolver "
                          "that sees torch picks PyPI's CUDA build); keep it out of pyproject.toml and torch.in")


def test_torch_in_is_what_the_installed_torch_asks_for():
    requires = [Requirement(r) for r in metadata.requires("torch") or []]
    asked = {str(r) for r in requires if applies(r, set()) and not is_cuda_wheel(canonicalize_name(r.name))}
    listed = {str(r) for r in torch_in()}
    assert asked == listed, \
        (f"torch {metadata.version('torch')} asks for {sorted(asked)}; requirements/torch.in lists {sorted(listed)}: "
         f"make it list torch's requirements, then {REFRESH}")


# --- the installs use the locks, and this venv is what the lock says ------------------------------------------


def test_this_venv_holds_exactly_the_locked_versions():
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in reversed(list(metadata.distributions()))}
    locked = {name: pin.version for name, pin in read_lock(LOCK).items() if pin.applies()}
    # torch's CUDA build brings wheels that only it needs (nvidia-*, triton); the CPU build brings none
    aside = OUTSIDE_THE_LOCK | (closure([Requirement("torch")]) - set(locked))
    wrong = {n: f"{installed[n]} installed, {v} locked" for n, v in locked.items() if installed.get(n, v) != v}
    missing = sorted(set(locked) - set(installed))
    extra = sorted(set(installed) - set(locked) - aside)
    assert not (wrong or missing or extra), (
        f"this venv differs from requirements/dev.txt: versions {wrong}, not installed {missing}, not locked {extra}. "
        "Run `make setup`; uninstall a package that is not locked, or add it to pyproject.toml and run `make lock`")


def make_n(*targets: str) -> str:
    """Return the commands make would run for targets, running none."""
    return subprocess.run(["make", "-n", "-B", *targets], cwd=ROOT, capture_output=True, text=True,
                          timeout=60).stdout


def test_setup_installs_the_lock_after_torch_then_the_project_without_deps():
    recipe = make_n("setup")
    lock_step = recipe.index(".venv/bin/pip install --quiet --require-hashes -r requirements/dev.txt\n")
    assert recipe.rindex("scripts/torch-build cpu\n") < lock_step
    assert lock_step < recipe.index(".venv/bin/pip install --quiet --no-deps -e .\n")
    assert 'pip install --quiet -e ".[dev]"' not in recipe  # that would resolve the dev extra afresh
    assert re.search(r"^\$\(STAMP\): pyproject\.toml \$\(LOCK\)$", (ROOT / "Makefile").read_text(), re.M), \
        "setup must re-run when the lock changes"


def test_lock_resolves_from_pypi_alone_and_never_sees_torch():
    recipe = make_n("lock")
    compiles = [line for line in recipe.splitlines() if " pip compile " in line]
    assert len(compiles) == 2 and all("--no-config --generate-hashes --no-strip-markers" in c for c in compiles)
    assert all("torch==" not in c and "--find-links" not in c for c in compiles)
    assert compiles[0].endswith("-o requirements/dev.txt")
    assert compiles[1].endswith("--constraints requirements/dev.txt -o requirements/runtime.txt")


def test_the_image_installs_the_runtime_lock_then_the_project_without_deps():
    dockerfile = (ROOT / "Dockerfile").read_text()
    lock_step = dockerfile.index("RUN pip install --require-hashes -r requirements/runtime.txt\n")
    assert dockerfile.index('pip install --index-url "$index" "$TORCH_SPEC"') < lock_step
    assert lock_step < dockerfile.index("RUN pip install --no-deps -e .\n")


def test_the_lock_headers_name_make_lock():
    for path in (LOCK, RUNTIME_LOCK):
        assert "#    make lock\n" in path.read_text()[:200], f"{path.name} was not written by `make lock`: {REFRESH}"

