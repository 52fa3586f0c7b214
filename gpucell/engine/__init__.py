"""The plan engine: Pulumi's engine mocked in-process, and every use of the SDK's private internals.

``mock_engine`` runs a Pulumi program without a Pulumi CLI and records what it registers (``gpucell plan``, the test
kit, the component package's tests); ``_sdk_private`` is the one module that reaches into the SDK's internals
(``check_sdk()`` names any that moved, ``tests/test_sdk_private.py``). Imports nothing else of gpucell; sits below the
test kit (:mod:`gpucell.testing`) and the CLI (:mod:`gpucell.stacks`), and no component may import it
(``tests/test_structure.py``, decision 0033).
"""
