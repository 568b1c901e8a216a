"""The `course` command. Each subcommand lives in its own module in this package."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Devices and Tensor Placement: serve the course, check content, grade and run code in the sandbox."""


def _register() -> None:
    """Attach every subcommand; a module per command keeps each concern in one place."""
    # (each subcommand module adds its import + main.add_command line below)
    from app.cli.check import check
    from app.cli.db import db
    from app.cli.deadlines import deadlines
    from app.cli.doctor import doctor
    from app.cli.grade import grade
    from app.cli.lti import lti
    from app.cli.regrade import regrade
    from app.cli.run import run
    from app.cli.serve import serve
    from app.cli.sweep import sweep
    from app.cli.users import users
    from app.cli.worker import worker

    main.add_command(serve)
    main.add_command(check)
    main.add_command(db)
    main.add_command(users)
    main.add_command(run)
    main.add_command(doctor)
    main.add_command(grade)
    main.add_command(regrade)
    main.add_command(worker)
    main.add_command(sweep)
    main.add_command(lti)
    main.add_command(deadlines)


_register()
