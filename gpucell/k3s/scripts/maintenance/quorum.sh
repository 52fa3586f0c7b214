# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# A server leaves etcd once its removal goes on: with another server down, the members left could not hold quorum
# (k3s-io/k3s#3513), so the removal waits until every other server answers.

template='{range .items[*]}{.metadata.name}{"\t"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}'
down="$(kc get nodes -l node-role.kubernetes.io/etcd=true -o "jsonpath=$template" \
  | awk -F '\t' -v me="$NODE" 'NF && $1 != me && $2 != "True" { printf "%s ", $1 }')"
if [ -n "$down" ]; then
  echo "gpucell: not removing server $NODE while ${down}is not Ready: etcd would be left with too few members" \
    "answering to keep its quorum (k3s-io/k3s#3513). Bring it back, or remove it first (removalPolicy: forget," \
    "docs/operations.md 'A host died'), then run pulumi up again" >&2
  exit 1
fi
