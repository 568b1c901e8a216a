"""Record the corpus's outcomes on a real CUDA host: `python -m tests.fidelity.record [PROGRAM ...]`.

Run it from the repository root on a machine with a CUDA build of torch and at least one NVIDIA GPU. It imports
only torch and the standard library (nothing of the project), runs each program of tests/fidelity/programs/ in a
fresh interpreter, and rewrites tests/fidelity/expected/<program>.json with what happened, marked
`"source": "recorded"` with the torch version, the CUDA version and the GPU's name. A program that needs more
GPUs than the host has is skipped and keeps its derived expectation. Commit what it wrote.

`--jobs N` runs N programs at once (each in its own interpreter with its own CUDA context; most of a program's
time is importing torch), except those that look at the card's free memory or run out of it: they run alone,
after the others, so no other process's memory changes what they see.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from tests.support.outcome import metadata, outcome_of

HERE = Path(__file__).resolve().parent
PROGRAMS, EXPECTED = HERE / "programs", HERE / "expected"
# seconds per program; each is a small script, the slowest a few training steps
TIMEOUT_S = 120
# a program whose source says one of these reads the card's free memory or exhausts it: it runs alone (--jobs)
EXCLUSIVE = ("mem_get_info", "OutOfMemoryError", "total_memory", "memory_reserved")


def run_program(path: Path, gpus: int) -> tuple[str, str, int]:
    """Run one program as `python program.py` in an empty directory, seeing the first `gpus` GPUs (as the
    simulation gives it exactly that many); return stdout, stderr, exit status."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONHASHSEED="0", CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(gpus)))
    with tempfile.TemporaryDirectory(prefix="fidelity-") as tmp:
        proc = subprocess.run([sys.executable, str(path)], cwd=tmp, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    return proc.stdout, proc.stderr, proc.returncode


def record(path: Path, gpu_name: str, gpus: int) -> str:
    """Record one program's outcome; return a line saying what happened."""
    meta = metadata(path.read_text(encoding="utf-8"))
    needs = meta["gpus"]
    if meta["machine"]:
        return f"skipped {path.name}: it runs on {meta['machine']}, not a CUDA host (its derived expectation stays)"
    if needs > gpus:
        return f"skipped {path.name}: needs {needs} GPUs, this host has {gpus} (its derived expectation stays)"
    stdout, stderr, status = run_program(path, needs)
    outcome = outcome_of(stdout, stderr, gpu_name)
    data = {"program": path.name, "source": "recorded", "gpus": needs, "torch": torch.__version__,
            "cuda": torch.version.cuda, "gpu": gpu_name, "host_gpus": gpus, "exit_status": status,
            "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            **outcome.to_json()}
    (EXPECTED / f"{path.stem}.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return f"recorded {path.name}: exit {status}" + (f", {outcome.exception['type']}" if outcome.exception else "")


def main(argv: list[str]) -> int:
    """Record the named programs (all when none are named)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", help="program file names (default: every program)")
    parser.add_argument("--jobs", type=int, default=1, help="programs run at once (default 1)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("record: this host has no usable CUDA GPU; run the recorder on one (the expectations stay derived)",
              file=sys.stderr)
        return 2
    gpus, gpu_name = torch.cuda.device_count(), torch.cuda.get_device_name(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {gpus} x {gpu_name}")
    paths = [PROGRAMS / name for name in args.programs] if args.programs else sorted(PROGRAMS.glob("*.py"))
    alone = [p for p in paths if any(word in p.read_text(encoding="utf-8") for word in EXCLUSIVE)]
    together = [p for p in paths if p not in alone]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for line in pool.map(lambda path: record(path, gpu_name, gpus), together):
            print(line, flush=True)
    for path in alone:
        print(record(path, gpu_name, gpus), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
