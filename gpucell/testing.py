"""A test kit for Pulumi programs built on gpucell: mocks that answer the way the real providers would.

Pulumi's documented unit-test mechanism (``pulumi.runtime.set_mocks``) echoes inputs back as outputs, which is
not enough for a cell: :class:`~gpucell.k3s.cluster.K3sCluster` reads the admin kubeconfig from the first server (a
``command:remote:Command``'s ``stdout``) and checks it before handing it to the Kubernetes provider, and
passwords come from ``random`` resources. :class:`CellMocks` supplies what those providers compute:

- ``<name>-kubeconfig`` commands: a kubeconfig as k3s writes it (``server: https://127.0.0.1:<listen port>``, a
  block-style line the cell rewrites to its API endpoint), on the port the first server's ``config.yaml`` sets
  (``https-listen-port``, e.g. a single server on another ``network.apiPort``), else k3s's default 6443;
- ``random:index/randomPassword:RandomPassword``: a fixed ``result`` (declared secret by the provider SDK);
- a read of a ``<cluster>-kubeconfig`` Secret (a tenant cluster's, which Cluster API writes): ``data.value``, a
  kubeconfig (base64) as Cluster API writes it (:func:`fake_cluster_api_kubeconfig`);
- everything else: its inputs, as Pulumi's own mocks do.

With Pulumi's own idiom::

    import pulumi
    from gpucell.testing import CellMocks

    pulumi.runtime.set_mocks(CellMocks(), preview=False)

    @pulumi.runtime.test
    def test_cell_exports_its_api_url():
        cell = RegionalCell("fra1", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("key")))
        return cell.api_server_url.apply(lambda url: ...)

or, to assert on everything a program registers (types, parents, inputs, options, dependencies, secrets), with
the stack config the program reads as the Pulumi CLI hands it over (full keys ``<project>:<key>``, secret keys
listed; the project is ``test`` unless ``project`` says otherwise)::

    from gpucell.testing import run_program

    result = run_program(build_my_cells, project="my-platform",
                         config={"my-platform:sshPrivateKey": "not-a-real-key"},
                         secret_keys=["my-platform:sshPrivateKey"])
    assert result.named("fra1-k8s").inputs["kubeconfig"] == "[secret]"

Both run in-process: no Pulumi CLI, no cluster, no network.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

from gpucell.cluster import listen_port
from gpucell.engine import mock_engine
from gpucell.engine.mock_engine import PlanResult, Registration
from gpucell.spec import CellSpec

__all__ = [
    "FAKE_PASSWORD",
    "CellMocks",
    "PlanResult",
    "Registration",
    "fake_cluster_api_kubeconfig",
    "fake_kubeconfig",
    "provider_outputs",
    "read_outputs",
    "run_program",
]

FAKE_PASSWORD = "FAKE-PASSWORD"
"""The ``result`` of every ``RandomPassword`` under :class:`CellMocks` (the k3s token, notebook tokens)."""

_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: RkFLRS1DQQ==
    server: https://127.0.0.1:{port}
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    client-certificate-data: RkFLRS1DRVJU
    client-key-data: RkFLRS1LRVk=
"""


def fake_kubeconfig(port: int = 6443) -> str:
    """A kubeconfig shaped like the one k3s writes to ``/etc/rancher/k3s/k3s.yaml`` (server on 127.0.0.1:``port``).

    The certificate fields hold base64 placeholders, not real keys.
    """
    return _KUBECONFIG.format(port=port)


FAKE_CLUSTER_IP = "10.43.0.100"
"""The ``<c>-lb`` ClusterIP of :func:`fake_cluster_api_kubeconfig`'s server: in k3s's default service range
``10.43.0.0/16`` (the cell's default ``network.serviceCidr``)."""


def fake_cluster_api_kubeconfig(cluster: str, server: str = f"https://{FAKE_CLUSTER_IP}:6443") -> str:
    """A kubeconfig shaped like the one Cluster API writes into a tenant cluster's ``<cluster>-kubeconfig`` Secret
    (Cluster API v1.14.0 ``util/kubeconfig`` ``New``, keys sorted as ``clientcmd.Write`` writes them): cluster
    ``<cluster>``, user ``<cluster>-admin`` with a client certificate and key, context ``<cluster>-admin@<cluster>``;
    ``server`` is CAPK's ``controlPlaneEndpoint``, the ``<cluster>-lb`` ClusterIP. Base64 placeholders, not keys."""
    user = f"{cluster}-admin"
    return (
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: RkFLRS1DQQ==\n"
        f"    server: {server}\n  name: {cluster}\ncontexts:\n- context:\n    cluster: {cluster}\n"
        f"    user: {user}\n  name: {user}@{cluster}\ncurrent-context: {user}@{cluster}\nkind: Config\n"
        f"preferences: {{}}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: RkFLRS1DRVJU\n"
        "    client-key-data: RkFLRS1LRVk=\n"
    )


