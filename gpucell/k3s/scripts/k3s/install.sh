# shellcheck shell=bash
# shellcheck disable=SC2034  # KUBELET_DIR: read by @@STATE_FILES@@; was: by wait_node in @@TAIL@@
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).

readonly K3S_VERSION=@@VERSION@@
readonly K3S_EXEC=@@ROLE@@
readonly K3S_SERVICE=@@SERVICE@@
readonly K3S_BIN=/usr/local/bin/k3s
readonly NODE_NAME=@@NODE_NAME@@
readonly CONFIG_DIR=/etc/rancher/k3s
readonly CONFIG_FILE=@@CONFIG_PATH@@
readonly TOKEN_FILE=@@TOKEN_PATH@@
readonly INSTALLER_URL=@@INSTALLER_URL@@
readonly INSTALLER_SHA256=@@INSTALLER_SHA256@@
readonly KUBELET_DIR=@@KUBELET_DIR@@
readonly NODE_KUBECONFIG=@@NODE_KUBECONFIG@@
readonly ETCD_DATA_DIR=@@ETCD_DATA_DIR@@
readonly API_URL=@@API_URL@@

# The kubelet-arg entries of the k3s config on stdin that the kubelet's CPU and memory manager checkpoints
# depend on, one a line and sorted; nothing when it has none.
kubelet_args() {
  awk '/^kubelet-arg:/ { in_list = 1; next }
    in_list && /^- (@@STATE_ARGS@@)/ { print; next }
    in_list && /^[- ]/ { next }
    { in_list = 0 }' | LC_ALL=C sort
}

# The k3s config on stdin without the top-level options named in $1 (space-separated) and their list items.
without_options() {
  awk -v skip="$1" 'BEGIN { n = split(skip, keys, " "); for (i = 1; i <= n; i++) drop[keys[i] ":"] = 1 }
    /^[^ -]/ { dropping = ($1 in drop) }
    !dropping { print }'
}

# This node as its kubelet sees it: "<Ready condition status> <kubelet version>"; nothing before it registered.
node_status() {
  if as_root test -f "$NODE_KUBECONFIG"; then
    as_root "$K3S_BIN" kubectl --kubeconfig "$NODE_KUBECONFIG" --request-timeout=10s get node "$NODE_NAME" \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.nodeInfo.kubeletVersion}' \
      2>/dev/null || true
  fi
}

# Whether k3s's journal since $1 holds the cell's refusal of this node's password: the agent's message on the
# supervisor's 403 for its kubelet certificates (k3s pkg/agent/config/config.go: "Node password rejected, duplicate
# hostname or contents of '/etc/rancher/node/password' may not match server node-passwd entry"). Read whole before grep looks at it (pipefail and SIGPIPE, as in the Cilium cleanup).
password_rejected() {
  local out
  out="$(as_root journalctl -u "$K3S_SERVICE" --since "$1" --no-pager -q 2>/dev/null)" || return 1
  grep -q 'Node password rejected' <<<"$out"
}

@@WAITS@@
# The host's clock against the cell's API server (the Date header of its /cacerts answer), before anything changes: a
# host far off fails TLS (certificates not yet or no longer valid) and etcd's peer checks, with messages that do not
# say why. Nothing to compare with while no API answers (a new cell).
api_date="$(curl -sk --max-time 5 -o /dev/null -D - "$API_URL/cacerts" 2>/dev/null \
  | awk 'tolower($1) == "date:" { sub(/^[^:]*: */, ""); sub(/\r$/, ""); print; exit }')" || api_date=""
if [ -n "$api_date" ] && api_time="$(date -d "$api_date" +%s 2>/dev/null)"; then
  skew=$(($(date +%s) - api_time))
  max_skew=@@MAX_SKEW@@
  if [ "${skew#-}" -gt "$max_skew" ]; then
    echo "gpucell: this host's clock is $skew s off the cell's API server at $API_URL (positive: ahead); TLS and" \
      "etcd need clocks within $max_skew s, so nothing was changed. Sync its time (timedatectl set-ntp true, or" \
      "chrony: chronyc makestep), check it with timedatectl status, then run pulumi up again" >&2
    exit 1
  fi
fi
as_root install -d -m 0755 "$CONFIG_DIR"

# The cluster token arrives on stdin (a Pulumi secret) and goes straight into a root-only file: it is never
# in this script, an argument, the environment or the output. This must stay the first command reading stdin.
as_root install -m 0600 /dev/null "$TOKEN_FILE.new"
as_root tee "$TOKEN_FILE.new" >/dev/null
as_root mv -f "$TOKEN_FILE.new" "$TOKEN_FILE"
if ! as_root test -s "$TOKEN_FILE"; then
  echo "gpucell: no cluster token on stdin" >&2
  exit 1
