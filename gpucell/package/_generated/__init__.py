"""Generated code: never edit by hand (``.gitattributes`` marks this folder ``linguist-generated``).

``types``: the component package's input types, written by
``python -m tools.package_types > gpucell/package/_generated/types.py``; ``tests/test_component_package.py`` fails
when it is stale (decision 0033).
"""
