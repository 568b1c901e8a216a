"""HTTP tests against the real app: the index, every lesson page, the 404 page, assets."""

from __future__ import annotations

import re
import shutil

import pytest

LESSON_SLUGS = ["cpu-gpu-border", "picking-a-device", "training-loop", "will-it-fit",
                 "multi-gpu-and-distributed"]  # in course order


def test_index_lists_the_lessons_in_order(site_client):
    page = site_client.get("/")
    assert page.status_code == 200
    hrefs = re.findall(r'<h3><a href="/lessons/([a-z0-9-]+)">', page.text)
    assert hrefs == LESSON_SLUGS


@pytest.mark.parametrize("slug", LESSON_SLUGS)
def test_lesson_renders_toc_anchors_code_and_links(site_client, slug):
    page = site_client.get(f"/lessons/{slug}")
    assert page.status_code == 200, page.text[:500]
    html = page.text
    toc = re.search(r'<nav id="toc".*?</nav>', html, re.S).group(0)
    targets = re.findall(r'href="#([^"]+)"', toc)
    assert len(targets) >= 3
    for anchor in targets:  # every TOC entry lands on an element of the page
        assert f'id="{anchor}"' in html, anchor
    assert '<div class="highlight"><pre tabindex="0"><span></span><code>' in html  # Pygments, server side
    assert re.search(r'<span class="k[nw]?">import</span>|<span class="kn">from</span>', html)
    links = re.search(r'<section id="external-links".*?</section>', html, re.S).group(0)
    assert len(re.findall(r'<a href="https://', links)) >= 2
    assert '<nav id="lesson-nav"' in html


def test_lessons_chain_previous_and_next(site_client):
    first = site_client.get(f"/lessons/{LESSON_SLUGS[0]}").text
    last = site_client.get(f"/lessons/{LESSON_SLUGS[-1]}").text
    assert f'href="/lessons/{LESSON_SLUGS[1]}" rel="next"' in first and 'rel="prev"' not in first
    assert f'href="/lessons/{LESSON_SLUGS[-2]}" rel="prev"' in last


def test_lessons_place_their_exercises(site_client):
    expected = {"cpu-gpu-border": ["same-device", "bring-it-back"],
                "picking-a-device": ["pick-device", "runs-on-a-mac"],
                "training-loop": ["model-internals", "fast-loop", "training-loop"]}
    for slug, exercises in expected.items():
        html = site_client.get(f"/lessons/{slug}").text
        assert re.findall(r'class="exercise-panel[^"]*" id="exercise-([a-z-]+)"', html) == exercises


def test_unknown_lesson_is_a_friendly_404(site_client):
    page = site_client.get("/lessons/no-such-lesson")
    assert page.status_code == 404
    assert "Page not found" in page.text and 'href="/"' in page.text
    assert "no-such-lesson" in page.text


def test_unknown_page_is_html_for_browsers_and_json_otherwise(site_client, html_headers):
    assert "Page not found" in site_client.get("/nope", headers=html_headers).text
    assert site_client.get("/nope", headers={"accept": "application/json"}).json() == {"detail": "Not Found"}


def test_every_asset_is_local(site_client):
    """No CDN: every src/href of every page points into this site."""
    for path in ["/", *(f"/lessons/{s}" for s in LESSON_SLUGS)]:
        html = site_client.get(path).text
        for attr in re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', html):
            assert attr.startswith("/"), f"{path} loads {attr}"
            assert site_client.get(attr).status_code == 200, attr


def test_pages_have_landmarks_and_a_skip_link(site_client):
    html = site_client.get(f"/lessons/{LESSON_SLUGS[0]}").text
    assert '<a class="skip-link" href="#main">' in html and '<main id="main"' in html
    assert '<html lang="en">' in html and 'name="viewport"' in html
    levels = [int(n) for n in re.findall(r"<h([1-6])[ >]", html)]
    assert levels[0] == 1 and levels.count(1) == 1
    assert all(b <= a + 1 for a, b in zip(levels, levels[1:])), levels


def test_fixture_course_renders_directive_admonition_and_panel(fixture_client):
    html = fixture_client.get("/lessons/first-steps").text
    panel = re.search(r'<section class="exercise-panel" id="exercise-demo-move".*?</section>', html, re.S).group(0)
    assert "Move the tensor" in panel and "<strong>the chosen device</strong>" in panel  # prompt as Markdown
    assert "torch.ones(2)" in panel  # the starter code is shown
    assert '<aside class="admonition tip" role="note">' in html
    assert "tested on a CPU and an H100" in html and 'id="block-1"' in html
    assert 'href="/lessons/second-steps#the-end"' in html
    assert '<li class="toc-level-3"><a href="#a-sub-section">' in html


def test_static_serves_assets_but_not_the_editor_sources(site_client):
    assert site_client.get("/static/editor/codemirror-6.0.2.bundle.js").status_code == 200
    for path in ["editor-src/editor.js", "editor-src/package.json", "./editor-src/build.mjs",
                 "css/../editor-src/editor.js"]:
        assert site_client.get(f"/static/{path}").status_code == 404, path


def test_each_app_renders_with_its_own_templates(tmp_path, make_site_settings, fixtures_dir):
    """The Jinja environment belongs to the app: a second app with other templates does not change the first."""
    from fastapi.testclient import TestClient

    from app.core.config import ROOT
    from app.main import create_app

    mine = tmp_path / "templates"
    shutil.copytree(ROOT / "templates", mine)
    (mine / "errors" / "404.html").write_text("custom four-oh-four")
    plain = create_app(make_site_settings(tmp_path / "a", fixtures_dir / "good"))
    custom = create_app(make_site_settings(tmp_path / "b", fixtures_dir / "good").model_copy(
        update={"templates_dir": mine}))
    with TestClient(plain) as first, TestClient(custom) as second:
        assert second.get("/lessons/nope").text == "custom four-oh-four"
        assert "Page not found" in first.get("/lessons/nope").text
    plain.state.db.dispose()
    custom.state.db.dispose()