fi
@@ENCRYPTION_GUARD@@

# A host that runs k3s under another node name was renamed in config at the same address. An agent joins again
# under the new name (the old name's uninstall then leaves it alone, see the uninstall script). A server's etcd
# member cannot be renamed in place: refuse before anything changes.
@@READ_NODE_NAME@@
if [ -n "$have_name" ] && [ "$have_name" != "$NODE_NAME" ]; then
  if [ "$K3S_EXEC" = server ]; then
    echo "gpucell: this host runs the k3s server $have_name; a server cannot be renamed in place (its etcd" \
      "member keeps its name). Remove $have_name from the pool in one pulumi up, then add $NODE_NAME in the" \
      "next." >&2
    exit 1
  fi
  echo "gpucell: this host ran k3s as $have_name; it joins again as $NODE_NAME"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# What k3s reads, staged first: its config, then the files of the CIS profile and of sign-in.
cat >"$work/config.yaml" <<'GPUCELL_K3S_CONFIG'
@@CONFIG@@
GPUCELL_K3S_CONFIG
@@STAGED_FILES@@
@@STATIC_PODS@@

readonly MANAGED=("$CONFIG_FILE"@@MANAGED@@)
readonly STAGED=("$work/config.yaml"@@STAGED@@)
readonly MODES=(0600@@MODES@@)

# Options k3s reads only when a node registers (node-label, node-taint; and on a server holding etcd data,
# cluster-init and server): a change there is written for the record without a restart, while the API carries the
# labels and taints.
registration_only="node-label node-taint"
if [ "$K3S_EXEC" = server ] && as_root test -d "$ETCD_DATA_DIR"; then
  registration_only="$registration_only cluster-init server"
fi

# sha256 over every managed file, each after its path: "staged" reads this run's, "installed" the node's. With
# "run", the k3s config leaves out the registration-only options: what a restart would apply.
files_sum() {
  local i
  for i in "${!MANAGED[@]}"; do
    printf '%s\n' "${MANAGED[$i]}"
    if [ "$1" = staged ]; then
      cat "${STAGED[$i]}"
    else
      as_root cat "${MANAGED[$i]}" 2>/dev/null || echo "(missing)"
    fi | if [ "$i" = 0 ] && [ "${2:-}" = run ]; then without_options "$registration_only"; else cat; fi
  done | sha256sum | cut -d ' ' -f 1
}

# Idempotence: the pinned version, running with these files, is left alone (no restart).
want_sum="$(files_sum staged)"
have_sum="$(files_sum installed)"
want_run_sum="$(files_sum staged run)"
have_run_sum="$(files_sum installed run)"
have_version=""
if [ -x "$K3S_BIN" ]; then
  # "k3s version v1.34.2+k3s1 (abcdef12)"; a binary that cannot run counts as not installed.
  have_version="$("$K3S_BIN" --version 2>/dev/null | awk 'NR == 1 { print $3 }')" || have_version=""
fi
if [ "$have_version" = "$K3S_VERSION" ] && [ "$have_run_sum" = "$want_run_sum" ] \
  && as_root systemctl is-active --quiet "$K3S_SERVICE"; then
  if [ "$have_sum" != "$want_sum" ]; then
    as_root install -m 0600 "$work/config.yaml" "$CONFIG_FILE"
    echo "gpucell: only options k3s reads at registration changed ($registration_only): config written," \
      "k3s not restarted"
  fi
  # Installed by an earlier run, but the node still reports another version: that run's wait failed, or it was
  # killed between the installer's binary swap and its restart of the service (the old k3s process still runs,
  # from the replaced binary). The service is restarted, once a run, and the node must come up on this version.
  now="$(node_status)"
  if [ -n "$now" ] && [ "${now#* }" != "$K3S_VERSION" ]; then
    echo "gpucell: k3s $K3S_VERSION is installed, but node $NODE_NAME still reports ${now#* }: restarting" \
      "$K3S_SERVICE (an upgrade interrupted before its restart)"
    as_root systemctl restart "$K3S_SERVICE"
    WAIT_WAY_OUT="; k3s $K3S_VERSION is installed and $K3S_SERVICE was restarted: fix what keeps it from starting"
    WAIT_WAY_OUT+=" (journalctl -u $K3S_SERVICE on the host), then run pulumi up again; the node stays cordoned"
    wait_node True
  elif [ "$have_sum" = "$want_sum" ]; then
    echo "gpucell: k3s $K3S_VERSION already runs this config; nothing to do"
  fi
  exit 0
fi

