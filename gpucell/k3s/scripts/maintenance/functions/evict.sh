# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# Evict one pod through the Eviction API: a PodDisruptionBudget that forbids it answers 429 (retried by callers).
evict() {
  kc create --raw "/api/v1/namespaces/$1/pods/$2/eviction" -f - >/dev/null 2>&1 <<EVICTION
{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"$2","namespace":"$1"}}
EVICTION
}
