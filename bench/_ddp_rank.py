"""One rank of the cold baselines in bench/ddp.py and bench/two_machines.py: `torchrun ... bench/_ddp_rank.py
HOST_JSON FILE`.

A fresh interpreter per rank, started by the real torchrun, that installs the same simulated host a sandbox
job gets (the harness's run mode: simulated GPUs, NCCL over gloo, no tracer) and runs FILE as `__main__`. It is
what our sandbox would cost if it started ranks the way torchrun does, without its warm state. Its name starts
with `_`, so `make bench` does not take it for a benchmark.
"""

import json
import os
import sys

from app.harness import plain, session


def main(host_json: str, path: str) -> int:
    """Run the file at path as this rank on the simulated host; return its exit code."""
    with open(path, encoding="utf-8") as f:
        code = f.read()
    # RANK and LOCAL_RANK differ on several machines (bench/two_machines.py); on one they are equal
    payload = {"code": code, "filename": path, "mode": "run", "host": json.loads(host_json),
               "rank": {"rank": int(os.environ["RANK"]), "local_rank": int(os.environ["LOCAL_RANK"]),
                        "node": int(os.environ.get("GROUP_RANK", "0")), "world_size": int(os.environ["WORLD_SIZE"])}}
    session.prepare(payload, path, grading=False)
    return plain.run_plain(code, path)


if __name__ == "__main__":
    status = main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    sys.stderr.flush()
    # as a sandbox rank ends (harness/rank.py): the harness keeps the DDP model to the end, and an interpreter
    # that then tears down gloo's threads at exit can abort ("terminate called without an active exception")
    os._exit(status)
