"""The /static mount: static/ as browsers need it, without the folders that are sources rather than assets."""

from __future__ import annotations

from pathlib import PurePath

from fastapi.staticfiles import StaticFiles

# top-level folders of static/ that are never served: the editor's npm project (its build writes static/editor/)
PRIVATE_DIRS = frozenset({"editor-src"})


class PublicStaticFiles(StaticFiles):
    """StaticFiles that answer 404 for anything under a folder named in PRIVATE_DIRS."""

    def lookup_path(self, path: str):
        """Find a file as StaticFiles does, except under a private folder (`path` is already normalised)."""
        parts = PurePath(path).parts
        if parts and parts[0] in PRIVATE_DIRS:
            return "", None
        return super().lookup_path(path)
