"""The console's actions through its forms: each confirmed, done exactly once, in the audit log
with the state before and after, refused to a read-only key and to a form without its CSRF
token, and answered 409 (nothing done) when the state changed meanwhile."""

from __future__ import annotations

import threading

import pytest

from freehours.domain.settlement import QuotaStatus
from freehours.jobs.job import JobState
from freehours.operations.actions import Operator
from tests.api.conftest import Api
from tests.console.conftest import ORIGIN, csrf_of, sign_in
from tests.console.support import DAY, NMI, aborted_quota, discarded_job, waiting_job
from tests.mail.test_delivery import JANE, invoiced


def _confirm_and_post(api: Api, path: str, **fields: str) -> tuple[str, int, str]:
    """Open the action's confirmation page, then send its form: the page, the answer's status
    and its text."""
    page = api.client.get(path)
    assert page.status_code == 200, page.text
    assert "Confirm" in page.text
    answer = api.client.post(
        path.partition("?")[0], data={"csrf_token": csrf_of(page.text), **fields}, headers=ORIGIN
    )
    return page.text, answer.status_code, answer.text


def _audit(api: Api, target: str) -> list[dict[str, object]]:
    items = api.client.get("/v1/audit", params={"target": target}, headers=api.auth("read"))
    assert items.status_code == 200
    return list(items.json()["items"])


def test_retry_makes_a_new_job_once_and_leaves_the_discarded_one(admin: Api) -> None:
    runtime = admin.services.runtime
    aborted_quota(runtime)
    doomed = discarded_job(runtime)
    _, status, text = _confirm_and_post(admin, f"/console/jobs/{doomed}/retry")
    assert status == 200, text
    with runtime.store.read() as unit:
        old = unit.jobs.get(doomed)
        jobs = unit.jobs.page(kind="settle", key=f"{NMI}:{DAY}", limit=10)
        quota = unit.quotas.latest(NMI, DAY)
    assert old is not None
    assert old.state is JobState.DISCARDED  # kept as it was: the record of what failed
    (new,) = [job for job in jobs if job.id != doomed]
    assert new.state is JobState.AVAILABLE
    assert (new.payload, new.max_attempts, new.attempts) == (old.payload, old.max_attempts, 0)
    assert f"retried as job {new.id}" in text
    # The quota it works on is not reset: its attempts are its own.
    assert quota is not None
    assert (quota.status, quota.attempts, quota.fence) == (QuotaStatus.ABORTED, 5, 5)
    (entry,) = _audit(admin, f"job:{doomed}")
    assert (entry["action"], entry["outcome"], entry["key_name"]) == ("job.retry", "done", "admin")
    assert entry["before"]["state"] == "DISCARDED"  # type: ignore[index]
    assert entry["after"]["retried_as"] == new.id  # type: ignore[index]
    # The same button again: a conflict, and no third job.
    _, again, said = _confirm_and_post(admin, f"/console/jobs/{doomed}/retry")
    assert again == 409
    assert f"retried already, as job {new.id}" in said
    with runtime.store.read() as unit:
        assert len(unit.jobs.page(kind="settle", key=f"{NMI}:{DAY}", limit=10)) == 2
    assert [e["outcome"] for e in _audit(admin, f"job:{doomed}")] == ["conflict", "done"]


