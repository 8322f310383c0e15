"""Signed links to a customer's own page (docs/invoices.md, Each customer's page).

A link's token is ``PAGE.EXPIRES.SIGNATURE``: ``PAGE`` the customer's page id (random, stored
with their NMI, never the NMI itself: no personal data in a URL), ``EXPIRES`` when it stops
opening (seconds since the epoch, base 36), ``SIGNATURE`` the first 128 bits of HMAC-SHA256 of
the two under the deployment's secret, base64url. A page id revoked by the retailer opens no
link signed for it, however fresh. ``verify`` says only whether a token opens a page: a tampered,
expired or foreign token is refused alike, naming no one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

#: A page id: 22 characters of base64url (128 random bits).
_PAGE = re.compile(r"[A-Za-z0-9_-]{22}")
_EXPIRES = re.compile(r"[0-9a-z]{1,8}")
_SIGNATURE = re.compile(r"[A-Za-z0-9_-]{22}")
#: The longest token there is: anything longer is refused before any work.
MAX_TOKEN = 22 + 1 + 8 + 1 + 22


def new_page_id() -> str:
    return secrets.token_urlsafe(16)


def sign(page_id: str, expires: int, secret: bytes) -> str:
    """The token of ``page_id`` opening until ``expires`` (seconds since the epoch)."""
    if not _PAGE.fullmatch(page_id):
        raise ValueError("page_id: not a page id")
    if not 0 < expires < 36**8:
        raise ValueError("expires: out of range")
    stamp = _base36(expires)
    return f"{page_id}.{stamp}.{_signature(page_id, stamp, secret)}"


def verify(token: str, secret: bytes, now: float) -> str | None:
    """The page id ``token`` opens at ``now``, or None: malformed, tampered with, signed under
    another secret, or expired."""
    if not secret or len(token) > MAX_TOKEN:
        return None
    parts = token.split(".")
    if len(parts) != 3:
        return None
    page_id, stamp, signature = parts
    if not (
        _PAGE.fullmatch(page_id) and _EXPIRES.fullmatch(stamp) and _SIGNATURE.fullmatch(signature)
    ):
        return None
    if not hmac.compare_digest(signature, _signature(page_id, stamp, secret)):
        return None
    if int(stamp, 36) <= now:
        return None
    return page_id


def _signature(page_id: str, stamp: str, secret: bytes) -> str:
    digest = hmac.new(secret, f"{page_id}.{stamp}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while value:
        value, digit = divmod(value, 36)
        text = digits[digit] + text
    return text or "0"
