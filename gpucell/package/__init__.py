"""The component package: gpucell's components for other languages, served as a Pulumi plugin.

``component_package`` (the exported components and the provider that serves them, ``plugin/__main__.py``),
``inputs`` (the input models, the spec models with their camelCase keys) and ``_generated`` (their ``TypedDict``
classes, generated: never edit). Above every component, the cell, the tenancy and the workloads; below nothing but
the stacks (``tests/test_structure.py``, decisions 0019 and 0033).
"""
