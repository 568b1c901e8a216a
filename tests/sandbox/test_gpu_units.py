"""GPU slots in small parts. This host has no GPU and no NVML: where a test needs NVML's answers it says so in its
name (`mock_nvml`), and the mock is a stand-in for the pynvml module with only the calls the code makes."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from app.sandbox import gpus, isolation, nvml, pools
from app.sandbox.warm import Warm

LDCONFIG = """\
1234 libs found in cache `/etc/ld.so.cache'
	libnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
	libcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1
	libcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1
	libnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.1
	libcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12
	libz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
"""


class MockNvmlError(Exception):
    """Stands in for pynvml.NVMLError."""


class MockPynvml:
    """A stand-in for pynvml on a host with GPUs (none here): two H200s, the second split into two MIG devices."""

    NVMLError = MockNvmlError

    def __init__(self, running: dict[str, list[int]] | None = None, fail_init: bool = False) -> None:
        self.running = running or {}
        self.fail_init = fail_init

    def nvmlInit(self):
        if self.fail_init:
            raise MockNvmlError("Driver Not Loaded")

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetMinorNumber(self, handle):
        return handle[1]

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200" if handle[0] == "gpu" else "NVIDIA H200 MIG 3g.71gb"

    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-{handle[1]}" if handle[0] == "gpu" else f"MIG-{handle[1]}-{handle[2]}"

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=150_000_000_000 if handle[0] == "gpu" else 75_000_000_000)

    def nvmlDeviceGetMigMode(self, handle):
        return (1, 1) if handle[1] == 1 else (0, 0)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, j):
        if j >= 2:
            raise type("NVMLError_NotFound", (MockNvmlError,), {})("Not Found")
        return ("mig", handle[1], j)

    def nvmlDeviceGetGpuInstanceId(self, handle):
        return 1 + handle[2]

    def nvmlDeviceGetComputeInstanceId(self, handle):
        return 0

    def nvmlSystemGetDriverVersion(self):
        return "580.159.03"

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid.decode() not in self.running:
            raise MockNvmlError("Not Found")
        return uuid.decode()

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=p) for p in self.running[handle]]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        return []


# ------------------------------------------------------------------------------------------------ NVML
def test_this_host_has_no_nvml_so_no_gpus():
    found, why = gpus.discover()
    assert found == [] and "NVML" in why


def test_mock_nvml_lists_whole_gpus_and_mig_devices_instead_of_their_parent():
    listed = nvml.list_gpus(MockPynvml())
    assert [(g["id"], g["uuid"], g["name"]) for g in listed] == [
        ("0", "GPU-0", "NVIDIA H200"), ("1:0", "MIG-1-0", "NVIDIA H200 MIG 3g.71gb"),
        ("1:1", "MIG-1-1", "NVIDIA H200 MIG 3g.71gb")]
    assert listed[2]["mig"] == {"gi": 2, "ci": 0} and listed[2]["minor"] == 1


def test_mock_nvml_monitor_answers_running_pids_and_errors_per_line():
    out = io.StringIO()
    code = nvml.monitor(io.StringIO("GPU-0\nGPU-9\n"), out, MockPynvml(running={"GPU-0": [41, 7]}))
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert code == 0 and first == {"pids": [7, 41]} and "Not Found" in second["error"]


def test_mock_nvml_that_cannot_start_stops_the_monitor_with_the_reason():
    out = io.StringIO()
    assert nvml.monitor(io.StringIO("GPU-0\n"), out, MockPynvml(fail_init=True)) == 1
    assert "Driver Not Loaded" in json.loads(out.getvalue())["error"]


# ------------------------------------------------------------------------------------------------ slots
SLOTS = [gpus.GpuSlot(id="0", name="NVIDIA H200", uuid="GPU-0", nodes=("nvidia0", "nvidiactl", "nvidia-uvm")),
         gpus.GpuSlot(id="1", name="NVIDIA H200", uuid="GPU-1", nodes=("nvidia1", "nvidiactl", "nvidia-uvm"))]


def test_unset_means_every_gpu_found_and_none_means_none():
    assert gpus.select(None, SLOTS, "") == SLOTS and gpus.select("", SLOTS, "") == SLOTS
    assert gpus.select("none", SLOTS, "") == []


def test_gpus_are_named_by_index_or_uuid_in_the_order_given():
    assert gpus.select("1, GPU-0", SLOTS, "") == [SLOTS[1], SLOTS[0]]
    assert gpus.select("0,GPU-0", SLOTS, "") == [SLOTS[0]]


def test_asking_for_gpus_on_a_host_without_any_is_one_line_saying_why():
    with pytest.raises(gpus.GpuConfigError) as refused:
        gpus.resolve("0")
    message = str(refused.value)
    assert "\n" not in message and "COURSE_GPU_DEVICES=0" in message and "NVML" in message
    assert "unset it" in message


def test_slots_travel_to_the_fork_server_as_json():
    assert gpus.GpuSlot.from_dict(json.loads(json.dumps(SLOTS[0].to_dict()))) == SLOTS[0]
    assert SLOTS[0].cuda_visible_devices == "GPU-0"


def test_driver_libraries_come_from_the_linker_cache_x86_64_only():
    assert gpus.driver_libraries(LDCONFIG) == [
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libcuda.so.1",
        "/usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.1"]


def test_a_missing_uvm_node_says_how_to_create_it(tmp_path):
    (tmp_path / "nvidia0").touch()
    (tmp_path / "nvidiactl").touch()
    with pytest.raises(gpus.GpuConfigError, match="nvidia-modprobe -u"):
        gpus.discover(str(tmp_path))


def test_driver_files_outside_the_root_are_added_with_their_links(tmp_path):
    real = tmp_path / "nvidia" / "libcuda.so.580.1"
    real.parent.mkdir()
    real.write_bytes(b"\x7fELF")
    (tmp_path / "nvidia" / "libcuda.so.1").symlink_to(real.name)
    plan = isolation.RootPlan(dirs=["/usr"], files=["/etc/ld.so.cache"])
    more = isolation.with_files(plan, [str(tmp_path / "nvidia" / "libcuda.so.1"), "/usr/lib/libx.so"])
    assert more.files == ["/etc/ld.so.cache", str(real)]
    assert more.links == {str(tmp_path / "nvidia" / "libcuda.so.1"): real.name}


# ------------------------------------------------------------------------------------------------ release
def test_a_slot_is_released_when_none_of_the_jobs_pids_is_on_the_gpu():
    assert gpus.slot_released([], {10, 11})
    assert gpus.slot_released([99], {10, 11})  # someone else's process: not the finished job's
    assert not gpus.slot_released([99, 11], {10, 11})


class MockNvmlMonitor:
    """Stands in for the NVML monitor process: answers running pids from a list the test changes."""

    def __init__(self) -> None:
        self.running: list[int] | None = []

    def running_pids(self, uuid: str) -> list[int] | None:
        return self.running


def _finished_job_on_slot(monitor):
    pool = pools.SpawnPool(server=None, gpu_slots=[SLOTS[0]], warm=Warm(), monitor=monitor)
    slot = pool.slots[0]
    proc = SimpleNamespace(pid=500, pids_seen={501, 502}, pool_slot=slot, ready=True)
    slot.proc, slot.state = proc, "preparing"
    assert pool.take(None) is proc and slot.state == "busy"
    return pool, slot, proc


def test_mock_nvml_slot_stays_out_while_a_process_of_the_finished_job_is_on_the_gpu():
    monitor = MockNvmlMonitor()
    monitor.running = [502, 7]
    pool, slot, proc = _finished_job_on_slot(monitor)
    pool.exited(proc, had_job=True)
    assert slot.state == "releasing" and slot.job_pids == {500, 501, 502}
    assert pool.take(None) is None  # a waiting GPU job waits
    monitor.running = None  # NVML could not answer: the slot stays out
    pool.poll()
    assert slot.state == "releasing"
    monitor.running = [7]  # only a process that was never the job's
    pool.poll()
    assert slot.state == "empty"


def test_mock_nvml_slot_is_released_at_once_when_the_gpu_is_free():
    pool, slot, proc = _finished_job_on_slot(MockNvmlMonitor())
    pool.exited(proc, had_job=True)
    assert slot.state == "empty"


def test_a_slot_whose_child_fails_to_prepare_three_times_is_taken_out_with_the_reason():
    server = SimpleNamespace(setup_text=lambda proc: "sandbox setup failed: CUDA error: no CUDA-capable device")
    pool = pools.SpawnPool(server=server, gpu_slots=[SLOTS[0]], warm=Warm(), monitor=MockNvmlMonitor())
    slot = pool.slots[0]
    for _ in range(pools.MAX_FAILURES):
        slot.proc, slot.state = SimpleNamespace(pool_slot=slot, ready=False), "preparing"
        pool.exited(slot.proc, had_job=False)
    assert slot.broken and "no CUDA-capable device" in pool.take(None)
