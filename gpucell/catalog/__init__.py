"""Catalogues: facts about the world outside gpucell, pinned and checked against upstream.

GPU models and their PCI ids (``gpu_catalog``), the pinned releases (``releases``), the hosts a node downloads from
(``download_hosts``), KServe's serving runtimes (``kserve_runtimes``), KubeVirt's common instancetypes
(``common_instancetypes``) and Cluster API's provider facts (``cluster_api_facts``). Plain data and pure functions, no
Pulumi. Imports only :mod:`gpucell.errors` and this folder (``tests/test_structure.py``, decision 0033).
"""
