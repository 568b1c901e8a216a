"""Redirects never come from the Host header, which the sender controls: an address that is a page but for its
trailing slash is redirected with a path only, so a forged Host cannot send a browser to another site."""

from __future__ import annotations

import pytest

EVIL = {"host": "evil.example"}


@pytest.mark.parametrize("path, location", [("/instructor/", "/instructor"), ("/progress/", "/progress"),
                                            ("/api/me/", "/api/me"), ("/account/?tab=x", "/account?tab=x")])
def test_a_trailing_slash_redirects_to_the_page_by_path_only(client, path, location):
    response = client.get(path, headers=EVIL, follow_redirects=False)

    assert response.status_code == 307
    assert response.headers["location"] == location
    assert client.get(path, follow_redirects=True).status_code in (200, 401)  # it lands on the real page


def test_the_lesson_page_behind_a_slash_is_reached(client, app):
    slug = app.state.course.lessons[0].slug
    response = client.get(f"/lessons/{slug}/", headers=EVIL, follow_redirects=False)
    assert (response.status_code, response.headers["location"]) == (307, f"/lessons/{slug}")


@pytest.mark.parametrize("path", ["/\\evil.example/", "/no-such-page/", "/lessons/nope"])
def test_no_redirect_leaves_the_site_or_invents_a_page(client, path):
    response = client.get(path, headers=EVIL, follow_redirects=False)

    assert response.status_code == 404, response.headers.get("location")
    assert "evil.example" not in response.headers.get("location", "")
