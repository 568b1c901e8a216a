"""The lessons' figures: generated from their script, placed with alt text, served, drawn for light and dark pages;
and the Markdown that places them (a lone image becomes a <figure>, `course check` finds missing files and alt)."""

from __future__ import annotations

import importlib.util
import re

import pytest

from app import ROOT
from app.content.course import load_course
from app.content.lessons import load_lesson
from app.content.markdown import parse, render_tokens
from app.content.validate import check_images

FIGURES_DIR = ROOT / "static" / "figures"
SCRIPT = ROOT / "static" / "figures-src" / "figures.py"
# the issues' figures, and the lessons that must show each
PLACES = {
    "host-and-gpu-memory.svg": {"cpu-gpu-border"},
    "training-loop-to-device.svg": {"cpu-gpu-border", "training-loop"},
    "non-blocking-timeline.svg": {"training-loop"},
    "ddp-ranks.svg": {"multi-gpu-and-distributed"},
    "when-more-gpus.svg": {"multi-gpu-and-distributed"},
    "two-machines-ranks.svg": {"multi-gpu-and-distributed"},
}


def _script():
    spec = importlib.util.spec_from_file_location("course_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT / "lessons", ROOT / "exercises", ROOT / "static")


def test_committed_svgs_are_what_the_script_draws():
    drawn = _script().render()
    assert set(drawn) == {p.name for p in FIGURES_DIR.glob("*.svg")} == set(PLACES)
    for name, text in drawn.items():
        assert (FIGURES_DIR / name).read_text(encoding="utf-8") == text, f"{name} is stale; run `make figures`"


def test_each_figure_is_placed_where_the_issue_asks_with_alt_and_caption(course):
    placed: dict[str, set[str]] = {}
    for lesson in course.lessons:
        for src, alt, _ in lesson.facts.images:
            name = src.removeprefix("/static/figures/")
            placed.setdefault(name, set()).add(lesson.slug)
            assert len(alt) > 80, f"{lesson.slug}: the alt text of {name} should say what the figure shows"
    assert placed == PLACES
    assert not [e for e in course.errors if "image" in e.message]


@pytest.mark.parametrize("name", sorted(PLACES))
def test_figure_has_a_title_an_opaque_panel_and_a_dark_palette(name):
    svg = (FIGURES_DIR / name).read_text(encoding="utf-8")
    assert re.search(r"<title id=\"title\">[^<]{20,}</title>", svg) and "<desc" in svg
    assert 'class="panel"' in svg  # its own background: legible on any page colour
    assert "@media (prefers-color-scheme: dark)" in svg
    assert "http" not in svg.replace("http://www.w3.org/2000/svg", "")  # no external fonts or images


def test_lesson_page_shows_figures_as_figure_elements(site_client):
    html = site_client.get("/lessons/training-loop").text
    figures = re.findall(r'<figure class="lesson-figure">\s*<img src="(/static/figures/[a-z-]+\.svg)" alt="([^"]+)"'
                         r' loading="lazy"><figcaption>(.+?)</figcaption>\s*</figure>', html)
    assert [src for src, _, _ in figures] == ["/static/figures/training-loop-to-device.svg",
                                              "/static/figures/non-blocking-timeline.svg"]
    assert "<code>non_blocking=True</code>" in figures[1][2]  # captions render their Markdown
    served = site_client.get(figures[0][0])
    assert served.status_code == 200 and served.headers["content-type"].startswith("image/svg+xml")


def test_lone_image_is_a_figure_and_inline_images_stay_inline():
    tokens, facts = parse('Text\n\n![Alt words](/static/a.svg "A `b` caption")\n\nSee ![c](/static/c.svg "tip").\n')
    html = render_tokens(tokens)
    assert ('<figure class="lesson-figure">\n<img src="/static/a.svg" alt="Alt words" loading="lazy">'
            '<figcaption>A <code>b</code> caption</figcaption>\n</figure>') in html
    assert '<p>See <img src="/static/c.svg" alt="c" title="tip" loading="lazy">.</p>' in html
    assert facts.images == [("/static/a.svg", "Alt words", 3), ("/static/c.svg", "c", 5)]


def test_check_reports_missing_files_missing_alt_and_remote_images(tmp_path):
    (tmp_path / "static" / "figures").mkdir(parents=True)
    (tmp_path / "static" / "figures" / "here.svg").write_text("<svg/>")
    lesson_file = tmp_path / "lesson.md"
    lesson_file.write_text("---\ntitle: T\nslug: t\norder: 1\nsummary: S\nestimated_minutes: 1\n---\n\n"
                           "![Fine](/static/figures/here.svg)\n\n![](/static/figures/here.svg)\n\n"
                           "![Gone](/static/figures/gone.svg)\n\n![Remote](https://example.org/x.png)\n")
    lesson, errors = load_lesson(lesson_file)
    assert errors == []
    errors = check_images(lesson, tmp_path / "static")
    assert [e.line for e in errors] == [11, 13, 15]
    assert "has no alt text" in errors[0].message
    assert "no file figures/gone.svg under static/" in errors[1].message
    assert "loads nothing from elsewhere" in errors[2].message
