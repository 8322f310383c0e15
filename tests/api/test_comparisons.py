"""``POST /v1/comparisons``: the same figures as ``freehours compare`` for the same file and
plans, the stored offers with ``offers=true``, and what cannot be compared refused."""

from __future__ import annotations

import io
import json
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from freehours.api.routes import comparisons
from freehours.cli import app
from freehours.meterdata.writer import write_nem12
from tests.api.conftest import Api
from tests.api.test_offers import cdr, put
from tests.domain.rating_cases import flat, nem_day


def nem12_bytes() -> bytes:
    out = io.StringIO(newline="")
    write_nem12([nem_day(date(2026, 7, d), flat("0.75")) for d in (1, 2, 3)], out)
    return out.getvalue().encode()


def test_the_api_compares_as_the_command_does(api: Api, tmp_path: Path) -> None:
    body = nem12_bytes()
    answer = api.client.post(
        "/v1/comparisons",
        content=body,
        params=[("plan", "sso-nsw"), ("plan", "mps-vic")],
        headers=api.auth("read"),
    )
    assert answer.status_code == 200, answer.text
    (meter,) = answer.json()["items"]
    assert [row["rank"] for row in meter["plans"]] == [1, 2]
    path = tmp_path / "meter.csv"
    path.write_bytes(body)
    command = CliRunner().invoke(
        app,
        [
            "compare",
            "--nem12",
            str(path),
            "--plan",
            "sso-nsw",
            "--plan",
            "mps-vic",
            "--format",
            "json",
        ],
    )
    assert json.loads(command.stdout)[0] == meter  # figure for figure


def test_offers_are_compared_and_the_bad_refused(api: Api) -> None:
    assert put(api, "EXA-SEQ-SR", cdr("single-rate.json")).status_code == 200
    read = api.auth("read")
    answer = api.client.post(
        "/v1/comparisons", content=nem12_bytes(), params={"offers": "true"}, headers=read
    )
    assert answer.status_code == 200, answer.text
    assert [row["plan_id"] for row in answer.json()["items"][0]["plans"]] == ["EXA-SEQ-SR"]
    unknown = api.client.post(
        "/v1/comparisons", content=nem12_bytes(), params={"plan": "nope"}, headers=read
    )
    assert unknown.status_code == 422
    assert unknown.json()["type"].endswith("/problems/unknown-plan")
    bad = nem12_bytes().replace(b",0.75,", b",0.7x,", 1)
    refused = api.client.post("/v1/comparisons", content=bad, headers=read)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("upload:")
    too_many = [("plan", "sso-nsw")] * 1 + [("plan", f"p{n}") for n in range(50)]
    assert (
        api.client.post("/v1/comparisons", content=b"x", params=too_many, headers=read).status_code
        == 422
    )
    big = b"x" * (api.services.settings.max_upload_bytes + 1)
    assert api.client.post("/v1/comparisons", content=big, headers=read).status_code == 413
    assert api.client.post("/v1/comparisons", content=nem12_bytes()).status_code == 401


def test_more_data_than_a_comparison_keeps_is_413(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(comparisons, "MAX_COMPARED_VALUES", 100)  # the file has 3 x 48
    answer = api.client.post("/v1/comparisons", content=nem12_bytes(), headers=api.auth("read"))
    assert answer.status_code == 413
    assert "more than 100 interval values" in answer.json()["detail"]
