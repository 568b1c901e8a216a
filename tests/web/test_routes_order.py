"""The routers' order in app/main.py (ROUTERS) is chosen for speed: the busiest first. That is only safe while no
path can be answered by routes of two routers, for then the order decides which route wins (or whether a request
gets a 405 from one router's route instead of the other's answer)."""

from __future__ import annotations

import itertools

from starlette.routing import BaseRoute

from app.main import ROUTERS


def _segments(route: BaseRoute) -> list[str]:
    return route.path.strip("/").split("/")


def _paths_like(route: BaseRoute, other: BaseRoute) -> set[str]:
    """Concrete paths `route` matches, its parameters filled with `other`'s literal segments where it has them:
    the paths on which the two could meet."""
    mine, theirs = _segments(route), _segments(other)
    paths = set()
    for filler in ("x", "1"):
        parts = [theirs[i] if s.startswith("{") and i < len(theirs) and not theirs[i].startswith("{")
                 else filler if s.startswith("{") else s for i, s in enumerate(mine)]
        paths |= {"/" + "/".join(parts), "/" + "/".join(parts) + "/"}
    return paths


def test_no_path_is_matched_by_two_routers():
    owned = [(n, route) for n, router in enumerate(ROUTERS) for route in router.routes]
    shared = []
    for (n, route), (m, other) in itertools.permutations(owned, 2):
        if n == m:
            continue
        for path in _paths_like(route, other):
            if route.path_regex.match(path) and other.path_regex.match(path):
                shared.append((path, route.path, other.path))
    assert not shared, f"paths two routers both match (their order in ROUTERS now decides): {sorted(shared)[:10]}"

