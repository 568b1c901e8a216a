"""The README keeps up with the code: every `course` command and every setting is documented there."""

from __future__ import annotations

import re

import click
import pytest

from app import ROOT
from app.cli import main
from app.config import field_env_names

README = (ROOT / "README.md").read_text(encoding="utf-8")


def command_paths(group: click.Group, prefix: str = "course") -> list[str]:
    """Return `course X` for every command, and `course X Y` for every subcommand of a group."""
    paths = []
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        path = f"{prefix} {name}"
        paths.append(path)
        if isinstance(command, click.Group):
            paths += command_paths(command, path)
    return paths


def test_readme_starts_with_the_two_commands():
    first_block = re.search(r"```\n(.*?)```", README, re.S).group(1)
    assert first_block.splitlines()[0].startswith("make serve")
    assert first_block.splitlines()[1].startswith("make test")


@pytest.mark.parametrize("command", command_paths(main))
def test_every_course_command_is_in_the_readme(command):
    assert f"`{command}" in README, f"document `{command}` in README.md's command table"


@pytest.mark.parametrize("variable", field_env_names())
def test_every_setting_is_in_the_readme_table(variable):
    rows = [line for line in README.splitlines() if line.startswith(f"| `{variable}` |")]
    assert rows, f"add a row for `{variable}` (default, meaning) to README.md's settings table"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(cells) == 3 and all(cells), f"the row for {variable} needs a default and a meaning"


def test_readme_has_sections_others_fill_in():
    for heading in ("## Settings", "## The `course` command", "## Architecture", "## Performance",
                    "## Security model", "## Writing a lesson"):
        assert heading in README, heading
