"""Tenants: the namespace, quota, roles, network policy and run-time admission each tenant gets, on a cell.

``tenant`` (``Tenant``, ``TenantArgs``, ``admit_workload``), ``tenant_roles`` (the tenant's RBAC),
``tenant_admission`` (ValidatingAdmissionPolicies a tenant cannot get around), ``dra_ordering`` (``DraClaimOrder``
across tenants) and ``_common`` (helpers for every object rendered in a tenant namespace, which the workloads in
:mod:`gpucell.workloads` share). Sits above the cell (:mod:`gpucell.cell`, :mod:`gpucell.platform`) and below the
workloads (``tests/test_structure.py``, decision 0033).
"""
