"""The fuzz targets in every test run: the kept corpus replayed (what atheris found interesting,
``make fuzz``), and hypothesis feeding each target bytes of its own making: random bytes,
mutated corpus files, and well-formed NEM12 with hostile fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import TARGETS, cdr_plan, customers, nem12, readings, toml_plan

HERE = Path(__file__).parent
#: Hand-made inputs (named for what they hold) and what atheris found and kept (``make fuzz``).
SEEDS, CORPUS = HERE / "seeds", HERE / "corpus"
FILES = sorted(path for path in [*SEEDS.glob("*/*"), *CORPUS.glob("*/*")] if path.is_file())


def test_the_corpus_has_seeds_for_every_target() -> None:
    for name in TARGETS:
        assert any(path.parent.name == name for path in FILES), name


@pytest.mark.parametrize("path", FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_kept_input_ends_in_a_result_or_the_documented_error(path: Path) -> None:
    TARGETS[path.parent.name](path.read_bytes())


def _mutated(data: bytes, cuts: list[tuple[int, int, bytes]]) -> bytes:
    for offset, width, insert in cuts:
        at = offset % (len(data) + 1)
        data = data[:at] + insert + data[at + width :]
    return data


#: Hand-made seeds of well-formed files.
WELL_FORMED = ["day-30min.csv", "day-5min.csv", "revision.csv", "quality-v-400.csv"]
_CUTS = st.lists(
    st.tuples(st.integers(0, 1 << 16), st.integers(0, 8), st.binary(max_size=12)), max_size=6
)
_INPUTS = {
    name: [path.read_bytes() for path in FILES if path.parent.name == name] for name in TARGETS
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_any_bytes_as_nem12(data: bytes) -> None:
    nem12(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_INPUTS["nem12"]), _CUTS)
def test_mutated_nem12(seed: bytes, cuts: list[tuple[int, int, bytes]]) -> None:
    nem12(_mutated(seed, cuts))


_FIELD = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "99991231",
            "00010101",
            "1e999999",
            "1e-999999",
            "9" * 40,
            "٣",  # a digit that is not ASCII, on purpose
            "０.５",  # noqa: RUF001 - full-width digits, on purpose
            "-0",
            "NaN",
            "inf",
            "0x10",
            "1_000",
            " 1",
            "nlower0001",
            "e1",
            "",
            '"',
            "\x00",
        ]
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([(SEEDS / "nem12" / name).read_bytes() for name in WELL_FORMED]),
    st.lists(st.tuples(st.integers(0, 400), _FIELD), max_size=4),
)
def test_nem12_with_hostile_fields(seed: bytes, fields: list[tuple[int, str]]) -> None:
    """A well-formed file with some of its comma-separated fields replaced."""
    text = seed.decode()
    parts = text.split(",")
    for at, value in fields:
        parts[at % len(parts)] = value
    nem12(",".join(parts).encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_INPUTS["readings"]), _CUTS)
def test_mutated_readings(seed: bytes, cuts: list[tuple[int, int, bytes]]) -> None:
    readings(_mutated(seed, cuts))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "nmi": _FIELD | _JSON,
            "suffix": _FIELD | _JSON,
            "interval_minutes": st.integers() | _JSON,
            "reads": st.lists(
                st.fixed_dictionaries(
                    {}, optional={"start": _FIELD | _JSON, "kwh": _FIELD | _JSON, "quality": _FIELD}
                ),
                max_size=3,
            ),
        },
    )
)
def test_json_batches_of_any_shape(body: dict[str, object]) -> None:
    readings(json.dumps(body).encode())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_INPUTS["cdr_plan"]), _CUTS)
def test_mutated_cdr_plans(seed: bytes, cuts: list[tuple[int, int, bytes]]) -> None:
    cdr_plan(_mutated(seed, cuts))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_INPUTS["toml_plan"]), _CUTS)
def test_mutated_toml_plans(seed: bytes, cuts: list[tuple[int, int, bytes]]) -> None:
    toml_plan(_mutated(seed, cuts))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_INPUTS["customers"]), _CUTS)
def test_mutated_customer_files(seed: bytes, cuts: list[tuple[int, int, bytes]]) -> None:
    customers(_mutated(seed, cuts))


def _paths(node: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every place in a JSON document where a value sits."""
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


#: The hand-made well-formed CDR plans (the kept corpus holds malformed ones too).
_CDR_SEEDS = [
    json.loads(path.read_bytes())
    for path in sorted((SEEDS / "cdr_plan").iterdir())
    if path.read_bytes().startswith(b"{\n")
]


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(_CDR_SEEDS),
    st.lists(st.tuples(st.integers(0, 1 << 12), _FIELD | _JSON), min_size=1, max_size=3),
)
def test_cdr_plans_with_hostile_values_in_well_formed_documents(
    seed: dict[str, object], changes: list[tuple[int, object]]
) -> None:
    """A valid CDR plan with some of its values (objects, lists, leaves) replaced: every place
    a reader looks, given what it does not expect."""
    document = json.loads(json.dumps(seed))
    for at, value in changes:
        paths = _paths(document)[1:]
        if not paths:
            break
        *parents, last = paths[at % len(paths)]
        node = document
        for part in parents:
            node = node[part]
        node[last] = value
    cdr_plan(json.dumps(document).encode())
