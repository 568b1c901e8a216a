"""`make bench` / `python -m bench [NAME ...]`: run every benchmark module, print its table, write a summary.

A benchmark is any module in bench/ with a `run() -> dict` of figures (helpers without `run` are skipped). It
may also define `table(figures) -> str` or `print_table(figures)` to print itself; otherwise its figures are
printed as a key/value table. Each module writes its own bench/results/<name>.json; this runner merges every
module's figures into bench/results/summary.json.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import time
import traceback
from pathlib import Path

from bench.summary import headline, markdown, ratios_met, targets_met

RESULTS = Path(__file__).parent / "results"


def discover() -> list[str]:
    """Return the names of bench modules that define run()."""
    names = []
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"bench.{info.name}")
        if callable(getattr(module, "run", None)):
            names.append(info.name)
    return sorted(names)


def flat_table(figures: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Flatten nested figures into (key, value) rows."""
    rows = []
    for key, value in figures.items():
        if isinstance(value, dict):
            rows += flat_table(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", f"{value:.4g}" if isinstance(value, float) else str(value)))
    return rows


def show(name: str, module, figures: dict) -> None:
    """Print one module's figures the way it asks to be printed."""
    print(f"\n== bench.{name} ==")
    if callable(getattr(module, "table", None)):
        print(module.table(figures))
    elif callable(getattr(module, "print_table", None)):
        module.print_table(figures)
    else:
        rows = flat_table(figures)
        width = max((len(k) for k, _ in rows), default=0)
        for key, value in rows:
            print(f"  {key:<{width}}  {value}")


def main(argv: list[str]) -> int:
    """Run the named benchmarks (all when none are named); exit 1 if any of them raised."""
    names = argv or discover()
    summary_path = RESULTS / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    failed = []
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        started = time.monotonic()
        try:
            figures = module.run()
        except Exception:  # noqa: BLE001 - report and go on with the other benchmarks
            traceback.print_exc()
            failed.append(name)
            continue
        show(name, module, figures)
        print(f"  ({time.monotonic() - started:.0f} s)")
        summary[name] = figures
    RESULTS.mkdir(exist_ok=True)
    head = headline(summary)
    machine = f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end of the run."
    summary.update({k: v for k, v in head.items()}, targets_met=targets_met(head), ratios_met=ratios_met(head),
                   machine=machine)
    summary_path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    (RESULTS / "summary.md").write_text(markdown(head, machine) + "\n")
    print("\n" + markdown(head, machine))
    print(f"\nwrote {summary_path} and {RESULTS / 'summary.md'}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