_LISTEN_PORT = re.compile(r"^https-listen-port:[ \t]*(\d+)[ \t]*$", re.MULTILINE)
"""The k3s option in a server's ``config.yaml`` (only written when the port is not 6443)."""


def provider_outputs(
    cells: Iterable[CellSpec] = (), *, password: str = FAKE_PASSWORD
) -> Callable[[MockResourceArgs], dict[str, Any]]:
    """What real providers compute for a cell's resources, as ``args -> extra state`` for the mock engine.

    The kubeconfig a first server prints names the port it listens on (:func:`gpucell.cluster.listen_port`:
    a single server without ``network.apiEndpoint`` listens on ``network.apiPort``). That port is taken from the
    ``https-listen-port`` of the ``config.yaml`` the server's install command writes (registered before the
    kubeconfig read, which waits for every server), else from ``cells``, else k3s's default 6443. So ``cells`` is
    only needed for a program that reads a kubeconfig without installing the server in the same run.
    """
    ports = {str(cell.servers[0][1].address): listen_port(cell.network) for cell in cells}
    seen: dict[str, int] = {}

    def outputs(args: MockResourceArgs) -> dict[str, Any]:
        if args.typ == "command:remote:Command":
            host = str((args.inputs.get("connection") or {}).get("host", ""))
            if args.name.endswith("-kubeconfig"):
                return {"stdout": fake_kubeconfig(seen.get(host) or ports.get(host, 6443))}
            found = _LISTEN_PORT.search(str(args.inputs.get("create") or ""))
            if found is not None:
                seen[host] = int(found.group(1))
        if args.typ == "random:index/randomPassword:RandomPassword":
            return {"result": password}
        return read_outputs(args)

    return outputs


def read_outputs(args: MockResourceArgs) -> dict[str, Any]:
    """What the cluster answers when the program reads an object it does not manage (``Resource.get``), as extra
    state for the mock engine: a tenant cluster's ``<cluster>-kubeconfig`` Secret (ID ``<namespace>/<cluster>-
    kubeconfig``), which Cluster API writes, holds :func:`fake_cluster_api_kubeconfig` (base64) in ``data.value``;
    anything else, nothing. A ``computed`` function of one's own can end with ``return read_outputs(args)``."""
    secret = str(args.resource_id or "").rpartition("/")[2]
    if args.typ == "kubernetes:core/v1:Secret" and secret.endswith("-kubeconfig"):
        text = fake_cluster_api_kubeconfig(secret.removesuffix("-kubeconfig"))
        return {"data": {"value": base64.b64encode(text.encode()).decode()}}
    return {}


class CellMocks(pulumi.runtime.Mocks):
    """Pulumi mocks for programs using gpucell components: inputs echoed back, plus :func:`provider_outputs`.

    ``CellMocks()`` fits any cell, a single server on another ``network.apiPort`` included (the port comes from
    the server's install command). ``cells`` and ``password`` as in :func:`provider_outputs`; ``calls`` maps an
    invoke token to its result (default: ``{}`` for every invoke). Config the program reads comes from
    ``pulumi.runtime.set_all_config`` under Pulumi's own idiom (or use :func:`run_program`'s ``config``).
    """

    def __init__(
        self,
        cells: Iterable[CellSpec] = (),
        *,
        password: str = FAKE_PASSWORD,
        calls: Mapping[str, dict[str, Any]] | None = None,
    ) -> None:
        self._outputs = provider_outputs(cells, password=password)
        self._calls = dict(calls or {})

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """``(<name>-id, inputs + computed outputs)``."""
        return f"{args.name}-id", {**args.inputs, **self._outputs(args)}

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        """The configured result of ``args.token``, else ``{}``."""
        return dict(self._calls.get(args.token, {})), []  # a list: the SDK iterates the failures


def run_program(
    program: Callable[[], Any],
    *,
    cells: Iterable[CellSpec] = (),
    config: Mapping[str, Any] | None = None,
    secret_keys: list[str] | None = None,
    preview: bool = False,
    project: str = "test",
    stack: str = "test",
) -> PlanResult:
    """Run ``program`` under fresh mocks with :func:`provider_outputs` and return everything it registered.

    ``config`` maps full keys (``myproject:key``) to values and ``secret_keys`` lists the secret ones, as the
    Pulumi CLI hands them to a program. With ``preview=True`` what providers compute stays unknown, as in a first
    ``pulumi preview``. The result's :class:`Registration` entries carry type, name, parent, provider,
    dependencies, options and inputs (secrets shown as ``"[secret]"``). Exceptions raised by ``program``
    propagate.
    """
    return mock_engine.run_program(
        program,
        project=project,
        stack=stack,
        config=config,
        secret_keys=secret_keys,
        preview=preview,
        computed=None if preview else provider_outputs(cells),
    )
