"""A run's stream sends its events' data as JSON text made once (app/web/routes/exercises.py's sse_event): the same
bytes FastAPI's own encoding gives, and FastAPI's way still for data that is not plain JSON."""

from __future__ import annotations

import json
import math

from fastapi.encoders import jsonable_encoder
from fastapi.sse import format_sse_event

from app.web.routes.exercises import SSE_RETRY_MS, sse_event

VERDICT = {"exercise": "training-loop", "status": "passed", "checks": [{"id": "a", "passed": True, "why": "é ✓"}],
           "timeline": {"rows": [[0, 1.5, "kernel"]], "machine": None}, "duration_ms": 12, "stdout": "x\ny\n"}


def wire(event) -> bytes:
    data = event.raw_data if event.raw_data is not None else json.dumps(jsonable_encoder(event.data))
    return format_sse_event(data_str=data, event=event.event, id=event.id, retry=event.retry)


def test_plain_json_data_is_sent_as_text_made_once_with_the_bytes_fastapi_would_send():
    event = sse_event("7", "verdict", VERDICT)
    assert event.raw_data is not None and event.data is None
    assert event.raw_data == json.dumps(jsonable_encoder(VERDICT))
    assert "\n" not in event.raw_data  # one data: line, as FastAPI's
    assert wire(event) == format_sse_event(data_str=json.dumps(jsonable_encoder(VERDICT)), event="verdict", id="7",
                                           retry=SSE_RETRY_MS)


def test_data_that_is_not_plain_json_takes_fastapis_way():
    event = sse_event(None, "output", {"value": math.nan})
    assert event.raw_data is None and event.data == {"value": math.nan}
