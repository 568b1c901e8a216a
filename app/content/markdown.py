"""Markdown to HTML: the one renderer for lessons and exercise prompts.

markdown-it-py (CommonMark + tables) with mdit-py-plugins for front matter, admonitions (`!!! tip "Title"`) and
heading anchors. Code is highlighted on the server by Pygments, so pages need no JavaScript to look right.
Two fenced-block extensions:

- ```` ```{exercise} same-device ```` places an exercise panel (MyST-style directive); the renderer leaves a
  marker that `split_parts` turns into a separate part, so the panel stays a live template.
- ```` ```python runnable ```` marks a block that `course check` and the tests run on a CPU-only machine and on the
  simulated H100, and that learners run in the page (a Run button and a "Run on" picker under it): the renderer
  numbers those blocks 1, 2, ... (`id="block-N"`) and leaves a marker after each that `split_parts` turns into a
  ("block", "N") part, rendered by templates/lessons/_block_run.html.
  ```` ```python runnable loopback ```` is a block whose one process talks to itself over sockets (DataLoader
  workers, a one-process gloo group): its runs get their own loopback in the sandbox (LOOPBACK_FLAG).
- ```` ```output ```` after a runnable block says what it prints (```` ```output h100 ```` on one H100 only,
  ```` ```output cpu ```` on the CPU only); `course check` compares (app/content/runnable.py).

An image alone in its paragraph, `![alt text](/static/figures/name.svg "caption")`, becomes a figure: `<figure>`
with the image and, when the image has a title, that title (Markdown allowed) as its `<figcaption>`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.admon import admon_plugin
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

DIRECTIVE = re.compile(r"^\{(?P<name>[a-z][a-z0-9-]*)\}\s*(?P<arg>.*)$")
PART_MARKER = re.compile(r"<!--(exercise|block):([a-z0-9-]+)-->\n?")
RUNNABLE_FLAG = "runnable"
# a runnable block whose process talks to itself over TCP: a one-process gloo group binds to 127.0.0.1. The sandbox
# refuses an ordinary job's network sockets (Unix ones, which DataLoader workers use, stay allowed), so the block's
# runs ask for their own loopback (Job.loopback: the network namespace of a job of several ranks)
LOOPBACK_FLAG = "loopback"
# the flags a Python block may carry (an ```output block's are OUTPUT_MACHINES)
PYTHON_FLAGS = (RUNNABLE_FLAG, LOOPBACK_FLAG)
OUTPUT_LANG = "output"
# the machines an ```output block may be about, as its flags: the words its label shows
OUTPUT_MACHINES = {"cpu": "on a CPU", "h100": "on one H100"}


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block as written in the source; line is 1-based, of the opening fence."""

    lang: str
    code: str
    line: int
    runnable: bool
    flags: frozenset[str] = frozenset()

    @property
    def loopback(self) -> bool:
        """Its runs need their own loopback (LOOPBACK_FLAG)."""
        return LOOPBACK_FLAG in self.flags


@dataclass(frozen=True)
class Heading:
    level: int
    id: str
    text: str
    line: int


@dataclass
class Facts:
    """What the validator needs to know about one Markdown document, gathered while parsing."""

    headings: list[Heading] = field(default_factory=list)
    links: list[tuple[str, int]] = field(default_factory=list)  # (href, line)
    code_blocks: list[CodeBlock] = field(default_factory=list)
    directives: list[tuple[str, str, int]] = field(default_factory=list)  # (name, argument, line)
    images: list[tuple[str, str, int]] = field(default_factory=list)  # (src, alt text, line)
    front_matter: tuple[str, int] | None = None  # (YAML text, line of the opening ---)


def parse_info(info: str) -> tuple[str, set[str]]:
    """Split a fence's info string into its language and its flags (`python runnable` -> python, {runnable})."""
    words = info.split()
    return (words[0].lower() if words else ""), set(words[1:])


