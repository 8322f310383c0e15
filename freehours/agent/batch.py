"""A batch: one request's worth of meter data, named by its content.

A batch's Idempotency-Key is the SHA-256 of what it carries, so the same reads always travel under
the same key: a batch resent after a crash or a timeout is recognised by the API and replayed,
never counted twice. Interval reads become the JSON body of ``POST /v1/meter-readings``, written
canonically (fixed key order, no spaces, kWh as decimal strings) so that equal reads give equal
bytes; a NEM12 file is sent as it is, its key taken from its bytes.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import string
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePath

from freehours.domain.reads import IntervalRead

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")

#: The longest file name the agent sends in ``X-Filename``: under the 255 of a file system's name,
#: and short enough for any server's header limit (the API bounds the header too).
MAX_UPLOAD_NAME = 200
#: Characters sent as they are in ``X-Filename``: printable ASCII but ``%`` (the escape itself).
_PLAIN = frozenset(string.ascii_letters + string.digits + string.punctuation + " ") - {"%"}
_GZIP_MAGIC = b"\x1f\x8b"


class Route(StrEnum):
    """Where a batch is posted."""

    READINGS = "/v1/meter-readings"  # a JSON batch of interval reads
    NEM12 = "/v1/meter-readings/nem12"  # a NEM12 file as it is


@dataclass(frozen=True, slots=True)
class Batch:
    """One request's body and what the spool and the sender need to know about it.

    ``source`` is the NEM12 file the batch came from ("" for reads from meters): the file to
    move once the API has it. ``reads`` counts the interval reads a JSON batch carries (0 for a
    file, whose contents the API counts). ``trace_id`` names the batch's trace, in which every
    send of it is a span (``freehours.agent.sender``).
    """

    route: Route
    idempotency_key: str
    body: bytes
    content_type: str
    source: str
    reads: int
    trace_id: str


def readings_batch(
    nmi: str, suffix: str, interval_minutes: int, reads: Sequence[IntervalRead]
) -> Batch:
    """A JSON batch of ``reads`` (one NMI, one suffix), keyed by its canonical body."""
    document = {
        "nmi": nmi,
        "suffix": suffix,
        "interval_minutes": interval_minutes,
        "reads": [
            {
                "start": read.start.isoformat(),
                "kwh": None if read.kwh is None else str(read.kwh),
                "quality": read.quality,
            }
            for read in reads
        ],
    }
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    return Batch(
        route=Route.READINGS,
        idempotency_key=f"readings-{hashlib.sha256(body).hexdigest()}",
        body=body,
        content_type="application/json",
        source="",
        reads=len(reads),
        trace_id=new_trace_id(),
    )


def nem12_batch(path: Path, content: bytes) -> Batch:
    """The NEM12 file at ``path`` whose bytes are ``content``, keyed by those bytes."""
    if content.startswith(_ZIP_MAGIC):
        content_type = "application/zip"
    elif content.startswith(_GZIP_MAGIC):
        content_type = "application/gzip"
    else:
        content_type = "text/csv"
    return Batch(
        route=Route.NEM12,
        idempotency_key=f"nem12-{hashlib.sha256(content).hexdigest()}",
        body=content,
        content_type=content_type,
        source=str(path),
        reads=0,
        trace_id=new_trace_id(),
    )


def upload_name(source: str) -> str:
    """The name of the file at ``source`` as it can travel in an HTTP header: printable ASCII.

    Every other character (non-ASCII, a newline or other control character, ``%``, and spaces at
    either end, which a header loses) is percent-encoded as UTF-8, so the name stays readable and
    can be decoded; a name longer than ``MAX_UPLOAD_NAME`` keeps its start and its end (the
    extension) with ``...`` between. The file itself keeps its name on disk.
    """
    name = PurePath(source).name
    parts = [char if char in _PLAIN else _escaped(char) for char in name]
    for index in (0, -1):
        if parts and parts[index] == " ":
            parts[index] = "%20"
    if sum(map(len, parts)) <= MAX_UPLOAD_NAME:
        return "".join(parts)
    head: list[str] = []
    tail: list[str] = []
    budget = MAX_UPLOAD_NAME - 3
    # The end gets a third (an extension, a date), the start the rest; whole escapes only.
    for part in reversed(parts):
        if sum(map(len, tail)) + len(part) > budget // 3:
            break
        tail.insert(0, part)
    for part in parts:
        if sum(map(len, head)) + len(part) > budget - sum(map(len, tail)):
            break
        head.append(part)
    return "".join(head) + "..." + "".join(tail)


def _escaped(char: str) -> str:
    try:  # a byte of a name that is not UTF-8 comes from the file system as a lone surrogate
        raw = char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = char.encode("utf-8", "backslashreplace")
    return "".join(f"%{byte:02X}" for byte in raw)


def new_trace_id() -> str:
    """A W3C trace id: 16 random bytes as hex, never all zeros."""
    while True:
        trace_id = secrets.token_hex(16)
        if trace_id.strip("0"):
            return trace_id
