"""`course doctor`: show which sandbox isolation layers are active here, the limits, and the device modes."""

from __future__ import annotations

import json
import sys

import click

from app.cli.terminal import echo
from app.core.config import get_settings


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def doctor(as_json: bool) -> None:
    """Report the sandbox's isolation layers, limits in force and available device modes."""
    from app.runner.doctor import doctor as run_doctor
    from app.runner.doctor import format_report

    report = run_doctor(get_settings())
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        echo(format_report(report))
    gpu_probe = report["gpu"]["probe"]
    ok = report["probe"]["status"] == "ok" and not report["server"].get("refuse") and (
        gpu_probe is None or gpu_probe["status"] == "ok")
    sys.exit(0 if ok else 1)
