"""`course doctor`'s report: which isolation layers are on, the limits in force, the device modes available.

It drives a runner from above (a probe job, run as a learner's would be), and asks app.sandbox.host_facts what the
host offers; the sandbox itself never reaches up to a runner.
"""

from __future__ import annotations

import asyncio
import json

from app.runner.base import Job, Result, run_job
from app.sandbox import host_facts as host
from app.sandbox.gpus import GpuConfigError

# Run inside the sandbox: what a learner's program sees, so the report shows layers in force, not intentions.
PROBE = r"""
import json, os, socket
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM); inet = True
except OSError:
    inet = False
print(json.dumps({"uid": os.getuid(), "pid": os.getpid(), "hostname": socket.gethostname(),
                  "visible_pids": len([p for p in os.listdir("/proc") if p.isdigit()]),
                  "seccomp": status.get("Seccomp", "").strip(), "no_new_privs": status.get("NoNewPrivs", "").strip(),
                  "cap_eff": status.get("CapEff", "").strip(), "inet_socket": inet,
                  "root_entries": sorted(os.listdir("/")), "env_keys": sorted(os.environ)}))
"""


# Run in a GPU slot: the passthrough as a job sees it. Its own GPU's node must open (on a test tree of nodes
# without a driver: ENXIO, the devices cgroup let it through); another GPU's must not (ENOENT: not in its /dev).
GPU_PROBE = r"""
import errno, json, os
def try_open(name):
    try:
        os.close(os.open("/dev/" + name, os.O_RDWR))
        return "opened"
    except OSError as exc:
        return errno.errorcode[exc.errno]
nodes = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
own = [n for n in nodes if n[6:].isdigit()]
other = "nvidia%d" % (max([int(n[6:]) for n in own] or [-1]) + 1)
import torch
cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
print(json.dumps({"nodes": nodes, "own": {n: try_open(n) for n in own}, "other": {other: try_open(other)},
                  "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "cuda_device": cuda}))
"""


def _last_json(result) -> dict | None:
    return json.loads(result.stdout.strip().splitlines()[-1]) if result.status == "ok" else None


def doctor(settings) -> dict:
    """Start the configured runner, run a probe job in its sandbox (and one in a GPU slot), return the report."""

    from app.main import open_runner  # the runner COURSE_RUNNER names (imported late: it is the whole site)

    async def probe() -> tuple[dict, object, object]:
        async with open_runner(settings, eager=False) as runner:
            info = dict(await runner.ready())
            result = await run_job(runner, Job(code=PROBE, filename="doctor_probe.py"))
            gpu = None
            if info.get("gpu_pool"):
                gpu = await run_job(runner, Job(code=GPU_PROBE, filename="gpu_probe.py", gpu=True))
            return info, result, gpu

    try:
        info, result, gpu = asyncio.run(probe())
    except GpuConfigError as exc:
        info, result, gpu = {"refuse": str(exc)}, Result(status="error", message=str(exc)), None
    return {
        "host": host.facts(),
        "server": info,
        "probe": {"status": result.status, "message": result.message, "inside": _last_json(result),
                  "stderr": result.stderr[-500:]},
        "gpu": {**host.gpu_facts(settings.gpu_devices, str(settings.sandbox_gpu_dev_root)),
                "probe": None if gpu is None else {"status": gpu.status, "message": gpu.message,
                                                   "inside": _last_json(gpu), "stderr": gpu.stderr[-500:]}},
        "devices": {"cpu": "available", "cuda": host.cuda_status()},
        "machines": machine_list(settings),
    }


def machine_list(settings) -> dict:
    """The simulated machines jobs may pick (`course run --machine ID`, exercise.yaml `machine:`)."""
    from app.harness.machine.machines import load_all

    found = load_all(settings.sim_machines_dir)
    return {"default": settings.sim_machine,
            "machines": [{"id": m.id, "title": m.title, "summary": m.summary()} for m in found.values()]}


