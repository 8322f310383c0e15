"""``freehours webhooks``: an endpoint added (its secret printed once), listed, its deliveries and
their attempts shown, a delivery replayed, the secret rotated, the endpoint disabled and enabled."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from freehours.settings import get_settings
from freehours.store.database import Store
from freehours.store.webhooks import NewEvent
from tests.support import run_flat

output = run_flat


def test_webhooks_commands(
    database: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = output(
        monkeypatch, capsys, "webhooks", "add", "https://a.example/h", "--event", "quota.completed"
    )
    assert code == 0
    endpoint, secret = out.split()
    assert endpoint.startswith("ep_")
    assert secret.startswith("whsec_")
    code, _, err = output(monkeypatch, capsys, "webhooks", "add", "ftp://x", "--event", "quota.x")
    assert code != 0
    assert "url: must be http or https" in err

    code, out, _ = output(monkeypatch, capsys, "webhooks", "list")
    assert code == 0
    assert endpoint in out
    assert "https://a.example/h" in out
    assert "quota.completed" in out

    with database.write() as unit:
        (ident,) = unit.webhooks.publish([NewEvent("quota.completed", datetime.now(UTC), {})])
        # Its fan-out job's work, at once.
        unit.webhooks.fan_out([ident], {"quota.completed": [endpoint]})
        (delivery,) = unit.webhooks.deliveries()
    code, out, _ = output(monkeypatch, capsys, "webhooks", "deliveries", endpoint)
    assert code == 0
    assert ident in out
    assert "pending" in out

    code, _, err = output(monkeypatch, capsys, "webhooks", "replay", str(delivery.id))
    assert code == 0
    assert f"delivery {delivery.id} ({ident}) pending again" in err
    code, _, err = output(monkeypatch, capsys, "webhooks", "replay", "999")
    assert code != 0
    assert "no webhook delivery 999" in err

    code, out, _ = output(monkeypatch, capsys, "webhooks", "rotate-secret", endpoint)
    assert code == 0
    assert out.strip().startswith("whsec_")
    assert out.strip() != secret

    assert output(monkeypatch, capsys, "webhooks", "disable", endpoint)[0] == 0
    (listed,) = json.loads(output(monkeypatch, capsys, "webhooks", "list")[1])
    assert (listed["enabled"], listed["disabled_reason"]) == (False, "disabled through the API")
    table = output(monkeypatch, capsys, "webhooks", "list", "--format", "table")[1]
    assert "no: disabled through the API" in table
    assert output(monkeypatch, capsys, "webhooks", "enable", endpoint)[0] == 0
    code, _, err = output(monkeypatch, capsys, "webhooks", "enable", "ep_nope")
    assert code != 0
    assert "no webhook endpoint 'ep_nope'" in err


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:5432/", "url: loopback addresses are refused"),
        ("http://2130706433/", "url: loopback addresses are refused"),
        ("http://169.254.169.254/", "url: link-local"),
        ("http://" + "a" * 64 + ".example/", "url: the host is not a valid IDNA name"),
        ("http://user@a.example/", "url: must not carry credentials"),
    ],
)
def test_a_url_refused_is_a_named_error(
    database: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    url: str,
    reason: str,
) -> None:
    code, out, err = output(
        monkeypatch, capsys, "webhooks", "add", url, "--event", "quota.completed"
    )
    assert code != 0
    assert out == ""
    assert reason in err
    with database.read() as unit:
        assert unit.webhooks.endpoints() == []


def test_a_private_address_allowed_by_the_setting(
    database: Store,
    clean_env: pytest.MonkeyPatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clean_env.setenv("FREEHOURS_WEBHOOK_ALLOWED_NETWORKS", "10.20.0.0/16")
    get_settings.cache_clear()
    add = ("webhooks", "add", "--event", "quota.completed")
    assert output(monkeypatch, capsys, *add, "http://10.20.1.2:8080/hooks")[0] == 0
    code, _, err = output(monkeypatch, capsys, *add, "http://10.21.1.2/hooks")
    assert code != 0
    assert "url: private addresses are refused" in err
