"""Day 2: what a change to a running cell disrupts, and what keeps serving while it rolls out.

``disruption`` (which changes restart, reschedule or replace what: the review and the guard read it) and
``gpu_serving`` (the cell-wide GPU pieces that serve a pool's old and new configuration while its nodes change one by
one, decision 0018). The node-level day 2 work (drains, reboots, upgrades) is node scripts, in :mod:`gpucell.k3s`.
Sits above :mod:`gpucell.components` (it reads their values) and below :mod:`gpucell.cell`
(``tests/test_structure.py``, decision 0033).
"""
