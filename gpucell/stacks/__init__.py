"""The stacks: the ``gpucell`` CLI (``cli``), the stack program (``program``), stack config (``config``), the
offline plan and its checks (``plan``, ``conformance``), reviews, the guard and restores.

The top layer: may import everything below it, nothing imports it (``tests/test_structure.py``, decision 0033).
"""
