"""`course serve`: the web site and everything one machine needs, under uvicorn."""

from __future__ import annotations

import sys

import click

from app.cli.terminal import echo
from app.content.schema import ContentInvalid
from app.core.config import get_settings

# seconds uvicorn waits for open connections (live output streams) before it closes them on shutdown
GRACEFUL_SHUTDOWN_S = 5


def _refuse(errors) -> None:
    for error in errors:
        echo(str(error), err=True)
    click.echo(f"course serve: refusing to start, the content has {len(errors)} error(s) (`course check` lists "
               "them too); fix them, or use --reload to see them in the browser while you edit", err=True)
    sys.exit(1)


def _check_gpus(settings) -> None:
    """Refuse to start, in one line, when COURSE_GPU_DEVICES names GPUs this host does not have."""
    from app.sandbox.gpus import GpuConfigError, resolve

    try:
        resolve(settings.gpu_devices, str(settings.sandbox_gpu_dev_root))
    except GpuConfigError as exc:
        click.echo(f"course serve: refusing to start: {exc}", err=True)
        sys.exit(2)


@click.command()
@click.option("--host", default=None, help="Address to listen on (default: COURSE_HOST, 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to listen on (default: COURSE_PORT, 8000).")
@click.option("--reload", is_flag=True,
              help="Re-read lessons/, exercises/ and templates/ on every change; show content errors as a page.")
def serve(host: str | None, port: int | None, reload: bool) -> None:
    """Serve the course (web + embedded runner) on one machine."""
    import uvicorn

    from app.main import create_app

    settings = get_settings()
    _check_gpus(settings)
    try:
        app = create_app(settings, watch_content=reload)
    except ContentInvalid as exc:  # production: content is parsed once and must be right
        _refuse(exc.errors)
    if app.state.course.errors and not reload:
        _refuse(app.state.course.errors)
    uvicorn.run(app, **uvicorn_options(settings, host=host or settings.host, port=port or settings.port))


def uvicorn_options(settings, *, host: str, port: int) -> dict:
    """Return uvicorn's options for the site: X-Forwarded-For is read only from COURSE_TRUSTED_PROXIES' peers.

    uvicorn's own default trusts 127.0.0.1, so any local process could name the client address the rate limits
    count; with no trusted proxy configured the proxy headers are not read at all.
    """
    return {"host": host, "port": port, "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S, "log_level": "info",
            "proxy_headers": bool(settings.trusted_proxies), "forwarded_allow_ips": settings.trusted_proxies}
