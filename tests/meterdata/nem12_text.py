"""Small NEM12 files written record by record, for tests that need one feature each."""

from __future__ import annotations

HEADER = "100,NEM12,202607020300,MDP1,RETAILER"
END = "900"


def nem12(*records: str, header: str = HEADER, end: str = END) -> str:
    """A whole file: the 100 header, ``records``, the 900 end; one record per line."""
    return "\n".join([header, *records, end]) + "\n"


def channel(
    nmi: str = "NMI0000001", suffix: str = "E1", uom: str = "kWh", minutes: int = 30
) -> str:
    """A 200 record."""
    return f"200,{nmi},E1B1,1,{suffix},N1,METER1,{uom},{minutes},"


def day(
    date: str = "20260701",
    values: list[str] | None = None,
    *,
    quality: str = "A",
    stamp: str = "20260702031500",
    minutes: int = 30,
    value: str = "0.5",
) -> str:
    """A 300 record: ``values``, or ``value`` in every interval of a ``minutes`` day."""
    texts = values if values is not None else [value] * (24 * 60 // minutes)
    return f"300,{date},{','.join(texts)},{quality},,,{stamp},"