def highlight_code(code: str, lang: str) -> str:
    """Return Pygments HTML for code; unknown languages are shown as plain text."""
    try:
        lexer = get_lexer_by_name(lang or "text")
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    out = pygments_highlight(code, lexer, HtmlFormatter(cssclass="highlight", wrapcode=True))
    # a scrollable region must be reachable by keyboard (axe: scrollable-region-focusable)
    return out.replace("<pre>", '<pre tabindex="0">', 1)


def _render_fence(self, tokens: list[Token], idx: int, options, env) -> str:
    token = tokens[idx]
    directive = DIRECTIVE.match(token.info.strip())
    if directive:
        if directive["name"] == "exercise":
            return f"<!--exercise:{html.escape(directive['arg'].strip())}-->\n"
        return ""  # unknown directives are reported by `course check`, never shown
    lang, flags = parse_info(token.info)
    if lang == OUTPUT_LANG:  # what the block above prints: shown as text, labelled with the machines it is about
        where = " or ".join(OUTPUT_MACHINES[f] for f in sorted(flags) if f in OUTPUT_MACHINES)
        label = f'<span class="code-lang">output{html.escape(" " + where if where else "")}</span>'
        return (f'<div class="code-block code-output" data-lang="output"><div class="code-head">{label}</div>'
                f'{highlight_code(token.content, "text")}</div>\n')
    body = highlight_code(token.content, lang)
    label = f'<span class="code-lang">{html.escape(lang)}</span>' if lang else ""
    if RUNNABLE_FLAG in flags:
        # numbered in page order; the marker after it becomes the block's Run controls (split_parts)
        number = env["runnable"] = env.get("runnable", 0) + 1
        label += '<span class="code-runnable">tested on a CPU and an H100</span>'
        return (f'<div class="code-block" id="block-{number}" data-lang="{html.escape(lang or "text")}">'
                f'<div class="code-head">{label}</div>{body}</div>\n<!--block:{number}-->\n')
    head = f'<div class="code-head">{label}</div>' if label else ""
    return f'<div class="code-block" data-lang="{html.escape(lang or "text")}">{head}{body}</div>\n'


def _lone_image(tokens: list[Token], idx: int) -> Token | None:
    """The image token when the inline token at idx holds nothing but one image, else None."""
    inline = tokens[idx] if 0 <= idx < len(tokens) else None
    if inline is None or inline.type != "inline":
        return None
    children = [c for c in inline.children or [] if not (c.type == "text" and not c.content.strip())]
    return children[0] if len(children) == 1 and children[0].type == "image" else None


def _render_paragraph_open(self, tokens: list[Token], idx: int, options, env) -> str:
    if not tokens[idx].hidden and _lone_image(tokens, idx + 1) is not None:
        return '<figure class="lesson-figure">\n'
    return self.renderToken(tokens, idx, options, env)


def _render_paragraph_close(self, tokens: list[Token], idx: int, options, env) -> str:
    image = None if tokens[idx].hidden else _lone_image(tokens, idx - 1)
    if image is None:
        return self.renderToken(tokens, idx, options, env)
    title = str(image.attrGet("title") or "")
    caption = f"<figcaption>{markdown().renderInline(title)}</figcaption>\n" if title else ""
    return f"{caption}</figure>\n"


def _render_image(self, tokens: list[Token], idx: int, options, env) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    # an image alone in its paragraph is a figure whose caption is the title; elsewhere the title is a tooltip
    alone = all(t is token or (t.type == "text" and not t.content.strip()) for t in tokens)
    title = token.attrGet("title")
    tip = "" if title is None or alone else f' title="{html.escape(str(title))}"'
    return f'<img src="{html.escape(str(token.attrGet("src") or ""))}" alt="{html.escape(alt)}"{tip} loading="lazy">'


def _render_admonition_open(self, tokens: list[Token], idx: int, options, env) -> str:
    # an admonition is an aside to the text; role=note tells screen readers so
    return f'<aside class="{html.escape(tokens[idx].attrGet("class") or "admonition")}" role="note">\n'


def _render_admonition_close(self, tokens, idx, options, env) -> str:
    return "</aside>\n"


