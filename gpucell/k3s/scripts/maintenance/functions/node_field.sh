# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# One JSONPath template evaluated on Node $1, e.g. '{.spec.unschedulable}'.
field_of() {
  kc get node "$1" -o "jsonpath=$2"
}

# One JSONPath template evaluated on this node.
node_field() {
  field_of "$NODE" "$1"
}
