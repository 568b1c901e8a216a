"""Build the FastAPI application from one Settings object."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.config import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Create the site: routers, static files, middleware, and the runner's lifespan."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # Start-up: things that need the event loop (the sandbox runner) are started here and stopped after.
        yield

    app = FastAPI(title="Devices and Tensor Placement", lifespan=lifespan)
    app.state.settings = settings
    return app
