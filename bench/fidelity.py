"""sim_fidelity: the share of the fidelity corpus (tests/fidelity/) whose simulated run matches the expected one.

Every program runs as a plain sandbox job on the simulated host it needs (one warm LocalRunner), and its outcome
(stdout lines and final exception, normalised) is compared with tests/fidelity/expected/. The figures say how
many expectations were recorded on a GPU and how many derived from torch's sources. Writes
bench/results/fidelity.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from app.core.config import Settings
from app.runner import BlockingRunner
from tests.support.corpus import compare, load_corpus

RESULTS = Path(__file__).parent / "results"


def run() -> dict:
    """Run the corpus under the simulation; return the figures (and write them)."""
    corpus = load_corpus()
    started = time.perf_counter()
    with BlockingRunner(Settings(env="test", secret_key="bench", runner_queue_size=1000)) as runner:
        mismatches = {p.name: compare(runner, p) for p in corpus}
    failed = {name: diffs for name, diffs in mismatches.items() if diffs}
    sources = [p.expected.get("source", "missing") for p in corpus]
    figures = {
        "programs": len(corpus), "matched": len(corpus) - len(failed),
        "sim_fidelity": round((len(corpus) - len(failed)) / len(corpus), 3) if corpus else None,
        "recorded": sources.count("recorded"), "derived": sources.count("derived"),
        "two_gpu_programs": sum(1 for p in corpus if p.gpus > 1),
        "seconds": round(time.perf_counter() - started, 1),
        "mismatches": failed,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fidelity.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """The figures as a few lines."""
    lines = [f"  corpus programs {f['programs']} ({f['two_gpu_programs']} need two GPUs), matched {f['matched']}",
             f"  sim_fidelity {f['sim_fidelity']}  (expectations: {f['recorded']} recorded on a GPU, "
             f"{f['derived']} derived from torch's sources)",
             f"  {f['seconds']} s"]
    for name, diffs in f["mismatches"].items():
        lines.append(f"  MISMATCH {name}: {diffs[0]}")
    return "\n".join(lines)
