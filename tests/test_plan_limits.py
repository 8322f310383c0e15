"""The bounds a plan body is checked against before a parser reads it (freehours.plans.limits):
issue 32's hostile bodies refused on the command line as in the API, and the scan itself never
failing any other way, passing every real plan."""

from __future__ import annotations

import contextlib
import json
import tomllib
from pathlib import Path

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from freehours.domain.fields import MAX_PLAN_NAME
from freehours.domain.time import Region
from freehours.errors import PlanError
from freehours.plans import BUILTIN_IDS, builtin_document, toml_document
from freehours.plans.cdr import plan_document_from_cdr, read_json
from freehours.plans.document import parse_plan
from freehours.plans.limits import (
    MAX_ARRAY_ITEMS,
    MAX_DEPTH,
    MAX_KEY_LENGTH,
    check_json,
    check_toml,
)
from tests.bombs import PLAN_BOMBS
from tests.cdr.support import cdr_document
from tests.support import run_flat

DATA = Path(__file__).parent / "data" / "cdr"
CDR_DOCUMENTS = sorted(DATA.glob("**/*.json"))
TOML_PLANS = sorted(DATA.glob("**/*.toml"))


@pytest.mark.parametrize(
    ("media_type", "body", "limit"),
    [pytest.param(media, body, limit, id=name) for name, media, body, limit in PLAN_BOMBS],
)
def test_the_command_line_refuses_a_hostile_plan_file_with_exit_2_naming_the_limit(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    media_type: str,
    body: bytes,
    limit: str,
) -> None:
    path = tmp_path / "plan"
    path.write_bytes(body)
    command = ("plans", "validate") if media_type == "application/toml" else ("plans", "import-cdr")
    code, _, err = run_flat(monkeypatch, capsys, *command, str(path))
    assert code == 2
    assert f"{path}: line" in err
    assert "over the limit of" in err
    assert limit in err


@pytest.mark.parametrize(
    ("toml", "json_text", "limit"),
    [
        ("a.b.c.d.e.f.g.h = 1", None, None),
        ("a.b.c.d.e.f.g.h.i = 1", None, "dotted parts in a key"),
        ("[a.b.c.d.e.f.g.h.i]", None, "dotted parts in a key"),
        ("x = " + "[" * MAX_DEPTH + "]" * MAX_DEPTH, "[" * MAX_DEPTH + "]" * MAX_DEPTH, None),
        (
            "x = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
            "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
            "levels of nesting",
        ),
        ("k" * MAX_KEY_LENGTH + " = 1", '{"' + "k" * MAX_KEY_LENGTH + '": 1}', None),
        (
            '"' + "k" * (MAX_KEY_LENGTH + 1) + '" = 1',
            '{"' + "k" * (MAX_KEY_LENGTH + 1) + '": 1}',
            "characters in a key",
        ),
        ("x = " + "9" * 100, "9" * 100, None),
        ("x = 1." + "9" * 99, "1." + "9" * 99, "characters in a number"),
        (
            "x = [" + "0," * MAX_ARRAY_ITEMS + "]",
            "[" + "0," * MAX_ARRAY_ITEMS + "0]",
            "array items in all",
        ),
        # What only looks like structure inside strings and comments is not counted.
        ('x = """a.b.c.d.e.f.g.h.i.j""""\n# [[[[[[[[[[\ny = \'9999\'', None, None),
    ],
)
def test_each_limit_is_the_last_value_taken(
    toml: str, json_text: str | None, limit: str | None
) -> None:
    checks = [(check_toml, toml)] + ([(check_json, json_text)] if json_text else [])
    for check, text in checks:
        if limit is None:
            check(text, source="t")
        else:
            with pytest.raises(PlanError, match=limit):
                check(text, source="t")


def test_every_builtin_plan_and_test_plan_passes() -> None:
    for plan_id in BUILTIN_IDS:
        builtin_document(plan_id)  # read through the check
    for path in TOML_PLANS:
        check_toml(path.read_text("utf-8"), source=str(path))
    for path in CDR_DOCUMENTS:
        check_json(path.read_bytes(), source=str(path))
        read_json(path.read_bytes(), source=str(path), limit=1 << 24)
    assert TOML_PLANS
    assert CDR_DOCUMENTS


_TOML_ALPHABET = st.sampled_from("ab1.=[]{},\"'#\n \\x0e+-:_")
_JSON_ALPHABET = st.sampled_from('ab1.:[]{},"\\ \n-e+tn')


@hypothesis.settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=_TOML_ALPHABET, max_size=300))
def test_the_toml_check_refuses_or_passes_and_what_passes_tomllib_reads_or_refuses(
    text: str,
) -> None:
    """Never any error but the refusal, and past it ``tomllib`` never fails but as TOML."""
    with contextlib.suppress(PlanError):
        toml_document(text, source="t")


@hypothesis.settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=_JSON_ALPHABET, max_size=300))
def test_the_json_check_refuses_or_passes_and_what_passes_json_reads_or_refuses(
    text: str,
) -> None:
    with contextlib.suppress(PlanError):
        read_json(text.encode(), source="t", limit=1 << 20)


@hypothesis.settings(max_examples=200, deadline=None)
@given(
    document=st.recursive(
        st.integers() | st.text(max_size=5) | st.booleans(),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=4)
        ),
        max_leaves=40,
    )
)
def test_a_document_within_the_limits_passes_both_checks(document: object) -> None:
    """Any small document, written as JSON and (under a key) as TOML, passes: the scan counts
    what the parsers read, not what strings and escapes look like."""
    hypothesis.assume(_depth(document) <= MAX_DEPTH)
    check_json(json.dumps(document), source="t")
    assert read_json(json.dumps(document).encode(), source="t", limit=1 << 20) == document
    toml = _toml({"x": document})
    check_toml(toml, source="t")
    assert tomllib.loads(toml) == {"x": document}


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _toml(document: dict[str, object]) -> str:
    """``document`` as TOML, every table inline (TOML has no null: none is generated)."""

    def text(item: str) -> str:
        # JSON's escapes are TOML's, but for a pair of surrogates (and DEL, unescaped).
        return json.dumps(item, ensure_ascii=False).replace("\x7f", "\\u007f")

    def value(item: object) -> str:
        if isinstance(item, str):
            return text(item)
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, dict):
            return "{" + ", ".join(f"{text(k)} = {value(v)}" for k, v in item.items()) + "}"
        if isinstance(item, list):
            return "[" + ", ".join(value(v) for v in item) + "]"
        return json.dumps(item)

    return "\n".join(f"{text(k)} = {value(v)}" for k, v in document.items()) + "\n"


def test_plans_validate_refuses_a_description_longer_than_an_invoice_holds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "long.toml"
    text = (Path(__file__).parents[1] / "freehours/plans/builtin/sso-nsw.toml").read_text("utf-8")
    path.write_text(f'description = "{"x" * (MAX_PLAN_NAME + 1)}"\n' + _without_description(text))
    code, _, err = run_flat(monkeypatch, capsys, "plans", "validate", str(path))
    assert code == 2
    assert f"description: String should have at most {MAX_PLAN_NAME} characters" in err


def _without_description(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("description"))


def test_a_cdr_plan_name_is_cut_to_what_an_invoice_holds_and_kept_whole() -> None:
    document = cdr_document("single-rate")
    about = "A plan for households with solar, " * 10
    document["description"] = about
    converted = plan_document_from_cdr(document, source="t", region=Region.NSW)
    assert len(converted["description"]) == MAX_PLAN_NAME
    assert converted["description"].endswith("…")
    assert f"description: {about}" in converted["information"]
    parse_plan(converted, source="t")
