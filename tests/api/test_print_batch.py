"""GET /v1/invoice-runs/{run_id}/print-batch.csv and .pdf: a run's print batch (admin)."""

from __future__ import annotations

from tests.api.conftest import Api
from tests.invoicing.test_print_batch import posted_run


def test_the_batch_through_the_api(api: Api) -> None:
    system, numbers = posted_run(api.services.store)
    run = system.documents()[0].run_id
    admin, read = api.auth("admin"), api.auth("read")
    url = f"/v1/invoice-runs/{run}/print-batch"
    assert api.client.get(f"{url}.csv", headers=read).status_code == 403  # names, addresses
    manifest = api.client.get(f"{url}.csv", headers=admin)
    assert manifest.status_code == 200
    assert manifest.headers["content-type"].startswith("text/csv")
    assert manifest.headers["X-Print-Parts"] == "1"
    assert numbers["pat"] in manifest.text
    part = api.client.get(f"{url}.pdf?part=1", headers=admin)
    assert part.status_code == 200
    assert part.content.startswith(b"%PDF")
    missing = api.client.get(f"{url}.pdf?part=2", headers=admin)
    assert missing.status_code == 404
    assert missing.json()["type"].endswith("/print-part-not-found")
    assert api.client.get(f"{url}.pdf?part=0", headers=admin).status_code == 422
    unknown = api.client.get("/v1/invoice-runs/nope/print-batch.csv", headers=admin)
    assert unknown.status_code == 404
