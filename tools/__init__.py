"""Development tools that are not part of the wheel: the generators of docs/config.md (``docgen``) and of the
component package's types (``package_types``). Run from the repository: ``python -m tools.docgen > docs/config.md``
(decision 0033)."""