# A server told to initialise etcd, without etcd data of its own, must not start a second cluster beside a live
# one (a reinstalled init server would): when the API endpoint already answers, refuse.
if [ "$K3S_EXEC" = server ] && grep -qx 'cluster-init: true' "$work/config.yaml" \
  && ! as_root test -d "$ETCD_DATA_DIR" && curl -sfk --max-time 5 "$API_URL/cacerts" >/dev/null 2>&1; then
  echo "gpucell: refusing to initialise a new etcd cluster on $NODE_NAME: $API_URL already answers, so the" \
    "cell exists. A server without etcd data must join it: set etcd.initServer to a running server." >&2
  exit 1
fi

# The installer of this release, from the release's tag (not a moving URL), run only when it is the reviewed
# one. Fetched before anything is stopped, so that a download or checksum failure leaves the node as it was.
curl -sfL --retry 3 "$INSTALLER_URL" -o "$work/install.sh"
have_installer="$(sha256sum "$work/install.sh" | cut -d ' ' -f 1)"
if [ "$have_installer" != "$INSTALLER_SHA256" ]; then
  echo "gpucell: $INSTALLER_URL has sha256 $have_installer, not the pinned $INSTALLER_SHA256; nothing was" \
    "changed. Review that script; if it is the one you want, set k3s.installerSha256 to its checksum" >&2
  exit 1
fi

@@JOIN_WAIT@@
# Ready before the restart: then it must be Ready again, on the new version, before this script succeeds.
was="$(node_status)"

# A different set of the kubelet-arg entries its checkpoints depend on (a changed topology profile) must not
# meet the kubelet's old checkpoints: the kubelet refuses to start when its CPU or memory manager policy differs
# from the one in its state file. As the Kubernetes docs prescribe: stop the kubelet (the whole k3s service),
# remove the state files, and start it with the new options (the installer below restarts the service).
# Other changes (labels, the CIS profile's kubelet arguments) leave the state files alone.
want_kubelet_args="$(kubelet_args <"$work/config.yaml")"
have_kubelet_args=""
if as_root test -f "$CONFIG_FILE"; then
  have_kubelet_args="$(as_root cat "$CONFIG_FILE" | kubelet_args)"
fi
if [ "$want_kubelet_args" != "$have_kubelet_args" ]; then
  # Stopped even when failed or restarting (systemd would restart it with the old config and old checkpoint).
  if as_root systemctl cat "$K3S_SERVICE" >/dev/null 2>&1; then
    as_root systemctl stop "$K3S_SERVICE"
  fi
  as_root rm -f @@STATE_FILES@@
  echo "gpucell: kubelet-arg changed; removed the kubelet's CPU and memory manager state"
fi

# (Re)install: the files first (k3s reads them at start), then the installer writes the systemd unit and
# restarts the service.
for i in "${!MANAGED[@]}"; do
  as_root install -D -m "${MODES[$i]}" "${STAGED[$i]}" "${MANAGED[$i]}"
done
@@AFTER_FILES@@
# The installer (re)starts the service and waits for it: k3s's units are Type=notify with TimeoutStartSec=0, so the
# wait has no end while k3s cannot get its node's configuration. The cell refusing this node's password is such a
# case: it already knows a node of this name from another machine (a re-imaged host; k3s-io/k3s#6054, #802), and
# k3s retries for ever. So the installer runs in the background while k3s's journal is watched; on that refusal
# the service is stopped (which ends the installer's wait) and the script stops with the way out.
since="$(date '+%Y-%m-%d %H:%M:%S')"
as_root env INSTALL_K3S_VERSION="$K3S_VERSION" INSTALL_K3S_EXEC="$K3S_EXEC" \
  sh "$work/install.sh" </dev/null &
rejected=""
while [ -n "$(jobs -rp)" ]; do
  if password_rejected "$since"; then
    rejected=1
    as_root systemctl stop "$K3S_SERVICE" || true
    break
  fi
  sleep 5
done
installed=0
wait "$!" || installed=$?
if [ -n "$rejected" ]; then
  echo "gpucell: the cell refused $NODE_NAME's node password (k3s: 'Node password rejected'): it knows a node" \
    "$NODE_NAME registered from another machine, so this host was re-imaged (or another host has its name)." \
    "k3s $K3S_VERSION is installed here with $K3S_SERVICE stopped; the cell is unchanged. To bring a re-imaged" \
    "host back under its name, remove $NODE_NAME from the config in one pulumi up (its old Node, its" \
    "node-password secret kube-system/$NODE_NAME.node-password.k3s and a server's etcd member go) and add it" \
    "back in the next (docs/operations.md, 'A re-imaged host')" >&2
  exit 1
fi
if [ "$installed" != 0 ]; then
  echo "gpucell: the k3s installer failed (exit $installed); see journalctl -u $K3S_SERVICE" >&2
  exit "$installed"
fi
echo "gpucell: k3s $K3S_VERSION ($K3S_EXEC) installed"
@@TAIL@@
