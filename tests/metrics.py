"""Prometheus exposition text, read back as the tests ask of it: one parser for every suite."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, frozenset[tuple[str, str]]]


class Samples(dict[Key, float]):
    """The samples of one scrape, by (sample name, labels)."""

    @classmethod
    def of(cls, text: str) -> Samples:
        return cls(
            ((sample.name, frozenset(sample.labels.items())), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        )

    @classmethod
    def scrape(cls, port: int) -> Samples:
        """``/metrics`` on 127.0.0.1:``port``; none while nothing listens there yet."""
        try:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        except httpx.TransportError:
            return cls()
        return cls.of(text)

    def value(self, name: str, **labels: str) -> float:
        """The sample's value; a sample that is not there fails, naming what is."""
        key = (name, frozenset(labels.items()))
        if key not in self:
            seen = [dict(present) for sample, present in self if sample == name]
            raise AssertionError(f"no sample {name} with labels {labels}; it has {seen}")
        return self[key]

    def count(self, name: str, **labels: str) -> float:
        """A counter's value, 0 until it has a sample for these labels (a labelled counter has
        none before its first increment)."""
        return self.get((name, frozenset(labels.items())), 0.0)

    def only(self, name: str) -> float:
        """The one sample named ``name``, whatever its labels."""
        values = [value for (sample, _), value in self.items() if sample == name]
        if len(values) != 1:
            raise AssertionError(f"{len(values)} samples named {name}, not one")
        return values[0]
