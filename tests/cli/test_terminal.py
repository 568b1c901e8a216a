"""What an operator's terminal receives from `course run` and `course grade` when the learner's program prints
escape sequences: each one made visible (`^[`, `\x9b`), none sent raw, the real verdict readable; run on a real pty.
The same commands on the worker tier are in tests/worker/test_tier_recovery.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from app.cli.terminal import visible
from tests.cli.terminal_attack import ATTACK, assert_nothing_raw, run_on_pty

COURSE = str(Path(sys.executable).with_name("course"))


def env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("COURSE_")}, "COURSE_ENV": "test",
            "COURSE_SECRET_KEY": "test-secret", "COURSE_DATABASE_URL": f"sqlite:///{tmp_path / 'course.db'}",
            "TERM": "xterm-256color"}


def test_visible_writes_c0_and_c1_controls_as_text_and_keeps_tab_and_newline():
    assert visible("a\x1b[2J\tb\n\r\x07\x00\x7f\x9b\x85é→") == "a^[[2J\tb\n^M^G^@^?\\x9b\\x85é→"


@pytest.mark.slow  # two commands, each starting a sandbox
def test_course_run_and_grade_show_escapes_visibly_on_a_terminal(tmp_path):
    program = tmp_path / "attack.py"
    program.write_text(ATTACK, encoding="utf-8")
    code, seen = run_on_pty([COURSE, "run", str(program)], env(tmp_path))
    text = assert_nothing_raw(seen)
    assert code == 1 and "same_device: passed ... PASS x4" in text
    assert "ValueError: bad ^[[2J^[]0;exception title^G end" in text

    code, seen = run_on_pty([COURSE, "grade", "same-device", str(program)], env(tmp_path))
    text = assert_nothing_raw(seen)
    assert code == 1
    assert "same-device: failed on" in text, text  # the real verdict, after the forged one
    assert "FAIL runs" in text and "^[[2J^[]0;exception title^G" in text  # the check's message quotes the error


@pytest.mark.slow
def test_json_output_keeps_the_characters_escaped_as_json(tmp_path):
    program = tmp_path / "attack.py"
    program.write_text(ATTACK, encoding="utf-8")
    code, seen = run_on_pty([COURSE, "run", "--json", str(program)], env(tmp_path))
    assert code == 1 and b"\x1b" not in seen
    # the terminal shows stderr too: on a busy host the sandbox server's one-line note (jobs starved for a core) can
    # come before the JSON document, which is stdout's one line
    document = next(line for line in seen.decode().splitlines() if line.startswith("{"))
    assert json.loads(document)["stdout"].startswith("\x1b[2J\x1b[3J")
