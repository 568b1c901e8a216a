"""Tracebacks as the panel shows them (app/web/output_view.py, the server's copy of exercise-output.js's rule):
the learner's frames in full, library frames folded into one line, rank prefixes kept apart."""

from __future__ import annotations

from app.web.output_view import Fold, Line, fold, frame_owner

TRACEBACK = """Traceback (most recent call last):
  File "main.py", line 12, in <module>
    print(run(torch.randn(3, 4)))
          ^^^^^^^^^^^^^^^^^^^^^^
  File "torch/nn/modules/module.py", line 1778, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "python3.11/json/decoder.py", line 337, in decode
    obj, end = self.raw_decode(s, idx=_w(s, 0).end())
RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x4 and 5x2)"""


def test_library_frames_fold_and_the_learners_stay():
    items = fold([("stderr", line) for line in TRACEBACK.splitlines()])
    assert [type(i).__name__ for i in items] == ["Line", "Line", "Line", "Line", "Fold", "Line"]
    learner = items[1]
    assert learner.learner and learner.text.startswith('  File "main.py"')
    folded = items[4]
    assert folded.label == "… 2 frames inside torch and the standard library …"
    assert len(folded.lines) == 4  # two frames, each with its source line
    assert items[-1].text.startswith("RuntimeError")


def test_rank_prefixed_frames_fold_per_rank():
    lines = ['[default0]:Traceback (most recent call last):', '[default0]:  File "main.py", line 3, in <module>',
             '[default0]:  File "torch/distributed/c10d.py", line 9, in f', '[default1]:  File "torch/x.py", line 1',
             '[default0]:    call()', '[default0]:RuntimeError: boom']
    items = fold([("stderr", line) for line in lines])
    folds = [i for i in items if isinstance(i, Fold)]
    assert [f.label for f in folds] == ["[default0]:… 1 frame inside torch …", "[default1]:… 1 frame inside torch …"]
    assert isinstance(items[-1], Line) and items[-1].text == "[default0]:RuntimeError: boom"


def test_who_owns_a_frame():
    assert frame_owner("main.py") is None and frame_owner("/tmp/helper.py") is None
    assert frame_owner("<frozen importlib._bootstrap>") == "the standard library"
    assert frame_owner("numpy/core/fromnumeric.py") == "numpy"
