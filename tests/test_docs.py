"""The docs keep up with the code: a short README that links every page of the manual, and a manual in docs/
that documents every `course` command, every setting, every route and every exercise's checks, with links that
resolve. A failure says which file and which table to add (or remove) a row in.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from pathlib import Path

import click
import pytest
from fastapi.routing import iter_route_contexts

from app import ROOT
from app.cli import main
from app.content.exercises import load_exercises
from app.core.config import Settings, field_env_names

README = ROOT / "README.md"
DOCS = ROOT / "docs"
BENCH_README = ROOT / "bench" / "README.md"
CONFIGURATION = DOCS / "configuration.md"
API = DOCS / "api.md"
GRADING = DOCS / "grading.md"
# the manual's pages by audience (issue 11); a page may be added, none of these removed
REQUIRED_PAGES = ["docs/authoring.md", "docs/grading.md", "docs/configuration.md", "docs/api.md", "docs/security.md",
                  "docs/operations.md", "docs/architecture.md", "bench/README.md"]
README_MAX_LINES = 120
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Starlette answers HEAD wherever GET is routed; documenting GET covers it
IMPLIED_METHODS = {"HEAD"}


def text(path: Path) -> str:
    """Return a file's text."""
    return path.read_text(encoding="utf-8")


def rel(path: Path) -> str:
    """Return a path relative to the checkout, as messages and links name it."""
    return str(path.relative_to(ROOT))


def doc_pages() -> list[Path]:
    """Every page of the manual: docs/**/*.md and bench/README.md (those that exist; a missing one fails below)."""
    return [p for p in [*sorted(DOCS.rglob("*.md")), BENCH_README] if p.is_file()]


def tables(path: Path) -> list[tuple[list[str], list[list[str]]]]:
    """Return (header cells, body rows as cells) for every Markdown table in a file."""
    found, block = [], []
    for line in [*text(path).splitlines(), ""]:
        if line.startswith("|") and line.rstrip().endswith("|"):
            block.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])])
        elif block:
            found.append((block[0], block[2:]))  # block[1] is the |---| divider
            block = []
    return found


def table_rows(path: Path, first_header: str) -> list[list[str]]:
    """Return the body rows of every table in path whose first column is headed first_header."""
    return [row for header, rows in tables(path) if header[0] == first_header for row in rows]


def first_code_span(cell: str) -> str | None:
    """Return the text of the code span a table cell starts with, or None."""
    match = re.match(r"`([^`]+)`", cell)
    return match.group(1) if match else None


# --- README ------------------------------------------------------------------------------------------------


def test_readme_starts_with_the_two_commands():
    first_block = re.search(r"```\n(.*?)```", text(README), re.S).group(1)
    assert first_block.splitlines()[0].startswith("make serve")
    assert first_block.splitlines()[1].startswith("make test")


def test_readme_is_short():
    lines = len(text(README).splitlines())
    assert lines <= README_MAX_LINES, (f"README.md has {lines} lines; keep it at most {README_MAX_LINES} (what it "
                                       "is, the two commands, a screenshot, where to read next) and move the rest "
                                       "to a page of docs/")


@pytest.mark.parametrize("page", REQUIRED_PAGES)
def test_the_manual_has_its_pages(page):
    assert (ROOT / page).is_file(), f"{page} is missing; issue 11 names it as a page of the manual"


@pytest.mark.parametrize("page", [rel(p) for p in doc_pages()])
def test_every_docs_page_is_linked_from_the_readme(page):
    targets = {target.split("#")[0] for target in markdown_links(text(README))}
    assert page in targets, f"link {page} from README.md's \"Where to read next\" list"


# --- configuration.md: the `course` command and the settings ------------------------------------------------


def command_paths(group: click.Group, prefix: str = "course") -> dict[str, click.Command]:
    """Return {"course X": command} for every command, and "course X Y" for every subcommand of a group."""
    paths = {}
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        path = f"{prefix} {name}"
        paths[path] = command
        if isinstance(command, click.Group):
            paths.update(command_paths(command, path))
    return paths


COMMANDS = command_paths(main)


