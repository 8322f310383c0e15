"""The bounds a plan body (a TOML plan file, a CDR plan's JSON) is checked against before a
parser reads it.

``tomllib`` and ``json`` are not built for hostile input: a TOML key of 20,000 dotted parts costs
``tomllib`` memory that grows with the square of the parts (39 kB of them took 1.5 GB), an array
or inline table nested a thousand deep raises ``RecursionError``, and an integer of over 4,300
digits a ``ValueError`` from ``int``. ``check_toml`` and ``check_json`` scan the text once, in
time and memory linear in its length, with nothing that recurses, and refuse it with a
``PlanError`` naming the bound it passes and its line; what passes them is small enough in every
way for the parsers and the plan's validation. The same bounds hold for both formats, so a plan
file and a CDR plan are refused alike, on the command line (exit 2) and in the API (422).

Every real plan is far inside them: a plan has at most ``MAX_PERIODS`` periods of a few keys
each, a CDR plan a few hundred keys and its postcodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from freehours.errors import PlanError

#: The most characters of one key (or one dotted part of a TOML key): plan keys are words, the
#: longest CDR key is under 40 characters. A key is held whole while it is read.
MAX_KEY_LENGTH = 100
#: The most dotted parts of one TOML key or table header (``a.b.c`` has 3): a plan writes at
#: most two (``free_window.start``). ``tomllib`` keeps every prefix of a dotted key, a cost that
#: grows with the square of the parts.
MAX_KEY_PARTS = 8
#: The deepest nesting of arrays and tables (inline in TOML, objects in JSON): a plan nests 3
#: deep (``periods = [{ dates = [...] }]``), a CDR plan about 8. The parsers recurse once a level,
#: and so does what reads their result.
MAX_DEPTH = 32
#: The most array items in a whole document: a plan has at most ``MAX_PERIODS`` periods of a few
#: days each, a CDR plan's geography lists postcodes (a few thousand for a whole state). Each item
#: is an object of its own once parsed.
MAX_ARRAY_ITEMS = 20_000
#: The most keys in a whole document, table headers included: a plan has a few hundred, a CDR
#: plan under two thousand. Each is a dictionary entry once parsed.
MAX_KEYS = 20_000
#: The most characters of a number (or a TOML date, time or boolean) written bare: a price needs
#: a dozen, a date-time 35. Python's ``int`` refuses over 4,300 digits, and costs time that grows
#: with the square of the digits below that.
MAX_NUMBER_LENGTH = 100


class _Scan:
    """What a scan has counted so far; ``refuse`` names the bound passed."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.keys = 0
        self.items = 0

    def refuse(self, at: int, what: str, most: int, why: str) -> PlanError:
        line = self.text.count("\n", 0, at) + 1
        return PlanError(
            f"line {line}: {what}, over the limit of {most} {why}: not read",
            source=self.source,
        )

    def key(self, at: int, length: int) -> None:
        if length > MAX_KEY_LENGTH:
            raise self.refuse(
                at, f"a key of {length} characters", MAX_KEY_LENGTH, "characters in a key"
            )

    def one_more_key(self, at: int) -> None:
        self.keys += 1
        if self.keys > MAX_KEYS:
            raise self.refuse(at, f"{MAX_KEYS + 1} keys or more", MAX_KEYS, "keys in all")

    def one_more_item(self, at: int) -> None:
        self.items += 1
        if self.items > MAX_ARRAY_ITEMS:
            what = f"{MAX_ARRAY_ITEMS + 1} array items or more"
            raise self.refuse(at, what, MAX_ARRAY_ITEMS, "array items in all")

    def nest(self, at: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self.refuse(
                at, f"arrays or tables nested {depth} deep", MAX_DEPTH, "levels of nesting"
            )

    def bare(self, at: int, length: int) -> None:
        if length > MAX_NUMBER_LENGTH:
            raise self.refuse(
                at,
                f"a number of {length} characters",
                MAX_NUMBER_LENGTH,
                "characters in a number",
            )


class _Token(NamedTuple):
    kind: str
    text: str
    at: int


#: TOML's tokens, each matched in time linear in its length (no pattern backtracks): strings
#: (a multi-line one may end in up to two quotes of its own), comments, the punctuation that
#: shapes a document, and runs of anything else (bare keys, numbers, dates, booleans). Text
#: that is no token (an unclosed string) ends the scan: ``tomllib`` refuses it there too.
_TOML_TOKENS = re.compile(
    r'(?P<string>"""(?:[^"\\]|\\[\s\S]|"(?!""))*"""(?:""?)?'
    r"|'''(?:[^']|'(?!''))*'''(?:''?)?"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*')"
    r"|(?P<comment>#[^\n]*)"
    r"|(?P<newline>[ \t\r]*\n[ \t\r\n]*)"
    r"|(?P<space>[ \t\r]+)"
    r"|(?P<punct>[\[\]{},=.])"
    r"|(?P<bare>[^\s\"'#\[\]{},=.]+)"
)


def _tokens(pattern: re.Pattern[str], text: str) -> Iterator[_Token]:
    at = 0
    while at < len(text):
        match = pattern.match(text, at)
        if match is None:
            return
        kind = match.lastgroup or ""
        yield _Token(kind, match.group(), at)
        at = match.end()


def check_toml(text: str, *, source: str) -> None:
    """Refuse TOML text that passes a bound above (``PlanError`` naming it and the line)."""
    scan = _Scan(text, source)
    # What encloses the scan: "[" an array, "{" an inline table, "h" a table header.
    stack: list[str] = []
    in_key = True  # reading a key (or header), not a value
    parts = 0  # dotted parts of the key being read
    after_bare = False  # the last value token was bare: a "." there is a decimal point
    bare_at, bare_length = 0, 0
    for token in _tokens(_TOML_TOKENS, text):
        kind, value, at = token
        if kind in ("space", "comment"):
            continue
        inside = stack[-1] if stack else ""
        if in_key:
            if kind == "newline":
                continue
            if value == "[" and not stack and parts == 0:
                stack.append("h")  # a table header; "[[" an array of tables
                scan.one_more_key(at)
                continue
            if value == "[" and inside == "h" and parts == 0:
                continue
            if kind in ("bare", "string"):
                if parts == 0:
                    parts = 1
                scan.key(at, len(value) - (2 if kind == "string" else 0))
            elif value == ".":
                parts += 1
                if parts > MAX_KEY_PARTS:
                    raise scan.refuse(
                        at,
                        f"a key of {MAX_KEY_PARTS + 1} dotted parts or more",
                        MAX_KEY_PARTS,
                        "dotted parts in a key",
                    )
            elif value == "]" and inside == "h":
                # "]]" closes an array of tables: the second "]" is read as the first was.
                parts = 0
                if not text.startswith("]", at + 1):
                    stack.pop()
            elif value == "=":
                scan.one_more_key(at)
                parts = 0
                in_key = False
                after_bare = False
            elif value == "}" and inside == "{":
                stack.pop()
                in_key = False
            elif value == "]" and not stack:
                continue  # the second "]" of "]]", its header already closed
            else:
                return  # not TOML: tomllib says where
            continue
        # A value.
        if kind == "bare" or (value == "." and after_bare):
            if after_bare:
                bare_length += len(value)
            else:
                bare_at, bare_length = at, len(value)
            scan.bare(bare_at, bare_length)
            after_bare = True
            continue
        after_bare = False
        if value in ("[", "{"):
            stack.append(value)
            scan.nest(at, sum(1 for enclosing in stack if enclosing != "h"))
            if value == "{":
                in_key = True
                parts = 0
            else:
                scan.one_more_item(at)
        elif value == "," and inside == "[":
            scan.one_more_item(at)
        elif value == "," and inside == "{":
            in_key = True
        elif value in ("]", "}") and stack:
            stack.pop()
        elif kind == "newline" and not stack:
            in_key = True


#: JSON's tokens, each matched in linear time: strings, the punctuation that shapes a document,
#: and runs of anything else (numbers, true, false, null).
_JSON_TOKENS = re.compile(
    r'(?P<string>"(?:[^"\\]|\\[\s\S])*")'
    r"|(?P<space>\s+)"
    r"|(?P<punct>[\[\]{},:])"
    r'|(?P<bare>[^\s"\[\]{},:]+)'
)


def check_json(data: str | bytes, *, source: str) -> None:
    """Refuse a JSON document that passes a bound above (``PlanError`` naming it and the line).
    Bytes that are not UTF-8 are left for the parser to refuse."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        return
    scan = _Scan(text, source)
    stack: list[str] = []  # the arrays ("[") and objects ("{") that enclose the scan
    last = _Token("", "", 0)
    for token in _tokens(_JSON_TOKENS, text):
        kind, value, at = token
        if kind == "space":
            continue
        if value in ("[", "{"):
            stack.append(value)
            scan.nest(at, len(stack))
            if value == "[":
                scan.one_more_item(at)
        elif value in ("]", "}") and stack:
            stack.pop()
        elif value == "," and stack and stack[-1] == "[":
            scan.one_more_item(at)
        elif value == ":" and last.kind == "string":
            scan.one_more_key(last.at)
            scan.key(last.at, len(last.text) - 2)
        elif kind == "bare":
            scan.bare(at, len(value))
        last = token
