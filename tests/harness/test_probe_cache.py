"""The fork server compiles the course's probes once (grade.keep_probes); a graded job runs that code instead of
compiling its exercise's probe again. What the job does must not change: the same probe text finds its code, any
other text (another content folder, a broken probe) is compiled in the job as before."""

from app import ROOT
from app.content.exercises import read_exercises
from app.harness import grade


def test_every_exercise_s_probe_as_the_grader_sends_it_is_compiled_ahead(monkeypatch):
    monkeypatch.setattr(grade, "PROBES", {})
    grade.keep_probes(ROOT / "exercises")
    exercises, errors = read_exercises(ROOT / "exercises")
    assert not errors
    probes = [e.probe for e in exercises.values() if e.probe]
    assert probes and all(p in grade.PROBES for p in probes)  # keyed by the text the job's payload carries


def test_a_probe_compiled_ahead_answers_as_one_compiled_in_the_job(monkeypatch, tmp_path):
    source = "def probe(ns, api):\n    return {'x': ns['x'] * 2, 'name': __name__}\n"
    (tmp_path / "ex").mkdir()
    (tmp_path / "ex" / "probe.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(grade, "PROBES", {})
    assert grade._run_probe(source, {"x": 21}, api=None) == ({"x": 42, "name": "__probe__"}, None)
    grade.keep_probes(tmp_path)
    assert source in grade.PROBES
    assert grade._run_probe(source, {"x": 21}, api=None) == ({"x": 42, "name": "__probe__"}, None)


def test_a_broken_probe_is_left_to_the_job_which_reports_its_error(monkeypatch, tmp_path):
    (tmp_path / "ex").mkdir()
    (tmp_path / "ex" / "probe.py").write_text("def probe(ns, api)\n", encoding="utf-8")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "probe.py").write_bytes(b"\xff\xfe not UTF-8")
    monkeypatch.setattr(grade, "PROBES", {})
    grade.keep_probes(tmp_path)
    assert grade.PROBES == {}
    result, error = grade._run_probe("def probe(ns, api)\n", {}, api=None)
    assert result is None and "SyntaxError" in error
