"""k3s over SSH: the nodes, the scripts that install, join, drain, reboot and upgrade them, and what they run.

``cluster`` (``K3sCluster``: one ``command.remote`` chain per host), ``_scripts`` (install and join), ``_host_setup``
(GPU host preparation), ``_maintenance_scripts`` (node drains, reboots, upgrades, quarantine: day 2 on a node),
``_node_state`` (what a node reports back), ``hardening`` (the CIS profile), ``kube_vip`` (the API VIP) and
``vgpu_sriov`` (the SR-IOV vGPU reconciler a host runs). Their bash is package data, ``scripts/**/*.sh``, read by
``_script_files``. May import :mod:`gpucell.cluster`, the component base
(``gpucell._component``), :mod:`gpucell.admission`, the specs and the catalogues; never
:mod:`gpucell.components` (siblings: the platform does not know how its nodes were built;
``tests/test_structure.py``, decision 0033).
"""
