#!/usr/bin/env bash
# @@TITLE@@
# Rendered by gpucell (@@SOURCE@@); run over SSH by pulumi-command.
set -euo pipefail
umask 077

# Root, or password-less sudo for the SSH user (sudo -n fails instead of waiting for a password).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo -n "$@"
  fi
}
