# shellcheck shell=bash
# shellcheck disable=SC2034  # have_name: read by the script it goes into
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).

have_name="$(as_root cat @@CONFIG_PATH@@ 2>/dev/null | awk '/^node-name:/ { print $2; exit }')" || have_name=""
