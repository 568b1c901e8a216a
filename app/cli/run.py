"""`course run FILE`: run a Python file in the sandbox exactly as a submission runs, and show its output."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from app.cli.terminal import echo, echo_output
from app.core.config import get_settings
from app.harness.contract import BUILDS, MAX_GPUS, MAX_NODES, job_host
from app.harness.machine.machines import MachineError


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help='Print one object {"status", "exit_code", "signal", "stdout", "stderr", "duration_ms", '
                   '"limit_hit"} instead of the output.')
@click.option("--gpus", type=click.IntRange(0, MAX_GPUS), default=None,
              help="Simulated CUDA GPUs (default 1) where this host has no GPU.")
@click.option("--build", type=click.Choice(BUILDS), default=None,
              help="The torch build the program believes it runs on, where this host has no GPU (default: the "
                   "machine's).")
@click.option("--machine", default=None, metavar="ID",
              help="The simulated machine (a profile in app/harness/machine/machines/, e.g. t4, a100-80gb, h100; "
                   "default COURSE_SIM_MACHINE's); `course doctor` lists them.")
@click.option("--nproc", "--nproc-per-node", "nproc", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help="Rank processes, as `torchrun --standalone --nproc-per-node=N` starts them (rank r's GPU is "
                   "cuda:r; --gpus defaults to N).")
@click.option("--nnodes", type=click.IntRange(1, MAX_NODES), default=1, show_default=True,
              help="Simulated machines, each running `torchrun --nnodes=M --nproc-per-node=N --rdzv-backend=c10d` "
                   "(M x N ranks in all; each machine has its own GPUs, --gpus of them: a rank's GPU is "
                   "cuda:LOCAL_RANK).")
@click.option("--launcher", type=click.Choice(["torchrun", "accelerate"]), default="torchrun", show_default=True,
              help="Start the ranks as `accelerate launch --multi_gpu --num_processes N` does (one process: "
                   "`accelerate launch`), with accelerate's default config; lines then come unprefixed.")
@click.option("--cpu", "accelerate_cpu", is_flag=True,
              help="With --launcher accelerate: as `accelerate launch --cpu`, on the CPU even where GPUs exist.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="OUT.json",
              help="Write the simulated GPU's modeled timeline to OUT.json as a Chrome trace (chrome://tracing, "
                   "ui.perfetto.dev): a row for the host, one per stream, copy engine and NCCL stream, syncs "
                   "marked; with several ranks, a process per rank.")
@click.option("--loopback", is_flag=True,
              help="Give the one process its own loopback, as a job of several ranks has (TCP sockets to itself "
                   "and nothing beyond): a one-process gloo group. DataLoader workers need no loopback.")
def run(file: Path, as_json: bool, gpus: int | None, build: str | None, machine: str | None,
        nproc: int, nnodes: int, launcher: str, accelerate_cpu: bool, trace_path: Path | None,
        loopback: bool) -> None:
    """Run FILE in the sandbox; exit with its exit code (1 when a limit stopped it or the sandbox failed)."""
    from app.runner import Job

    raw = file.read_bytes()
    try:
        code = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        echo(f"course run: {file} is not UTF-8 text (byte {exc.start}); save it as UTF-8", err=True)
        sys.exit(2)
    settings = get_settings()
    if accelerate_cpu and launcher != "accelerate":
        raise click.UsageError("--cpu is accelerate launch's flag: give --launcher accelerate with it")
    if nproc * nnodes > MAX_GPUS:
        raise click.UsageError(f"--nnodes {nnodes} x --nproc-per-node {nproc} is {nproc * nnodes} ranks; a job runs "
                               f"at most {MAX_GPUS}")
    try:
        host = job_host(settings, machine=machine, build=build)
        if gpus is None and nproc > 1 and host.cuda:
            gpus = nproc  # torchrun on machines with one GPU per local rank
        host = job_host(settings, machine=machine, build=build, gpus=gpus)
    except (MachineError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    named = {"torchrun": None, "accelerate": "accelerate-cpu" if accelerate_cpu else "accelerate"}[launcher]
    job = Job(code=code, filename=file.name, host=host, nproc=nproc * nnodes, nnodes=nnodes, launcher=named,
              trace=trace_path is not None, loopback=loopback)
    result = asyncio.run(_run(job, settings, on_output=None if as_json else echo_output))
    if trace_path is not None:
        _write_trace(trace_path, result.report)
    if as_json:
        click.echo(json.dumps(result.summary()))
    elif result.status not in ("ok", "failed"):
        echo(f"course run: {result.status}: {result.message}", err=True)
    if result.status == "ok":
        sys.exit(0)
    if result.status == "failed" and result.exit_code:
        sys.exit(result.exit_code)
    sys.exit(1 if result.signal is None or result.status != "failed" else 128 + result.signal)


def _write_trace(path: Path, report: dict | None) -> None:
    """Write the run's Chrome trace, or say why there is none."""
    trace = (report or {}).get("chrome_trace") if isinstance(report, dict) else None
    if not isinstance(trace, dict):
        echo(f"course run: no trace written to {path}: the run had no simulated GPU clock (a real GPU, a machine "
             "without GPU figures, or the program ended before the harness could report)", err=True)
        return
    path.write_text(json.dumps(trace), encoding="utf-8")
    rows = sum(1 for e in trace.get("traceEvents", []) if e.get("name") == "thread_name")
    events = sum(1 for e in trace.get("traceEvents", []) if e.get("ph") != "M")
    ranks = trace.get("otherData", {}).get("ranks")
    echo(f"course run: wrote {path} ({events} events on {rows} rows{f' of {ranks} ranks' if ranks else ''}, "
         f"modeled for {trace.get('otherData', {}).get('machine')}); open it in ui.perfetto.dev or "
         "chrome://tracing", err=True)


async def _run(job, settings, on_output):
    """Run one job on a runner started for it, then stopped."""
    from app.main import open_runner
    from app.runner import run_job

    async with open_runner(settings) as runner:
        return await run_job(runner, job, on_output)