@lru_cache(maxsize=1)
def markdown() -> MarkdownIt:
    """Return the configured parser (built once; markdown-it parsers are reusable)."""
    md = (
        MarkdownIt("commonmark", {"html": False, "typographer": False})
        .enable("table")
        .use(front_matter_plugin)
        .use(admon_plugin)
        .use(anchors_plugin, min_level=2, max_level=4)
    )
    md.add_render_rule("fence", _render_fence)
    md.add_render_rule("paragraph_open", _render_paragraph_open)
    md.add_render_rule("paragraph_close", _render_paragraph_close)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("admonition_open", _render_admonition_open)
    md.add_render_rule("admonition_close", _render_admonition_close)
    return md


def _inline_text(token: Token) -> str:
    return "".join(c.content for c in token.children or [] if c.type in ("text", "code_inline"))


def _link_line(inline: Token, href: str, lines: list[str]) -> int:
    """Return the 1-based source line of a link inside an inline block (the block's first line if not found)."""
    start, end = inline.map or (0, 1)
    for number in range(start, min(end, len(lines))):
        if f"]({href}" in lines[number] or f"<{href}>" in lines[number]:
            return number + 1
    return start + 1


def collect_facts(tokens: list[Token], source: str) -> Facts:
    """Gather headings, links, code blocks, directives and front matter from a token stream."""
    facts, lines = Facts(), source.splitlines()
    for i, tok in enumerate(tokens):
        line = tok.map[0] + 1 if tok.map else 0
        if tok.type == "front_matter":
            facts.front_matter = (tok.content, line)
        elif tok.type == "heading_open":
            inline = tokens[i + 1]
            facts.headings.append(Heading(int(tok.tag[1]), str(tok.attrGet("id") or ""), _inline_text(inline), line))
        elif tok.type == "fence":
            directive = DIRECTIVE.match(tok.info.strip())
            if directive:
                facts.directives.append((directive["name"], directive["arg"].strip(), line))
            else:
                lang, flags = parse_info(tok.info)
                facts.code_blocks.append(CodeBlock(lang, tok.content, line, RUNNABLE_FLAG in flags,
                                                   frozenset(flags)))
        elif tok.type == "code_block":
            facts.code_blocks.append(CodeBlock("", tok.content, line, False))
        elif tok.type == "inline":
            for child in tok.children or []:
                if child.type == "link_open":
                    href = str(child.attrGet("href") or "")
                    facts.links.append((href, _link_line(tok, href, lines)))
                elif child.type == "image":
                    src = str(child.attrGet("src") or "")
                    facts.images.append((src, child.content.strip(), _link_line(tok, src, lines)))
    return facts


def parse(source: str) -> tuple[list[Token], Facts]:
    """Parse a Markdown document; return its tokens and the facts the validator checks."""
    tokens = markdown().parse(source, {})
    return tokens, collect_facts(tokens, source)


def render_tokens(tokens: list[Token]) -> str:
    """Render parsed tokens to HTML (front matter renders to nothing)."""
    md = markdown()
    return md.renderer.render(tokens, md.options, {})  # a fresh env: runnable blocks are numbered from 1


def split_parts(rendered: str) -> list[tuple[str, str]]:
    """Split rendered HTML at markers into ("html", text), ("exercise", slug) and ("block", number) parts."""
    parts: list[tuple[str, str]] = []
    pos = 0
    for m in PART_MARKER.finditer(rendered):
        if rendered[pos:m.start()].strip():
            parts.append(("html", rendered[pos:m.start()]))
        parts.append((m.group(1), m.group(2)))
        pos = m.end()
    if rendered[pos:].strip():
        parts.append(("html", rendered[pos:]))
    return parts


@lru_cache(maxsize=256)
def render_inline_markdown(source: str) -> str:
    """Render one line of Markdown (code spans, emphasis, links) to HTML without a paragraph around it."""
    return markdown().renderInline(source)


@lru_cache(maxsize=256)
def render_markdown(source: str) -> str:
    """Render a short Markdown text (an exercise prompt) to HTML; directives and block markers are dropped."""
    return PART_MARKER.sub("", render_tokens(markdown().parse(source, {})))
