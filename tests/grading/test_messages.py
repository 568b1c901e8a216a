"""One cause, one sentence (app/grading/check_messages.py) and server paths out of what learners read (paths.py)."""

from __future__ import annotations

import sys
import sysconfig

from app import ROOT
from app.grading.check_messages import sentences, tidy, unreachable_after
from app.grading.paths import scrub, verdict_for_learner
from app.grading.verdict import CheckResult


def test_a_full_stop_inside_code_ends_no_sentence():
    assert sentences('Pick one: `torch.device("cpu")`. Then move it. Done') == [
        'Pick one: `torch.device("cpu")`.', "Then move it.", "Done"]


def test_a_sentence_said_once_is_not_said_again():
    note = "There is no global `device`; pick one."
    results = tidy([CheckResult(id="a", passed=False, message=f"line 3: moved nothing. {note}", line=3),
                    CheckResult(id="b", passed=False, message=f"never moved. {note}")], None)
    assert [r.message for r in results] == [f"line 3: moved nothing. {note}", "never moved."]


def test_checks_with_one_cause_explain_it_once_but_the_crash_keeps_its_words():
    results = tidy([CheckResult(id="runs", passed=False, message="line 9: RuntimeError.", line=9, cause="c"),
                    CheckResult(id="a", passed=False, message="line 7: the copy was dropped.", line=7, cause="c"),
                    CheckResult(id="b", passed=False, message="line 7: two devices met.", line=7, cause="c"),
                    CheckResult(id="c", passed=False, message="line 7: something else.", line=7)], None)
    assert [r.message for r in results] == ["line 9: RuntimeError.", "line 7: the copy was dropped.",
                                            "line 7: the same cause as `a` above.", "line 7: something else."]


def test_code_after_a_return_is_found_and_named():
    code = "def f():\n    return 1\n    x = 2\n    return x\n\nfor i in range(3):\n    break\n"
    assert unreachable_after(code) == {2: (3, 4, "return")}
    assert unreachable_after("def f(:\n") == {}
    [result] = tidy([CheckResult(id="a", passed=False, message="line 2: returned 1.", line=2)], code)
    assert result.message == "line 2: returned 1. The code after this `return` (lines 3-4) never runs."


def test_installation_paths_become_module_paths():
    purelib = sysconfig.get_paths()["purelib"]
    stdlib = sysconfig.get_paths()["stdlib"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    text = (f'  File "{purelib}/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl\n'
            f'  File "{stdlib}/json/decoder.py", line 337, in decode\n  File "main.py", line 4\n{ROOT}/app/x.py')
    assert scrub(text) == ('  File "torch/nn/modules/module.py", line 1778, in _wrapped_call_impl\n'
                           f'  File "{version}/json/decoder.py", line 337, in decode\n  File "main.py", line 4\n'
                           "course/app/x.py")
    verdict = verdict_for_learner({"stdout": purelib, "stderr": "", "checks": [{"id": "a", "message": str(ROOT)}]})
    assert str(ROOT) not in str(verdict) and "site-packages" not in str(verdict)
