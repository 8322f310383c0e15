"""``make bench``: every speed and memory goal, measured and printed with its ratio to the
reference."""