def command_rows() -> dict[str, str]:
    """Return {command path: the row's first cell} for each row of configuration.md's command table."""
    rows = {}
    for cells in table_rows(CONFIGURATION, "Command"):
        usage = first_code_span(cells[0])
        if usage and usage.startswith("course "):
            path = " ".join(re.match(r"course(?: [a-z][a-z-]*)*", usage).group(0).split())
            rows[path] = cells[0]
    return rows


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_course_command_is_documented(command):
    rows = command_rows()
    documented = [path for path in rows if path == command or path.startswith(command + " ")]
    assert documented, (f"add a row for `{command}` (its usage, every option, and what it does) to the command table "
                        "(| Command | What it does |) in docs/configuration.md")
    if isinstance(COMMANDS[command], click.Group):
        return  # a group is documented by its subcommands' rows
    usage = rows[command]
    for param in COMMANDS[command].params:
        if isinstance(param, click.Option) and not param.hidden:
            flag = max(param.opts, key=len)
            assert flag in usage, f"docs/configuration.md, command table: add `{flag}` to the usage of `{command}`"
        elif isinstance(param, click.Argument):
            name = param.human_readable_name
            assert name in usage, \
                f"docs/configuration.md, command table: add the argument {name} to the usage of `{command}`"


def test_no_row_documents_a_command_that_is_gone():
    gone = sorted(set(command_rows()) - set(COMMANDS))
    assert not gone, (f"docs/configuration.md's command table documents commands that do not exist: {gone}; "
                      "remove the rows")


@pytest.mark.parametrize("variable", field_env_names())
def test_every_setting_is_in_the_settings_table(variable):
    rows = [cells for cells in table_rows(CONFIGURATION, "Variable")
            if first_code_span(cells[0]) == variable]
    assert rows, (f"add a row for `{variable}` (its default and its meaning) to the settings table "
                  "(| Variable | Default | Meaning |) in docs/configuration.md")
    assert len(rows[0]) == 3 and all(rows[0]), \
        f"docs/configuration.md: the row for `{variable}` needs three cells: the variable, its default, its meaning"


def test_no_row_documents_a_setting_that_is_gone():
    documented = {first_code_span(cells[0]) for cells in table_rows(CONFIGURATION, "Variable")}
    gone = sorted(v for v in documented if v and v.startswith("COURSE_") and v not in field_env_names())
    assert not gone, (f"docs/configuration.md's settings table lists {gone}, which app.core.config.Settings does not "
                      "read; remove the rows (or document the variable outside the table)")


# --- api.md: every route -----------------------------------------------------------------------------------


@cache
def app_routes() -> frozenset[tuple[str, str]]:
    """Return (method, path) for every route of the app: the JSON API, the HTML pages and forms, OpenAPI's pages.

    Mounts (`/static`) have no methods and are not routes here. The app is built, never served: its in-memory
    database is never opened.
    """
    from app.main import create_app

    quiet = logging.getLogger("app.web.deps")  # it warns that the unused in-memory database is not migrated
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        app = create_app(Settings(env="test", secret_key="routes-only", database_url="sqlite://"))
    finally:
        quiet.setLevel(level)
    return frozenset((method, route.path) for route in iter_route_contexts(app.routes)
                     for method in (route.methods or set()) - IMPLIED_METHODS)


def route_rows() -> set[tuple[str, str]]:
    """Return (method, path) for each row of api.md whose first cell starts with `METHOD /path`."""
    rows = set()
    for cells in table_rows(API, "Route"):
        span = first_code_span(cells[0]) or ""
        match = re.match(rf"({'|'.join(HTTP_METHODS)}) (/[^\s?`]*)", span)
        if match:
            rows.add((match.group(1), match.group(2)))
    return rows


def test_the_route_walk_finds_pages_and_api():
    routes = app_routes()
    for expected in [("GET", "/"), ("GET", "/lessons/{slug}"), ("POST", "/api/exercises/{slug}/submissions")]:
        assert expected in routes


