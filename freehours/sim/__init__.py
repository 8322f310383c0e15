"""Simulation: smart meters, workloads, faults, the legacy model and the incident replay."""
