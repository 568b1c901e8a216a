"""The launchers a job of ranks (or one process) can be started by, as data: what each adds to a rank's
environment and how it shows the ranks' lines.

    torchrun     `torchrun --standalone --nproc-per-node=N` (or `--nnodes=M ... --rdzv-backend=c10d` on each of M
                 machines); lines shown as `--tee 3` shows them, `[default<local rank>]:` first
    accelerate   `accelerate launch [--multi_gpu] --num_processes N` with its default config: torchrun underneath
                 (accelerate/commands/launch.py, `multi_gpu_launcher`, with its `--tee` default "0": lines
                 unprefixed) and the environment accelerate/utils/launch.py's prepare_multi_gpu_env and
                 prepare_simple_launcher_cmd_env set (accelerate 1.16); `cpu` is `accelerate launch --cpu`

Adding a launcher is one entry here (and its name in app/content/exercises.py's `launch.launcher`).
"""

from __future__ import annotations

# accelerate's environment for its default config (no mixed precision, no dynamo)
_ACCELERATE = {"ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_DYNAMO_BACKEND": "NO",
               "ACCELERATE_DYNAMO_MODE": "default", "ACCELERATE_DYNAMO_USE_FULLGRAPH": "False",
               "ACCELERATE_DYNAMO_USE_DYNAMIC": "False", "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION": "False"}

LAUNCHERS: dict[str, dict] = {
    "torchrun": {"env": {}, "prefix": "[default{local}]:"},
    "accelerate": {"env": {**_ACCELERATE, "ACCELERATE_USE_CPU": "False"}, "prefix": ""},
    "accelerate-cpu": {"env": {**_ACCELERATE, "ACCELERATE_USE_CPU": "True"}, "prefix": ""},
}
NAMES = tuple(LAUNCHERS)


def of(payload: dict) -> dict:
    """The launcher a payload names (torchrun when it names none or one not here)."""
    return LAUNCHERS.get(str(payload.get("launcher") or "torchrun"), LAUNCHERS["torchrun"])