def test_two_operators_retrying_at_once_make_one_job(admin: Api) -> None:
    runtime = admin.services.runtime
    doomed = discarded_job(runtime)
    actions = admin.services.actions
    outcomes = []
    barrier = threading.Barrier(4)

    def press(n: int) -> None:
        barrier.wait()
        outcomes.append(actions.retry_job(Operator(f"key_{n}", f"operator {n}"), doomed))

    threads = [threading.Thread(target=press, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcome.done for outcome in outcomes) == [False, False, False, True]
    with runtime.store.read() as unit:
        assert len(unit.jobs.page(kind="settle", key=f"{NMI}:{DAY}", limit=10)) == 2


def test_only_a_discarded_job_is_retried(admin: Api) -> None:
    waiting = waiting_job(admin.services.runtime)
    _, status, text = _confirm_and_post(admin, f"/console/jobs/{waiting}/retry")
    assert status == 409
    assert "is AVAILABLE: only a DISCARDED job is retried" in text


def test_cancel_ends_a_waiting_job_and_not_a_finished_one(admin: Api) -> None:
    runtime = admin.services.runtime
    waiting = waiting_job(runtime)
    _, status, text = _confirm_and_post(admin, f"/console/jobs/{waiting}/cancel")
    assert status == 200, text
    with runtime.store.read() as unit:
        job = unit.jobs.get(waiting)
    assert job is not None
    assert job.state is JobState.CANCELLED
    (entry,) = _audit(admin, f"job:{waiting}")
    assert (entry["before"]["state"], entry["after"]["state"]) == ("AVAILABLE", "CANCELLED")  # type: ignore[index]
    _, again, said = _confirm_and_post(admin, f"/console/jobs/{waiting}/cancel")
    assert again == 409
    assert "is CANCELLED" in said


def test_reopen_makes_the_next_version_and_its_job(admin: Api) -> None:
    runtime = admin.services.runtime
    aborted_quota(runtime)
    page = admin.client.get(f"/console/quotas/{NMI}/{DAY}")
    assert "Reopen as version 2" in page.text
    _, status, text = _confirm_and_post(
        admin,
        f"/console/quotas/{NMI}/{DAY}/reopen?version=1",
        version="1",
        reason="  the meter data service is back \n",
    )
    assert status == 200, text
    assert "reopened as version 2" in text
    with runtime.store.read() as unit:
        quota = unit.quotas.latest(NMI, DAY)
        (job,) = unit.jobs.page(kind="settle", key=f"{NMI}:{DAY}", limit=10)
    assert quota is not None
    assert (quota.version, quota.status, quota.attempts) == (2, QuotaStatus.PENDING, 0)
    assert quota.reason == "reopened: the meter data service is back"
    assert job.payload == {"nmi": NMI, "date": DAY.isoformat(), "version": 2}
    (entry,) = _audit(admin, f"quota:{NMI}:{DAY}")
    assert entry["reason"] == "the meter data service is back"
    assert entry["before"]["status"] == "ABORTED"  # type: ignore[index]
    assert entry["after"]["version"] == 2  # type: ignore[index]
    # The page the operator had open still says version 1: sent again, it is a conflict.
    _, again, said = _confirm_and_post(
        admin, f"/console/quotas/{NMI}/{DAY}/reopen?version=1", version="1", reason="again"
    )
    assert again == 409
    assert "is at version 2 now (PENDING), not 1" in said
    with runtime.store.read() as unit:
        assert unit.quotas.latest(NMI, DAY).version == 2  # type: ignore[union-attr]


def test_reopen_needs_a_reason(admin: Api) -> None:
    aborted_quota(admin.services.runtime)
    _, status, text = _confirm_and_post(
        admin, f"/console/quotas/{NMI}/{DAY}/reopen?version=1", version="1", reason="   "
    )
    assert status == 422
    assert "reason: say why" in text
    with admin.services.store.read() as unit:
        assert unit.quotas.latest(NMI, DAY).version == 1  # type: ignore[union-attr]


def test_revoke_stops_the_key_and_ends_its_sessions(admin: Api) -> None:
    other = admin.client.__class__(admin.client.app, base_url="http://testserver")
    sign_in(other, admin.keys["read"])
    assert other.get("/console/", follow_redirects=False).status_code == 200
    keys = admin.client.get("/console/keys")
    with admin.services.store.read() as unit:
        read_id = next(key.id for key in unit.keys.every() if key.name == "read")
    assert f"/console/keys/{read_id}/revoke" in keys.text
    _, status, text = _confirm_and_post(admin, f"/console/keys/{read_id}/revoke")
    assert status == 200, text
    assert "1 console session(s) ended" in text
    assert other.get("/console/", follow_redirects=False).status_code == 303
    _, again, said = _confirm_and_post(admin, f"/console/keys/{read_id}/revoke")
    assert again == 409
    assert "revoked already" in said


def test_a_document_is_resent_by_email_from_the_invoices_page(admin: Api) -> None:
    system, emailed, posted = invoiced(admin.services.store)
    numbers = {d.nmi: d.number for d in system.documents()}
    with admin.services.store.write() as unit:  # the first send went: it may be sent again
        (first,) = unit.mail.of_document(numbers[emailed])
        unit.mail.sent(first.id, code=250, at=system.clock.now())
    page = admin.client.get("/console/invoices")
    assert f"/console/invoices/{numbers[emailed]}/resend" in page.text
    assert f"/console/invoices/{numbers[posted]}/resend" not in page.text  # post: no email
    _, status, text = _confirm_and_post(admin, f"/console/invoices/{numbers[emailed]}/resend")
    assert status == 200, text
    assert "queued to be sent again" in text
    with admin.services.store.read() as unit:
        sends = unit.mail.of_document(numbers[emailed])
    assert [(d.sequence, d.status.value) for d in sends] == [(1, "sent"), (2, "queued")]
    (entry,) = _audit(admin, f"document:{numbers[emailed]}")
    assert (entry["action"], entry["outcome"]) == ("document.resend", "done")
    assert JANE.email not in text
    # A customer who chose post has no email to resend: nothing done, said why.
    _, refused, said = _confirm_and_post(admin, f"/console/invoices/{numbers[posted]}/resend")
    assert refused == 409
    assert "no email delivery" in said
    assert admin.client.get("/console/invoices/not%20a%20number/resend").status_code == 422


def test_a_customers_page_links_are_revoked_from_their_documents(admin: Api) -> None:
    """The invoices page of one customer (filtered by NMI) offers to revoke the links to
    their own page, as ``DELETE /v1/customers/{nmi}/page`` does: audited, the link refused."""
    store = admin.services.store
    system, emailed, _ = invoiced(store)
    with store.write() as unit:
        page_id = unit.pages.page_for(emailed, at=system.clock.now())
    assert f"/customers/{emailed}/page" not in admin.client.get("/console/invoices").text
    listed = admin.client.get(f"/console/invoices?nmi={emailed}")
    assert f"/console/customers/{emailed}/page/revoke" in listed.text
    _, status, text = _confirm_and_post(admin, f"/console/customers/{emailed}/page/revoke")
    assert status == 200, text
    assert "links stopped opening" in text
    with store.read() as unit:
        assert unit.pages.nmi_of(page_id) is None
    (entry,) = _audit(admin, f"customer:{emailed}")
    assert (entry["action"], entry["outcome"]) == ("page.revoke", "done")
    _, again, said = _confirm_and_post(admin, f"/console/customers/{emailed}/page/revoke")
    assert (again, "no page link to revoke" in said) == (200, True)
    assert admin.client.get("/console/customers/not-an-nmi/page/revoke").status_code == 422
    _, unknown, _ = _confirm_and_post(admin, "/console/customers/4109999999/page/revoke")
    assert unknown == 404


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_a_read_key_may_look_but_not_act(api: Api, action: str) -> None:
    runtime = api.services.runtime
    job_id = discarded_job(runtime) if action == "retry" else waiting_job(runtime)
    sign_in(api.client, api.keys["read"])
    page = api.client.get(f"/console/jobs/{job_id}")
    assert page.status_code == 200
    confirm = api.client.get(f"/console/jobs/{job_id}/{action}")
    assert "may only look" in confirm.text
    answer = api.client.post(
        f"/console/jobs/{job_id}/{action}",
        data={"csrf_token": csrf_of(confirm.text)},
        headers=ORIGIN,
    )
    assert answer.status_code == 403
    assert "acting needs an admin key" in answer.text
    with runtime.store.read() as unit:
        job = unit.jobs.get(job_id)
        assert unit.audit.page(limit=10, target=f"job:{job_id}") == []
    assert job is not None
    assert job.state in (JobState.DISCARDED, JobState.AVAILABLE)


def test_an_action_without_its_csrf_token_or_from_elsewhere_does_nothing(admin: Api) -> None:
    runtime = admin.services.runtime
    waiting = waiting_job(runtime)
    path = f"/console/jobs/{waiting}/cancel"
    token = csrf_of(admin.client.get(path).text)
    refused = [
        admin.client.post(path, data={"reason": "no token"}, headers=ORIGIN),
        admin.client.post(path, data={"csrf_token": "not-it"}, headers=ORIGIN),
        admin.client.post(path, data={"csrf_token": token}, headers={"Origin": "https://x.test"}),
        admin.client.post(path, data={"csrf_token": token}),
    ]
    assert [answer.status_code for answer in refused] == [403, 403, 403, 403]
    with runtime.store.read() as unit:
        assert unit.jobs.get(waiting).state is JobState.AVAILABLE  # type: ignore[union-attr]


def test_hostile_forms_are_refused_before_they_are_read(admin: Api) -> None:
    path = "/console/jobs/1/cancel"
    token = csrf_of(admin.client.get("/console/").text)
    too_large = admin.client.post(
        path,
        content=b"csrf_token=" + b"x" * 10_000,
        headers={**ORIGIN, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert too_large.status_code == 413
    as_json = admin.client.post(path, json={"csrf_token": token}, headers=ORIGIN)
    assert as_json.status_code == 415
    many = "&".join(f"f{n}=1" for n in range(50))
    too_many = admin.client.post(
        path,
        content=many.encode(),
        headers={**ORIGIN, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert too_many.status_code == 400
    missing = admin.client.post(
        "/console/jobs/999999/cancel", data={"csrf_token": token}, headers=ORIGIN
    )
    assert missing.status_code == 404
    assert "no such job" in missing.text


@pytest.mark.parametrize("job_id", ["\u00b2", "\u0663", "\uff11", "1\u00b2", "-1", "0x1", "9" * 19])
def test_a_job_id_not_of_ascii_digits_is_a_404_page(admin: Api, job_id: str) -> None:
    token = csrf_of(admin.client.get("/console/").text)
    for path in (f"/console/jobs/{job_id}", f"/console/jobs/{job_id}/cancel"):
        assert admin.client.get(path).status_code == 404
    posted = admin.client.post(
        f"/console/jobs/{job_id}/cancel", data={"csrf_token": token}, headers=ORIGIN
    )
    assert posted.status_code == 404
    assert "text/html" in posted.headers["content-type"]


@pytest.mark.parametrize(
    "path",
    [
        "/console/jobs/\u00b2/cancel",
        "/console/jobs/1/no-such-action",
        "/console/jobs/1/retry",
        "/console/quotas/not-an-nmi/2026-07-01/reopen",
        "/console/quotas/4100000001/\u00b2/reopen",
        "/console/keys/not-a-key/revoke",
        "/console/invoices/IN-00000001/resend",
        "/console/customers/4100000001/page/revoke",
        "/console/sign-out",
    ],
)
def test_a_form_without_a_session_is_sent_to_sign_in_before_anything_is_read(
    api: Api, path: str
) -> None:
    hostile = [
        {"content": b"csrf_token=x", "headers": {**ORIGIN, "Content-Type": "text/plain"}},
        {"content": b"x" * 100_000, "headers": ORIGIN},
        {"data": {"csrf_token": "x"}, "headers": {"Origin": "https://elsewhere.test"}},
    ]
    for request in hostile:
        answer = api.client.post(path, follow_redirects=False, **request)  # type: ignore[arg-type]
        assert answer.status_code == 303, (path, answer.status_code)
        assert answer.headers["location"].startswith("/console/sign-in?next=")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/console/?day=0001-01-01", "day"),
        ("/console/quotas?day=9999-12-31", "day"),
        ("/console/quotas?after=0001-01-01~4100000001", "after"),
        (f"/console/quotas/{NMI}/0001-01-01", "day"),
        (f"/console/quotas/{NMI}/%C2%B2%C2%B2%C2%B2%C2%B2-01-01", "day"),
        (f"/console/quotas/{NMI}/0001-01-01/reopen?version=1", "day"),
        ("/console/jobs?before=%C2%B2", "before"),
    ],
)
def test_a_date_or_position_out_of_form_or_range_is_a_422_page(
    admin: Api, path: str, field: str
) -> None:
    page = admin.client.get(path)
    assert page.status_code == 422, page.text
    assert "text/html" in page.headers["content-type"]
    assert f"{field}:" in page.text