def format_gpu(gpu: dict, server: dict) -> list[str]:
    """The GPU part of the report: torch build, driver, GPUs, slots, and the passthrough probe."""
    lines = ["GPUs:", f"  torch build: {gpu['torch_build']}", f"  driver: {gpu['driver']}",
             f"  GPUs here: {'; '.join(gpu['gpus'])}",
             f"  GPU slots (COURSE_GPU_DEVICES): {', '.join(gpu['slots']) or 'none'}"]
    if gpu["slots_error"]:
        lines.append(f"  REFUSING TO START: {gpu['slots_error']}")
    if server.get("gpu_refuse"):
        lines.append(f"  GPU slots unusable: {server['gpu_refuse']}")
    if gpu["slots"]:
        lines.append(f"  [{'on ' if gpu['devices_cgroup'] else 'OFF'}] devices cgroup (v1) for GPU jobs")
    probe = gpu.get("probe")
    if probe and probe.get("inside"):
        seen = probe["inside"]
        lines.append(f"  passthrough probe: /dev holds {', '.join(seen['nodes'])}; own node "
                     f"{', '.join(f'{n} {r}' for n, r in seen['own'].items())}; another GPU's "
                     f"{', '.join(f'{n} {r}' for n, r in seen['other'].items())}; CUDA_VISIBLE_DEVICES="
                     f"{seen['cuda_visible_devices']}; CUDA device: {seen['cuda_device'] or 'none (simulated)'}")
    elif probe:
        lines.append(f"  passthrough probe: {probe['status']}: {probe['message']} {probe['stderr']}".rstrip())
    return lines


def format_report(report: dict) -> str:
    """Render the doctor report as text for a terminal."""
    server, probe, host = report["server"], report["probe"], report["host"]
    lines = [f"Host: running as {'root' if host['uid'] == 0 else 'uid ' + str(host['uid'])}; user namespaces "
             f"{'available' if host['user_namespaces'] else 'unavailable'}",
             f"Sandbox mode: {server.get('mode', '?')}", "Sandbox isolation layers:"]
    for name, on in server.get("layers", {}).items():
        lines.append(f"  [{'on ' if on else 'OFF'}] {name}")
    lines.append(f"  cgroups: {server.get('cgroup_version', 'none')} {server.get('cgroup_note') or ''}".rstrip())
    if server.get("jobs_cpu_cores"):
        lines.append(f"  CPU of all jobs together: {server['jobs_cpu_cores']:g} cores at most "
                     "(COURSE_SANDBOX_CPU_RESERVE keeps the rest for the web server)")
    if server.get("jobs_cpu_idle"):
        lines.append("  jobs are an idle cgroup: a page request takes a core from them at once; a normal one "
                     "for a second whenever they starve (COURSE_SANDBOX_JOBS_IDLE)")
    if server.get("refuse"):
        lines.append(f"  REFUSING TO RUN CODE: {server['refuse']}")
    elif server.get("unsafe_dev") and not server.get("isolate"):
        lines.append("  WARNING: unsafe development mode, learner code runs WITHOUT isolation")
    lines.append(f"  read-only root shows: {', '.join(server.get('root_dirs', []))}")
    inside = probe.get("inside")
    if inside:
        lines.append(f"  probe job: uid {inside['uid']}, pid {inside['pid']}, sees {inside['visible_pids']} "
                     f"process(es), seccomp mode {inside['seccomp']}, no_new_privs {inside['no_new_privs']}, "
                     f"AF_INET socket {'ALLOWED' if inside['inet_socket'] else 'denied'}")
    else:
        lines.append(f"  probe job: {probe['status']}: {probe['message']} {probe['stderr']}".rstrip())
    lim = server.get("limits", {})
    lines.append("Limits per job:")
    if lim:
        lines += [f"  wall clock  {lim['wall_s']:g} s", f"  CPU time    {lim['cpu_s']} s",
                  f"  memory      {lim['memory_bytes'] >> 20} MiB", f"  processes   {lim['pids']}",
                  f"  output      {lim['output_bytes'] >> 10} KiB", f"  source      {lim['source_bytes'] >> 10} KiB",
                  f"  tmpfs       {lim['tmpfs_bytes'] >> 20} MiB each for /tmp, /var/tmp, /dev/shm"]
    lines.append(f"  pre-forked children: {server.get('prefork', 0)}; uids from {server.get('uid_base', '?')}")
    lines += format_gpu(report["gpu"], server)
    lines.append("Device modes:")
    for name, state in report["devices"].items():
        lines.append(f"  {name}: {state}")
    machines = report.get("machines") or {}
    lines.append("Simulated machines (course run --machine ID; exercise.yaml machine:; COURSE_SIM_MACHINE):")
    for m in machines.get("machines", ()):
        mark = "*" if m["id"] == machines.get("default") else " "
        lines.append(f"  {mark} {m['summary']}")
    return "\n".join(lines)
