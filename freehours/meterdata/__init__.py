"""Interval meter data: NEM12 reading (streaming, exact, revisions) and writing."""
