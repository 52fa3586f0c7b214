"""The platform components: what gpucell installs into a cluster, one module each.

Cilium, storage (Longhorn or local-path), KubeVirt, CDI, the GPU Operator, the DRA driver, cert-manager, KServe,
KEDA, metrics (with its alerts, dashboards and metering rules), backups and CSI snapshots, traffic in (Gateway API,
the endpoint Gateway, LB IPAM), Cluster API, the cluster-wide deny rules, priority classes, instancetypes and the
image catalogue; ``_chart`` (Helm releases) and ``platform_tolerations`` are their shared helpers. Each takes a
:class:`gpucell.Cluster` in its ``*Args`` and works on any cluster. May import :mod:`gpucell.cluster`, the
component base (``gpucell._component``), :mod:`gpucell.admission`, the specs and the catalogues; never
:mod:`gpucell.k3s` (siblings), the tenancy, the engine or the stacks (``tests/test_structure.py``, decision 0033).
"""
