"""`course doctor`'s report: which isolation layers are on, the limits in force, the device modes available.

It drives a runner from above (a probe job, run as a learner's would be), and asks app.sandbox.host what the
host offers; the sandbox itself never reaches up to a runner.
"""

from __future__ import annotations

import asyncio
import json

from app.runner import Job, open_runner, run_job
from app.sandbox import host

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


def doctor(settings) -> dict:
    """Start the configured runner, run a probe job in its sandbox, and return the report."""

    async def probe() -> tuple[dict, object]:
        async with open_runner(settings, eager=False) as runner:
            info = dict(await runner.ready())
            return info, await run_job(runner, Job(code=PROBE, filename="doctor_probe.py"))

    info, result = asyncio.run(probe())
    inside = json.loads(result.stdout.strip().splitlines()[-1]) if result.status == "ok" else None
    return {
        "host": host.facts(),
        "server": info,
        "probe": {"status": result.status, "message": result.message, "inside": inside,
                  "stderr": result.stderr[-500:]},
        "devices": {"cpu": "available", "cuda": host.cuda_status()},
    }


def format_report(report: dict) -> str:
    """Render the doctor report as text for a terminal."""
    server, probe, host = report["server"], report["probe"], report["host"]
    lines = [f"Host: running as {'root' if host['uid'] == 0 else 'uid ' + str(host['uid'])}; user namespaces "
             f"{'available' if host['user_namespaces'] else 'unavailable'}",
             f"Sandbox mode: {server.get('mode', '?')}", "Sandbox isolation layers:"]
    for name, on in server.get("layers", {}).items():
        lines.append(f"  [{'on ' if on else 'OFF'}] {name}")
    lines.append(f"  cgroups: {server.get('cgroup_version', 'none')} {server.get('cgroup_note') or ''}".rstrip())
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
    lines.append("Device modes:")
    for name, state in report["devices"].items():
        lines.append(f"  {name}: {state}")
    return "\n".join(lines)