@pytest.mark.parametrize("route", sorted(app_routes()), ids=" ".join)
def test_every_route_is_documented(route):
    method, path = route
    assert route in route_rows(), (f"add a row for `{method} {path}` (what it takes, what it answers) to the route "
                                   "table of its area in docs/api.md (first column \"Route\", starting with "
                                   "the method and the exact path)")


def test_no_row_documents_a_route_that_is_gone():
    gone = sorted(route_rows() - app_routes())
    assert not gone, f"docs/api.md documents routes the app does not have: {gone}; fix or remove those rows"


# --- grading.md: every exercise and its check ids ------------------------------------------------------------

EXERCISES = load_exercises(ROOT / "exercises")


def exercise_rows() -> dict[str, list[str]]:
    """Return {slug: cells} for each row of grading.md's table of exercises (first column "Exercise")."""
    return {first_code_span(cells[0]) or cells[0]: cells for cells in table_rows(GRADING, "Exercise")}


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_every_exercise_is_listed_with_its_lesson_and_check_ids(slug):
    row = exercise_rows().get(slug)
    assert row, (f"add a row | `{slug}` | `{EXERCISES[slug].lesson}` | its check ids | to the table of exercises "
                 "(| Exercise | Lesson | Checks |) in docs/grading.md")
    assert row[1] == f"`{EXERCISES[slug].lesson}`", f"docs/grading.md: `{slug}` is placed by lesson " \
                                                    f"`{EXERCISES[slug].lesson}`; say so in its row's second cell"
    listed = re.findall(r"`([^`]+)`", row[2])
    expected = EXERCISES[slug].spec.check_ids
    assert listed == expected, (f"docs/grading.md: the row of `{slug}` lists checks {listed}; exercise.yaml has "
                                f"{expected} (list them in that order)")


def test_no_row_lists_an_exercise_that_is_gone():
    gone = sorted(set(exercise_rows()) - set(EXERCISES))
    assert not gone, f"docs/grading.md lists exercises that exercises/ does not have: {gone}; remove their rows"


# --- links between the pages -------------------------------------------------------------------------------


def strip_fences(markdown: str) -> str:
    """Remove fenced code blocks (``` or ~~~, three or more, indented or not): their text is an example."""
    return re.sub(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", "", markdown, flags=re.S | re.M)


def strip_code(markdown: str) -> str:
    """Remove fenced blocks and inline code: a link-like text inside them is an example, not a link."""
    return re.sub(r"(`+)[^`]*?\1", "", strip_fences(markdown))


def markdown_links(markdown: str) -> list[str]:
    """Return the target of every inline link and image, e.g. `docs/api.md#errors` or `img/panel.png`."""
    return [m.group(1) for m in re.finditer(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", strip_code(markdown))]


def github_anchor(heading: str) -> str:
    """Return the anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    heading = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Return every anchor a page has: one per heading (GitHub numbers repeats: -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for line in strip_fences(text(path)).splitlines():
        match = re.match(r"#{1,6} (.+?)\s*#*\s*$", line)
        if match:
            slug = github_anchor(match.group(1))
            found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return found


def internal_links() -> list[tuple[str, str]]:
    """Return (page, target) for every link from README.md or the manual to a file or anchor of this repository."""
    links = []
    for page in [README, *doc_pages()]:
        for target in markdown_links(text(page)):
            if not re.match(r"[a-z][a-z0-9+.-]*:|/", target):  # not https://, mailto: or a path on the site
                links.append((rel(page), target))
    return links


@pytest.mark.parametrize("page,target", internal_links(), ids=[f"{p}->{t}" for p, t in internal_links()])
def test_internal_links_resolve(page, target):
    file_part, _, anchor = target.partition("#")
    path = (ROOT / page).parent / file_part if file_part else ROOT / page
    assert path.exists(), f"{page}: the link ({target}) points at {rel(path.resolve())}, which does not exist"
    if anchor:
        assert path.suffix == ".md", f"{page}: the link ({target}) has an anchor into a file that is not Markdown"
        assert anchor in anchors(path), (f"{page}: the link ({target}) names #{anchor}, which is not a heading of "
                                         f"{rel(path.resolve())}; its anchors: {sorted(anchors(path))}")
