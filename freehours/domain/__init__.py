"""Pure rules, no I/O: time, plans, the free window, rating, bills, the settlement state machine."""
