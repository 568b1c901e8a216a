"""The job's root holds the base interpreter's standard library and the venv, not the base's site-packages: a
package installed into the host's Python (and not into the venv) does not exist for a job."""

from __future__ import annotations

import json
import secrets
import shutil
import site
import sys
import sysconfig
from pathlib import Path

import pytest

from app.runner import BlockingRunner
from app.sandbox.isolation import RootPlan, base_site_packages, plan_root, with_files
from tests.helpers import make_settings

# what a job reports: which of the names it can import, what it sees in each base site-packages folder, and
# whether the standard library is there
PROBE = """
import importlib.util, json, os, sysconfig
names = __NAMES__
seen = {d: (sorted(os.listdir(d)) if os.path.isdir(d) else None) for d in __FOLDERS__}
print(json.dumps({"importable": [n for n in names if importlib.util.find_spec(n) is not None], "listed": seen,
                  "stdlib": os.path.isfile(os.path.join(sysconfig.get_paths()["stdlib"], "json", "__init__.py"))}))
"""


def base_folders() -> list[Path]:
    """The base interpreter's site-packages folders on this host (e.g. pyenv's, or Debian's dist-packages)."""
    return [Path(p) for p in site.getsitepackages([sys.base_prefix]) if Path(p).is_dir()]


def venv_has(name: str) -> bool:
    purelib = Path(sysconfig.get_paths()["purelib"])
    return (purelib / name).exists() or (purelib / f"{name}.py").exists()


def packages_only_the_base_has(folder: Path) -> list[str]:
    """Importable top-level package names in a base site-packages folder that the venv does not have."""
    return sorted(p.name for p in folder.iterdir()
                  if (p / "__init__.py").is_file() and p.name.isidentifier() and not venv_has(p.name))


@pytest.fixture(scope="module", params=["prefork", "spawn"])
def pool(request, tmp_path_factory):
    """A started runner of each pool: children that isolate then wait, and children that warm up then isolate."""
    settings = make_settings(tmp_path_factory.mktemp("root"), sandbox_prefork=1, sandbox_pool=request.param)
    with BlockingRunner(settings) as runner:
        yield runner


@pytest.fixture
def base_only_package():
    """A throwaway package in the base interpreter's site-packages (removed afterwards): the job must not see it."""
    folders = base_folders()
    if not folders:
        pytest.skip("this Python has no site-packages of its base interpreter")
    name = f"course_probe_{secrets.token_hex(4)}"
    package = folders[0] / name
    try:
        package.mkdir()
    except PermissionError:
        pytest.skip(f"{folders[0]} is not writable here; run as the user who owns the base Python")
    (package / "__init__.py").write_text("VISIBLE = True\n")
    try:
        yield name
    finally:
        shutil.rmtree(package)


def test_the_plan_hides_the_base_site_packages_but_not_the_venv_or_the_standard_library():
    plan = plan_root()
    real = [str(p.resolve()) for p in base_folders()]
    assert real and set(real) <= set(plan.hidden)
    assert not any(sys.prefix.startswith(h) for h in plan.hidden)
    stdlib = sysconfig.get_paths()["stdlib"]
    assert not any(stdlib == h or stdlib.startswith(h + "/") for h in plan.hidden)
    assert with_files(plan, []).hidden == plan.hidden  # a GPU slot's root hides them too


def test_a_folder_holding_something_needed_stays_visible(tmp_path):
    folder = tmp_path / "site-packages"
    folder.mkdir()
    assert base_site_packages([str(tmp_path)], needed=[str(folder / "venv")]) == []


def test_a_job_sees_no_package_of_the_base_site_packages(pool, base_only_package):
    folders = base_folders()
    names = sorted({base_only_package, *[n for f in folders for n in packages_only_the_base_has(f)]})
    assert (folders[0] / base_only_package).is_dir()  # on the host it is there
    code = PROBE.replace("__NAMES__", repr(names)).replace("__FOLDERS__", repr([str(f) for f in folders]))
    result = pool.run_code(code)
    assert result.status == "ok", result.stderr
    report = json.loads(result.stdout)
    # the venv's sys.path never lists the base's site-packages; what the root changes is that the files are gone
    assert report["importable"] == []
    assert all(listing in ([], None) for listing in report["listed"].values()), report["listed"]
    assert report["stdlib"]


def test_a_driver_library_under_a_linked_folder_the_root_shows_is_not_added_again(tmp_path):
    """/lib -> usr/lib with /usr bound: ldconfig's /lib/libcuda.so is already in the root (a second link for it
    failed build_root with FileExistsError on an H200 host, 2026-12-04)."""
    usr_lib = tmp_path / "usr" / "lib"
    usr_lib.mkdir(parents=True)
    (usr_lib / "libcuda.so.1").write_bytes(b"")
    (tmp_path / "lib").symlink_to("usr/lib")
    plan = RootPlan(dirs=[str(tmp_path / "usr")])
    assert with_files(plan, [str(tmp_path / "lib" / "libcuda.so.1")]).files == []
    elsewhere = tmp_path / "opt" / "libnvidia-ml.so.1"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"")
    assert with_files(plan, [str(elsewhere)]).files == [str(elsewhere)]
