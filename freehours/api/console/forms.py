"""The console's forms: signing in and out, and the four actions, each a GET that asks to
confirm and a POST that does it.

A POST checks the session first (a browser not signed in is sent to sign in, before anything of
the request is read or parsed), then reads its bounded form from the console's own origin
(``session.read_form``), checks its CSRF token and (for an action) that its key may act, and only
then does anything.
The action itself is ``freehours.operations.actions``': exactly once, and in the audit log. Its
answer is a page: 200 when done, 409 when the state had changed meanwhile (and nothing was
done), each linking to its audit entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse, Response

from freehours.api.auth import look_up
from freehours.api.console.pages import parse_day, parse_id, parse_nmi, path_id
from freehours.api.console.render import render
from freehours.api.console.session import (
    COOKIE,
    PATH,
    Session,
    check_csrf,
    current,
    end,
    may_sign_in,
    read_form,
    require_act,
    safe_next,
    start,
)
from freehours.api.console.session import cookie_options as session_cookie
from freehours.api.problems import Problem
from freehours.api.services import services_of
from freehours.errors import InputError
from freehours.operations.actions import Actions, NotFound, Operator, Outcome

router = APIRouter()
SignedIn = Annotated[Session, Depends(current)]


# --- signing in and out --------------------------------------------------------------------


@router.get("/sign-in", response_class=HTMLResponse, name="console_sign_in")
def sign_in_page(request: Request, next: str | None = None) -> HTMLResponse:
    return render(
        request, "sign_in.html", title="Sign in", next=safe_next(next), error=None, status=200
    )


@router.post("/sign-in", name="console_sign_in_post")
async def sign_in(request: Request) -> Response:
    form = await read_form(request)
    services = services_of(request)
    secret = form.get("key", "").strip()
    next_path = safe_next(form.get("next"))
    key = await look_up(request, secret) if secret and len(secret) <= 100 else None
    if key is None:
        return _refused(request, next_path, "That key is unknown or revoked.", 401)
    if not may_sign_in(key):
        return _refused(
            request, next_path, "That key may not use the console: it needs read or admin.", 403
        )
    token, session = await run_in_threadpool(start, services, key)
    response = RedirectResponse(next_path, 303)
    response.set_cookie(value=token, **session_cookie(request, session, services.clock.now()))  # type: ignore[arg-type]
    return response


def _refused(request: Request, next_path: str, error: str, status: int) -> HTMLResponse:
    return render(
        request, "sign_in.html", title="Sign in", next=next_path, error=error, status=status
    )


@router.post("/sign-out", name="console_sign_out")
async def sign_out(request: Request, session: SignedIn) -> Response:
    form = await read_form(request)
    check_csrf(session, form)
    await run_in_threadpool(end, services_of(request), session)
    response = RedirectResponse(f"{PATH}/sign-in", 303)
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict")
    return response


# --- actions ------------------------------------------------------------------------------------


def _confirm(
    request: Request,
    session: Session,
    *,
    title: str,
    action: str,
    question: str,
    hidden: dict[str, str],
    back: str,
    needs_reason: bool = False,
) -> HTMLResponse:
    return render(
        request,
        "confirm.html",
        session=session,
        title=title,
        action=action,
        question=question,
        hidden=hidden,
        back=back,
        needs_reason=needs_reason,
    )


async def _act(
    request: Request,
    session: Session,
    run: Callable[[Session, dict[str, str]], Outcome],
    back: str,
) -> Response:
    """The POST of an action, its ``session`` checked: form, CSRF, may act; then ``run`` in a
    worker thread."""
    form = await read_form(request)
    check_csrf(session, form)
    require_act(session)
    try:
        outcome = await run_in_threadpool(run, session, form)
    except NotFound as exc:
        raise Problem(404, "not-found", "Not Found", str(exc)) from None
    except InputError as exc:
        raise Problem(422, "validation-error", "Invalid form", str(exc)) from None
    return render(
        request,
        "outcome.html",
        status=200 if outcome.done else 409,
        session=session,
        title="Done" if outcome.done else "Not done: the state had changed",
        outcome=outcome,
        back=back,
    )


@dataclass(frozen=True, slots=True)
class JobAction:
    """An action on a job: its title, the question its confirmation asks, and what does it."""

    title: str
    question: str
    run: Callable[[Actions, Operator, int], Outcome]


JOB_ACTIONS = {
    "retry": JobAction(
        "Retry job {id}",
        "Run discarded job {id} again, as a new job with the same kind, key and payload? The"
        " discarded job stays as it is; what it works on is not reset.",
        Actions.retry_job,
    ),
    "cancel": JobAction(
        "Cancel job {id}", "Cancel waiting job {id}? It will not run again.", Actions.cancel_job
    ),
}


def _job_action(name: str) -> JobAction:
    action = JOB_ACTIONS.get(name)
    if action is None:
        raise Problem(404, "not-found", "Not Found", f"{name[:40]}: no such action on a job")
    return action


@router.get("/jobs/{job_id}/{name}", response_class=HTMLResponse, name="console_job_action")
def confirm_job_action(request: Request, session: SignedIn, job_id: str, name: str) -> HTMLResponse:
    action, the_id = _job_action(name), path_id(job_id, "job")
    return _confirm(
        request,
        session,
        title=action.title.format(id=the_id),
        action=f"{PATH}/jobs/{the_id}/{name}",
        question=action.question.format(id=the_id),
        hidden={},
        back=f"{PATH}/jobs/{the_id}",
    )


@router.post("/jobs/{job_id}/{name}", name="console_job_action_post")
async def job_action(request: Request, session: SignedIn, job_id: str, name: str) -> Response:
    action, the_id = _job_action(name), path_id(job_id, "job")
    actions = services_of(request).actions
    return await _act(
        request,
        session,
        lambda signed_in, _: action.run(actions, signed_in.operator, the_id),
        f"{PATH}/jobs/{the_id}",
    )


@router.get("/quotas/{nmi}/{day}/reopen", response_class=HTMLResponse, name="console_reopen_quota")
def confirm_reopen(
    request: Request, session: SignedIn, nmi: str, day: str, version: str | None = None
) -> HTMLResponse:
    the_nmi, the_day = parse_nmi(nmi), parse_day(day)
    the_version = parse_id(version, "version")
    return _confirm(
        request,
        session,
        title=f"Reopen quota {the_nmi} {the_day}",
        action=f"{PATH}/quotas/{the_nmi}/{the_day}/reopen",
        question=f"Reopen ABORTED version {the_version} of quota {the_nmi} {the_day} as its next"
        " version, and settle it again?",
        hidden={"version": str(the_version)},
        back=f"{PATH}/quotas/{the_nmi}/{the_day}",
        needs_reason=True,
    )


@router.post("/quotas/{nmi}/{day}/reopen", name="console_reopen_quota_post")
async def reopen(request: Request, session: SignedIn, nmi: str, day: str) -> Response:
    the_nmi, the_day = parse_nmi(nmi) or "", parse_day(day)
    assert the_day is not None
    actions = services_of(request).actions

    def run(session: Session, form: dict[str, str]) -> Outcome:
        version = parse_id(form.get("version"), "version")
        if version is None:
            raise InputError("version: the version seen is required")
        return actions.reopen_quota(
            session.operator, the_nmi, the_day, version, form.get("reason", "")
        )

    return await _act(request, session, run, f"{PATH}/quotas/{the_nmi}/{the_day}")


@router.get(
    "/invoices/{number}/resend", response_class=HTMLResponse, name="console_resend_document"
)
def confirm_resend(request: Request, session: SignedIn, number: str) -> HTMLResponse:
    the_number = _document_number(number)
    return _confirm(
        request,
        session,
        title=f"Resend {the_number}",
        action=f"{PATH}/invoices/{the_number}/resend",
        question=f"Send {the_number} by email again, with its PDF, to the customer's email address"
        " as it is now? Its earlier sends stay as they were; this one is a delivery of its own.",
        hidden={},
        back=f"{PATH}/invoices",
    )


@router.post("/invoices/{number}/resend", name="console_resend_document_post")
async def resend(request: Request, session: SignedIn, number: str) -> Response:
    the_number = _document_number(number)
    actions = services_of(request).actions
    return await _act(
        request,
        session,
        lambda signed_in, _: actions.resend_document(signed_in.operator, the_number),
        f"{PATH}/invoices",
    )


def _document_number(value: str) -> str:
    if not (0 < len(value) <= 32 and value.replace("-", "").isalnum() and value.isascii()):
        raise Problem(
            422, "validation-error", "Invalid number", f"number: {value[:40]!r} is not a document"
        )
    return value


@router.get("/customers/{nmi}/page/revoke", response_class=HTMLResponse, name="console_revoke_page")
def confirm_revoke_page(request: Request, session: SignedIn, nmi: str) -> HTMLResponse:
    the_nmi = parse_nmi(nmi)
    return _confirm(
        request,
        session,
        title=f"Revoke the page links of {the_nmi}",
        action=f"{PATH}/customers/{the_nmi}/page/revoke",
        question=f"Stop every link to customer {the_nmi}'s own page from opening (a lost phone,"
        " a forwarded email)? Their next email carries a link to a new page.",
        hidden={},
        back=f"{PATH}/invoices?nmi={the_nmi}",
    )


@router.post("/customers/{nmi}/page/revoke", name="console_revoke_page_post")
async def revoke_page(request: Request, session: SignedIn, nmi: str) -> Response:
    the_nmi = parse_nmi(nmi) or ""
    actions = services_of(request).actions
    return await _act(
        request,
        session,
        lambda signed_in, _: actions.revoke_page(signed_in.operator, the_nmi),
        f"{PATH}/invoices?nmi={the_nmi}",
    )


@router.get("/keys/{key_id}/revoke", response_class=HTMLResponse, name="console_revoke_key")
def confirm_revoke(request: Request, session: SignedIn, key_id: str) -> HTMLResponse:
    the_id = _key_id(key_id)
    return _confirm(
        request,
        session,
        title=f"Revoke key {the_id}",
        action=f"{PATH}/keys/{the_id}/revoke",
        question=f"Revoke key {the_id}? Whoever uses it is refused from now on (by the API within"
        " its key cache time), and its console sessions end.",
        hidden={},
        back=f"{PATH}/keys",
    )


@router.post("/keys/{key_id}/revoke", name="console_revoke_key_post")
async def revoke(request: Request, session: SignedIn, key_id: str) -> Response:
    the_id = _key_id(key_id)
    actions = services_of(request).actions
    return await _act(
        request,
        session,
        lambda signed_in, _: actions.revoke_key(signed_in.operator, the_id),
        f"{PATH}/keys",
    )


def _key_id(value: str) -> str:
    if not (value.startswith("key_") and len(value) <= 16 and value[4:].isalnum()):
        raise Problem(
            422, "validation-error", "Invalid key", f"key: {value[:40]!r} is not a key id"
        )
    return value
