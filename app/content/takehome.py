"""Take the course home: every lesson and every exercise as a Jupyter notebook and as a plain Python script.

A learner who learned on the simulated GPU wants to run the same code on a real one (Colab's free T4, a lab's
machine). A lesson's notebook keeps its text as Markdown cells and its runnable blocks (```` ```python runnable
````) as code cells, in page order; other code (torchrun commands, error messages) stays in the Markdown, where
it was text on the page too. An exercise's notebook is its prompt, the grader's checks as a checklist to tick by
hand, and the starter as the one code cell. Both begin with a short "run it on a real GPU" note. The scripts are
the same code, one `# %%` cell per block (editors such as VS Code run them cell by cell).
"""

from __future__ import annotations

import re

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from app.content.exercises import Exercise
from app.content.lessons import Lesson
from app.content.markdown import DIRECTIVE, markdown, parse_info

REAL_GPU_NOTE = """**Run it on a real GPU.** This code comes from the course, where it ran on a *simulated* GPU: a
CPU answering as `cuda:0`, with the data in main memory. To run it on a real one in Google Colab: *File > Upload
notebook* (or open Colab and upload this file), then *Runtime > Change runtime type > T4 GPU*, and run the cells
from the top. On your own machine with an NVIDIA GPU: `pip install torch jupyter`, then `jupyter lab`, or run the
`.py` download with `python`. Without a GPU everything still runs, on the CPU.

What will differ from the simulation: the card (`torch.cuda.get_device_name()` says `Tesla T4` on Colab, with
about 15 GiB, not the simulated card's name and size); the first CUDA call takes a few seconds; timings are real ones;
random numbers drawn on the GPU and the last digits of float results differ; a T4 has far less memory than the
course's default simulated card (an H100's 80 GB), so a program that fitted there can run out
(`torch.OutOfMemoryError`); a T4 has no fast bfloat16 (use float16 with autocast); and nobody grades the code
there: the checklist is yours to tick."""

# a notebook has no site around it: the page's own links (/lessons/..., /static/...) need the site's address
SITE_LINK = re.compile(r"\]\((/[^)\s]*)")
ADMONITION = re.compile(r'^!!! (\w+)(?: "([^"]*)")?\s*$')


def _absolute_links(text: str, base_url: str) -> str:
    return SITE_LINK.sub(lambda m: f"]({base_url.rstrip('/')}{m.group(1)}", text)


def _admonitions_as_quotes(text: str) -> str:
    """`!!! tip "Title"` and its indented block become a Markdown quote (Jupyter knows no admonitions)."""
    out, inside = [], False
    for line in text.splitlines():
        head = ADMONITION.match(line)
        if head:
            inside = True
            out.append(f"> **{head.group(1).capitalize()}{': ' + head.group(2) if head.group(2) else ''}**")
            out.append(">")
        elif inside and (line.startswith("    ") or not line.strip()):
            out.append(f"> {line[4:]}" if line.strip() else ">")
        else:
            inside = False
            out.append(line)
    return "\n".join(out).rstrip("> \n") + "\n" if out else ""


def _markdown_cell(text: str, base_url: str):
    return new_markdown_cell(_absolute_links(_admonitions_as_quotes(text).strip("\n"), base_url))


def lesson_cells(lesson: Lesson, base_url: str) -> list:
    """The lesson as notebook cells: its text in Markdown cells, each runnable block a code cell, in order."""
    source = lesson.path.read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    tokens = markdown().parse(source, {})
    cursor = next((t.map[1] for t in tokens if t.type == "front_matter" and t.map), 0)
    cells = [new_markdown_cell(f"# {lesson.title}\n\n{lesson.meta.summary}"), new_markdown_cell(REAL_GPU_NOTE)]
    for token in tokens:
        if token.type != "fence" or token.level != 0 or token.map is None:
            continue
        directive = DIRECTIVE.match(token.info.strip())
        lang, flags = parse_info(token.info)
        runnable = lang == "python" and "runnable" in flags
        if not (directive or runnable):
            continue
        text = "".join(lines[cursor:token.map[0]])
        if text.strip():
            cells.append(_markdown_cell(text, base_url))
        if directive and directive["name"] == "exercise":
            slug = directive["arg"].strip()
            cells.append(new_markdown_cell(f"**Exercise `{slug}`**: its own notebook is at "
                                           f"{base_url.rstrip('/')}/exercises/{slug}/notebook.ipynb"))
        elif runnable:
            cells.append(new_code_cell(token.content.rstrip("\n")))
        cursor = token.map[1]
    rest = "".join(lines[cursor:])
    if rest.strip():
        cells.append(_markdown_cell(rest, base_url))
    return cells


def _notebook(cells: list) -> nbformat.NotebookNode:
    notebook = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        # Colab opens it on a GPU runtime when there is one to give
        "accelerator": "GPU", "colab": {"provenance": []}})
    nbformat.validate(notebook)
    return notebook


