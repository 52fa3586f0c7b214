"""Admission: what the cell accepts, decided from specs before anything is rendered.

The GPU inventory (``inventory``), DRA device classes and claims (``dra``), where a workload lands (``placement``), a
VM's shape and its rules (``vm_shape``, ``vm_rules``), tenant clusters' machines (``tenant_cluster_admission``) and
tenant admission against the cluster's facts (``tenants``: ``ClusterFacts``, ``check_tenants``). Pure functions over
specs that raise ``ConfigError``/``PlacementError``, no Pulumi. Imports :mod:`gpucell.errors`,
:mod:`gpucell.catalog` and the part specs of :mod:`gpucell.spec`; ``spec/cell.py`` sits above it and calls it
(``tests/test_structure.py``, decision 0033).
"""
