"""Take it home (issue 29): every lesson and every exercise downloads as a Jupyter notebook and as a script; the
notebooks are valid (nbformat.validate) and run top to bottom on the CPU with nbclient (an exercise's up to its
starter, its one code cell; up to before it where the exercise is sized for a GPU card), with every GPU hidden, as a
learner's laptop without one would."""

from __future__ import annotations

import ast
import json
import os

import nbformat
import pytest
from nbclient import NotebookClient

from app.content.course import load_course
from app.core.config import ROOT

COURSE = load_course(ROOT / "lessons", ROOT / "exercises")
LESSONS = [lesson.slug for lesson in COURSE.lessons]
EXERCISES = sorted(COURSE.exercises)
# seconds one cell may take on a loaded machine (the lessons' blocks take about one each)
CELL_TIMEOUT_S = 120


def _download(client, path: str, kind: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.text[:200])
    assert response.headers["content-type"].startswith(kind)
    assert response.headers["content-disposition"].startswith("attachment; filename=")
    return response.text


def _run(notebook, cwd=None) -> None:
    """Execute every cell in a fresh kernel with no GPU visible; a failing cell raises CellExecutionError."""
    hidden = {"CUDA_VISIBLE_DEVICES": "", "PYTORCH_ENABLE_MPS_FALLBACK": "0"}
    saved = {k: os.environ.get(k) for k in hidden}
    os.environ.update(hidden)
    try:
        resources = {"metadata": {"path": str(cwd)}} if cwd else {}
        NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources=resources).execute()
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def _note(notebook) -> str:
    return notebook.cells[1].source


@pytest.mark.parametrize("slug", LESSONS)
def test_a_lesson_downloads_as_a_notebook_that_runs_on_the_cpu(site_client, slug, tmp_path):
    notebook = nbformat.reads(_download(site_client, f"/lessons/{slug}/notebook.ipynb", "application/x-ipynb+json"),
                              as_version=4)
    nbformat.validate(notebook)
    lesson = COURSE.get(slug)
    runnable = [b.code.rstrip("\n") for b in lesson.facts.code_blocks if b.runnable]
    assert [c.source for c in notebook.cells if c.cell_type == "code"] == runnable
    assert "Runtime > Change runtime type > T4 GPU" in _note(notebook)
    assert "](/" not in "".join(c.source for c in notebook.cells)  # links point at the site, not at nothing
    _run(notebook, cwd=tmp_path)  # the lessons' blocks save checkpoints (model.pt) where they run
    assert not [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]


# exercises whose starter is a script written for CUDA that stops on a CPU: making it run there is the exercise
STOPS_ON_A_LAPTOP = {"runs-on-a-mac"}


@pytest.mark.parametrize("slug", EXERCISES)
def test_an_exercise_downloads_as_a_notebook_with_its_checklist_and_starter(site_client, slug, tmp_path):
    notebook = nbformat.reads(_download(site_client, f"/exercises/{slug}/notebook.ipynb", "application/x-ipynb+json"),
                              as_version=4)
    nbformat.validate(notebook)
    exercise = COURSE.exercises[slug]
    starter = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
    assert notebook.cells[starter].source.removeprefix("%%writefile main.py\n") == exercise.starter.rstrip("\n")
    checklist = next(c.source for c in notebook.cells if "What the grader checks" in c.source)
    assert [line.rsplit("(`", 1)[1].rstrip("`)") for line in checklist.splitlines() if line.startswith("- [ ]")] \
        == exercise.spec.check_ids
    if exercise.spec.nproc > 1:  # several ranks: written to main.py, then launched as the course launches them
        launcher = (exercise.spec.launch.launcher if exercise.spec.launch else "torchrun").split("-")[0]
        command = {"torchrun": "!torchrun --standalone --nproc-per-node=" if exercise.spec.nnodes == 1
                   else f"!torchrun --nnodes={exercise.spec.nnodes} --nproc-per-node=",
                   "accelerate": "!accelerate launch --multi_gpu --num_processes "}[launcher]
        assert notebook.cells[starter + 1].source.startswith(command)
    # sized for a GPU (fits-on-one-gpu: a 400M model on an L4): on a CPU it would take
    if exercise.spec.machine or slug in STOPS_ON_A_LAPTOP:
        ast.parse(notebook.cells[starter].source)  # minutes and tens of GiB, so the cells before it run, it parses
        notebook.cells = notebook.cells[:starter]
    else:
        notebook.cells = notebook.cells[:starter + 1]  # up to the starter
    _run(notebook, cwd=tmp_path)


@pytest.mark.parametrize("kind", ["lessons", "exercises"])
def test_every_script_download_is_python_with_the_real_gpu_note(site_client, kind):
    for slug in LESSONS if kind == "lessons" else EXERCISES:
        text = _download(site_client, f"/{kind}/{slug}/script.py", "text/x-python")
        ast.parse(text)
        assert "# **Run it on a real GPU.**" in text and "T4 GPU" in text


def test_an_unknown_slug_is_a_404_that_says_so(site_client):
    for path in ("/lessons/nope/notebook.ipynb", "/exercises/nope/script.py"):
        response = site_client.get(path)
        assert response.status_code == 404 and "nope" in json.dumps(response.json())