def lesson_notebook(lesson: Lesson, base_url: str) -> str:
    """The lesson as a .ipynb file's text."""
    return nbformat.writes(_notebook(lesson_cells(lesson, base_url)))


def _comment(text: str) -> str:
    return "\n".join(f"# {line}".rstrip() for line in text.strip().splitlines())


def lesson_script(lesson: Lesson, base_url: str) -> str:
    """The lesson's runnable blocks as one Python script, one `# %%` cell per block, headed by the note."""
    code = [c.source for c in lesson_cells(lesson, base_url) if c.cell_type == "code"]
    head = f"{lesson.title}\n{base_url.rstrip('/')}{lesson.url}\n\n{REAL_GPU_NOTE}"
    cells = [f"# %% block {i}\n{block}\n" for i, block in enumerate(code, 1)]
    return _comment(head) + "\n\n" + "\n\n".join(cells)


def checklist(exercise: Exercise) -> str:
    """The grader's checks as a Markdown task list, in exercise.yaml's order."""
    items = "\n".join(f"- [ ] {c.description} (`{c.id}`)" for c in exercise.spec.checks)
    return f"**What the grader checks** (tick them yourself; on the course's page the grader does):\n\n{items}"


def launch_command(exercise: Exercise) -> str:
    """The command that starts the exercise's ranks as the course does: torchrun on one machine, torchrun on each
    of several machines (run there with the first machine's address), or accelerate launch."""
    spec = exercise.spec
    per_node = spec.launch.nproc_per_node if spec.launch else 1
    if spec.launch and spec.launch.launcher.startswith("accelerate"):
        cpu = " --cpu" if spec.launch.launcher == "accelerate-cpu" else ""
        return f"accelerate launch --multi_gpu --num_processes {spec.nproc}{cpu} main.py"
    if spec.nnodes > 1:
        return (f"torchrun --nnodes={spec.nnodes} --nproc-per-node={per_node} --rdzv-backend=c10d "
                "--rdzv-endpoint=FIRST_MACHINE:29500 main.py")
    return f"torchrun --standalone --nproc-per-node={spec.nproc} main.py"


def ranks_note(exercise: Exercise) -> str:
    """What a job of several ranks needs at home: its launcher, and as many GPUs (Colab gives one)."""
    if exercise.spec.nproc < 2:
        return ""
    if exercise.spec.nnodes > 1:
        return (f"\n\nThe course runs this one on {exercise.spec.nnodes} machines, {exercise.spec.nproc} processes "
                f"in all, as `{launch_command(exercise)}` run on each machine starts them (FIRST_MACHINE: the first "
                "machine's address), so the notebook writes the code to `main.py` and its last cell launches it. "
                "On one machine, `torchrun --standalone --nproc-per-node=N main.py` with N its GPUs runs it too.")
    return (f"\n\nThe course runs this one as {exercise.spec.nproc} processes, as `{launch_command(exercise)}` "
            "starts them, so the notebook writes the code to `main.py` and its last cell launches it: that needs a "
            "machine with as many GPUs. On a runtime with one GPU (Colab's), launch one process instead.")


def exercise_cells(exercise: Exercise, base_url: str) -> list:
    """The exercise as notebook cells: title and note, prompt, checklist, then the starter to edit."""
    url = f"{base_url.rstrip('/')}/lessons/{exercise.spec.lesson}#exercise-{exercise.slug}"
    return [new_markdown_cell(f"# Exercise: {exercise.spec.title}\n\nGraded on the course's page: {url}"),
            new_markdown_cell(REAL_GPU_NOTE + ranks_note(exercise)),
            _markdown_cell(exercise.prompt_md, base_url),
            new_markdown_cell(checklist(exercise)),
            *starter_cells(exercise)]


def starter_cells(exercise: Exercise) -> list:
    """The starter as a code cell; for several ranks, a cell that writes it to main.py and one that launches it
    (a notebook's kernel is one process, and torchrun starts its own)."""
    starter = exercise.starter.rstrip("\n")
    if exercise.spec.nproc < 2:
        return [new_code_cell(starter)]
    return [new_code_cell(f"%%writefile main.py\n{starter}"),
            new_code_cell(f"!{launch_command(exercise)}")]


def exercise_notebook(exercise: Exercise, base_url: str) -> str:
    """The exercise as a .ipynb file's text."""
    return nbformat.writes(_notebook(exercise_cells(exercise, base_url)))


def exercise_script(exercise: Exercise, base_url: str) -> str:
    """The exercise's starter as a script, the prompt and the checklist above it as comments."""
    url = f"{base_url.rstrip('/')}/lessons/{exercise.spec.lesson}#exercise-{exercise.slug}"
    head = "\n\n".join([f"Exercise: {exercise.spec.title}\n{url}", REAL_GPU_NOTE + ranks_note(exercise),
                         exercise.prompt_md,
                        checklist(exercise)])
    return _comment(head) + "\n\n" + exercise.starter


__all__ = ["lesson_notebook", "lesson_script", "exercise_notebook", "exercise_script", "REAL_GPU_NOTE"]
