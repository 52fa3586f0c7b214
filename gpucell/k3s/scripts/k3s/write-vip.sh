# shellcheck shell=bash
# shellcheck disable=SC2154  # work: the install script's staging directory
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).


# kube-vip's static pod (network.apiVip): the kubelet runs it from k3s's pod-manifests directory and reloads it
# when it changes, so it is written on its own, outside the restart check.
cat >"$work/kube-vip.yaml" <<'GPUCELL_K3S_CONFIG'
@@MANIFEST@@
GPUCELL_K3S_CONFIG
if ! as_root cmp -s "$work/kube-vip.yaml" @@PATH@@; then
  as_root install -D -m 0600 "$work/kube-vip.yaml" @@PATH@@
  echo "gpucell: kube-vip static pod written"
fi
