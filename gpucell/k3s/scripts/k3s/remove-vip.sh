# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).


# Without network.apiVip no kube-vip static pod of gpucell's stays behind (the kubelet then stops it).
if as_root test -f @@PATH@@; then
  as_root rm -f @@PATH@@
  echo "gpucell: kube-vip static pod removed (network.apiVip is not set)"
fi
