# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).


# k3s cannot turn secrets encryption on or off in a running cluster ("Starting K3s without encryption and
# enabling it at a later time is currently not supported", docs.k3s.io/cli/secrets-encrypt): a server whose
# datastore exists keeps what it was initialised with, and a config that changes it is refused before anything
# is touched.
readonly WANT_SECRETS_ENCRYPTION=@@WANT@@
if as_root test -d @@ETCD_DIR@@; then
  have_secrets_encryption=false
  if as_root test -f @@ENCRYPTION_CONFIG@@; then
    have_secrets_encryption=true
  fi
  if [ "$have_secrets_encryption" != "$WANT_SECRETS_ENCRYPTION" ]; then
    echo "gpucell: this server's cluster runs with secrets-encryption $have_secrets_encryption, which k3s cannot" \
      "change on a running cluster; set k3s.secretsEncryption to $have_secrets_encryption (nothing was changed)" >&2
    exit 1
  fi
fi
