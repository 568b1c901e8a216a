"""GPU passthrough with a fake GPU made of real kernel objects: no GPU here, so the GPUs are character devices
made with mknod (NVIDIA's major number 195) in a temporary device tree, with no driver behind them.

A node the devices cgroup allows answers ENXIO when opened (no driver), one it refuses answers EPERM, and one
that is not in the job's /dev answers ENOENT: so each test below can tell which layer refused what. The warm-up
on such a tree is the CPU's (there is no driver to make a CUDA context with); everything else is a GPU slot's.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from app.runner import BlockingRunner, Job
from app.runner.doctor import doctor, format_report
from tests.helpers import make_settings

NVIDIA_MAJOR = 195
BASE_DEVICES = {"null", "zero", "full", "random", "urandom"}
# what the job's /dev holds besides devices: its tmpfs for /dev/shm and the /proc/self/fd links
DEV_EXTRAS = {"shm", "fd", "stdin", "stdout", "stderr"}


def _registered_majors() -> set[int]:
    text = Path("/proc/devices").read_text().split("Block devices:")[0]
    return {int(line.split()[0]) for line in text.splitlines() if line.strip()[:1].isdigit()}


def _free_major() -> int:
    """A character major no driver holds here (nvidia-uvm's is dynamic on a real host too)."""
    taken = _registered_majors()
    return next(m for m in range(511, 233, -1) if m not in taken)


def _devices_cgroup_v1() -> bool:
    """Whether cgroup v1's devices controller is mounted (the one the sandbox's devices cgroup uses)."""
    return any(" - cgroup " in line and "devices" in line.rsplit(" ", 1)[-1].split(",")
               for line in Path("/proc/self/mountinfo").read_text().splitlines())


pytestmark = [
    pytest.mark.skipif(os.getuid() != 0, reason="mknod, device binds and the devices cgroup need root"),
    pytest.mark.skipif(NVIDIA_MAJOR in _registered_majors(), reason="a real NVIDIA driver holds major 195 here"),
    pytest.mark.skipif(not _devices_cgroup_v1(), reason="no cgroup v1 devices controller on this host"),
]


@pytest.fixture(scope="module")
def fake_dev(tmp_path_factory) -> Path:
    """A device tree with two fake GPUs: nvidia0, nvidia1, nvidiactl (195:255) and nvidia-uvm, mode 0666."""
    root = tmp_path_factory.mktemp("fake-gpu") / "dev"
    root.mkdir()
    uvm = _free_major()
    for name, major, minor in (("nvidia0", NVIDIA_MAJOR, 0), ("nvidia1", NVIDIA_MAJOR, 1),
                               ("nvidiactl", NVIDIA_MAJOR, 255), ("nvidia-uvm", uvm, 0)):
        os.mknod(root / name, 0o666 | 0o020000, os.makedev(major, minor))  # S_IFCHR
        os.chmod(root / name, 0o666)  # as the real ones: the umask must not decide
    return root


@pytest.fixture(scope="module")
def gpu_sandbox(fake_dev, tmp_path_factory):
    """A runner whose one GPU slot is the fake GPU 0."""
    settings = make_settings(tmp_path_factory.mktemp("gpu"), sandbox_prefork=1, sandbox_gpu_dev_root=fake_dev,
                             gpu_devices="0")
    with BlockingRunner(settings) as runner:
        yield runner


def run_gpu(runner, code: str):
    result = runner.run(Job(code=code, filename="gpu_probe.py", gpu=True))
    assert result.status == "ok", result
    return json.loads(result.stdout.strip().splitlines()[-1])


OPEN_NODES = r"""
import errno, json, os
def try_open(path):
    try:
        os.close(os.open(path, os.O_RDWR))
        return "opened"
    except OSError as exc:
        return errno.errorcode[exc.errno]
print(json.dumps({"dev": sorted(os.listdir("/dev")), "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                  "open": {n: try_open("/dev/" + n) for n in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia1")}}))
"""


def test_the_slot_comes_from_the_device_tree(gpu_sandbox):
    (slot,) = gpu_sandbox.runner.gpu_slots
    assert slot.id == "0" and slot.nodes == ("nvidia0", "nvidiactl", "nvidia-uvm")
    assert gpu_sandbox.call(gpu_sandbox.runner.ready())["gpu_pool"]["size"] == 1


def test_a_job_given_slot_0_finds_exactly_its_gpus_nodes_in_dev(gpu_sandbox):
    seen = run_gpu(gpu_sandbox, OPEN_NODES)
    assert set(seen["dev"]) == BASE_DEVICES | DEV_EXTRAS | {"nvidia0", "nvidiactl", "nvidia-uvm"}
    assert seen["cuda_visible"] == "0"


def test_its_own_nodes_are_allowed_and_reach_the_missing_driver(gpu_sandbox):
    # ENXIO comes from the kernel finding no driver for 195:0: nothing in the sandbox refused the open
    opened = run_gpu(gpu_sandbox, OPEN_NODES)["open"]
    assert {n: opened[n] for n in ("nvidia0", "nvidiactl", "nvidia-uvm")} == dict.fromkeys(
        ("nvidia0", "nvidiactl", "nvidia-uvm"), "ENXIO")


def test_another_gpus_node_cannot_be_opened(gpu_sandbox):
    assert run_gpu(gpu_sandbox, OPEN_NODES)["open"]["nvidia1"] == "ENOENT"


def test_a_cpu_job_on_the_same_server_gets_no_gpu_node(gpu_sandbox):
    result = gpu_sandbox.run(Job(code=OPEN_NODES, filename="cpu_probe.py"))
    seen = json.loads(result.stdout)
    assert set(seen["dev"]) == BASE_DEVICES | DEV_EXTRAS and seen["cuda_visible"] is None


# The job makes a directory and waits; the test, as root on the host, enters the job's mount namespace and
# mounts there a fresh tmpfs WITHOUT nodev (the job's own tmpfs are nodev, and the job has no CAP_MKNOD), with
# two nodes in it: a copy of the job's own GPU (195:0) and the other GPU (195:1). Same mount, same owner and
# mode: only the devices cgroup tells them apart.
PATH_MADE_INSIDE = r"""
import ctypes, errno, json, os, time
ctypes.CDLL(None).prctl(15, b"__NAME__", 0, 0, 0)  # PR_SET_NAME: so the test finds this process
os.mkdir("/tmp/made")
deadline = time.monotonic() + 20
while not os.path.exists("/tmp/made/ready") and time.monotonic() < deadline:
    time.sleep(0.02)
def try_open(path):
    try:
        os.close(os.open(path, os.O_RDWR))
        return "opened"
    except OSError as exc:
        return errno.errorcode[exc.errno]
print(json.dumps({n: try_open("/tmp/made/" + n) for n in ("own-gpu", "other-gpu")}))
"""


def _pid_named(name: str, within_s: float = 15.0) -> int:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                    return int(entry)
            except OSError:
                pass
        time.sleep(0.02)
    raise AssertionError(f"no process named {name} appeared")


def test_the_devices_cgroup_refuses_another_gpu_even_through_a_path_made_inside_the_job(gpu_sandbox, fake_dev):
    name = f"gpu-{os.getpid() % 100000}"
    handle = gpu_sandbox.call(gpu_sandbox.runner.submit(
        Job(code=PATH_MADE_INSIDE.replace("__NAME__", name), filename="made.py", gpu=True)))
    pid = _pid_named(name)
    script = (f"until [ -d /tmp/made ]; do sleep 0.02; done; umask 0; mount -t tmpfs -o mode=0755 made /tmp/made "
              f"&& mknod /tmp/made/own-gpu c {NVIDIA_MAJOR} 0 && mknod /tmp/made/other-gpu c {NVIDIA_MAJOR} 1 "
              "&& touch /tmp/made/ready")
    made = subprocess.run(["nsenter", f"--target={pid}", "--mount", "--root", "--wd", "sh", "-c", script],
                          capture_output=True, text=True, timeout=20)
    assert made.returncode == 0, made.stderr
    result = gpu_sandbox.call(handle.result())
    assert result.status == "ok", result
    assert json.loads(result.stdout) == {"own-gpu": "ENXIO", "other-gpu": "EPERM"}
    # outside the job's cgroup the same node reaches the (missing) driver: EPERM above is the cgroup's answer
    with pytest.raises(OSError) as outside:
        os.close(os.open(fake_dev / "nvidia1", os.O_RDWR))
    assert outside.value.errno == 6  # ENXIO


def test_doctor_lists_the_slot_and_its_passthrough_probe_opens_its_own_gpu_only(fake_dev, tmp_path):
    report = doctor(make_settings(tmp_path, sandbox_prefork=0, sandbox_gpu_dev_root=fake_dev, gpu_devices="0"))
    gpu = report["gpu"]
    assert gpu["slots"] == ["0"] and len(gpu["gpus"]) == 2 and gpu["devices_cgroup"]
    seen = gpu["probe"]["inside"]
    assert (seen["own"], seen["other"]) == ({"nvidia0": "ENXIO"}, {"nvidia1": "ENOENT"})
    text = format_report(report)
    assert "passthrough probe: /dev holds nvidia-uvm, nvidia0, nvidiactl" in text and "torch build: 2.13.0" in text
