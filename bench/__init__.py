"""Benchmarks, run by hand: `python3 dev.py bench` (see bench/fleet.py)."""
