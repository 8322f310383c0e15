"""``freehours serve`` as a process: its stderr is JSON lines only, a canonical line per request
in the trace of the traceparent the request came with, and the server span exported for it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import PLAN
from tests.servers import FREEHOURS, free_port, freehours, wait_until_up

pytestmark = pytest.mark.slow

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


def test_serve_logs_json_lines_and_exports_the_requests_span_in_its_callers_trace(
    tmp_path: Path,
) -> None:
    clean = {name: value for name, value in os.environ.items() if not name.startswith("FREEHOURS_")}
    env = clean | {"FREEHOURS_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}"}
    key = freehours("keys", "create", "--scope", "admin", env=env)
    port = free_port()
    stderr = tmp_path / "serve.err"
    with stderr.open("wb") as err:
        server = subprocess.Popen(
            [FREEHOURS, "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env | {"FREEHOURS_TRACES": "console"},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, server)
        answer = httpx.put(
            f"{url}/v1/plans/test-nsw",
            json=PLAN,
            headers={
                "Authorization": f"Bearer {key}",
                "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01",
            },
        )
        assert answer.status_code == 200
        metrics = httpx.get(f"{url}/metrics").text
    finally:
        server.terminate()
        server.wait(timeout=30)

    assert (
        'freehours_http_requests_total{method="PUT",route="/v1/plans/{plan_id}",status="200"} 1.0'
        in metrics
    )
    lines: list[dict[str, Any]] = [json.loads(line) for line in stderr.read_text().splitlines()]
    (line,) = [
        line
        for line in lines
        if line.get("event") == "request_finished" and line["method"] == "PUT"
    ]
    assert (line["route"], line["status"], line["level"], line["trace_id"]) == (
        "/v1/plans/{plan_id}",
        200,
        "info",
        TRACE_ID,
    )
    (span,) = [line for line in lines if line.get("name") == "PUT /v1/plans/{plan_id}"]
    assert span["kind"] == "SpanKind.SERVER"
    assert span["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert span["context"]["span_id"] == f"0x{line['span_id']}"
    assert span["parent_id"] == f"0x{CLIENT_SPAN}"
    assert span["resource"]["attributes"]["service.name"] == "freehours-api"
