"""Keep the generated parts of ``docs/components/<page>.md`` current: the pinned versions, the ``*Args`` tables and
what the page's example renders.

A page is Markdown written by hand with three blocks this module writes, each between ``<!-- generated: NAME -->``
and ``<!-- end generated -->``:

- ``pins``: the ``versions.*`` keys the component installs, their defaults and where the pin lives;
- ``args``: each component's ``*Args`` dataclass, field by field (its annotation as written, its default, its
  docstring), and ``from_cell`` when it has one;
- ``renders``: what the page's first ```` ```python ```` block registers when it runs as a Pulumi program under the
  mock engine (:func:`gpucell.testing.run_program`, with the config keys of :data:`EXAMPLE_CONFIG`).

Run ``python -m tools.component_pages`` to rewrite the blocks in place (``--check``: list the stale pages and exit
1 instead); ``tests/test_docs.py`` fails when a page is stale.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucell.engine.mock_engine import PlanResult, Registration
from gpucell.package.inputs import field_docs
from gpucell.spec.versions import Versions
from gpucell.testing import run_program
from tools.docgen import plain_markdown

__all__ = ["EXAMPLE_CONFIG", "PAGES", "Page", "example", "render_page", "run_example"]

DOCS = Path(__file__).resolve().parent.parent / "docs" / "components"

EXAMPLE_CONFIG = {
    "test:kubeconfig": "apiVersion: v1\nkind: Config\n",
    "test:sshPrivateKey": "not-a-real-key",
    "test:backupBucket": "AKIAEXAMPLE:not-a-real-secret",
    "test:backupPassword": "not-a-real-password",
}
"""What the examples read with ``pulumi.Config()`` (project ``test``): every key is a secret."""


@dataclass(frozen=True)
class Page:
    """One page: ``docs/components/<slug>.md``."""

    slug: str
    components: tuple[str, ...]
    """``module:Class`` of each component the page describes (its ``*Args`` is ``<Class>Args`` beside it)."""
    versions: tuple[str, ...] = ()
    """The :class:`~gpucell.spec.versions.Versions` fields it installs."""

    @property
    def path(self) -> Path:
        """The page's file."""
        return DOCS / f"{self.slug}.md"

    def classes(self) -> list[tuple[type, type]]:
        """``(component, args)`` classes."""
        found = []
        for spec in self.components:
            module, name = spec.split(":")
            loaded = importlib.import_module(module)
            found.append((getattr(loaded, name), getattr(loaded, f"{name}Args")))
        return found


C = "gpucell.components."
PAGES = (
    Page("k3s", ("gpucell.k3s.cluster:K3sCluster",), ("k3s", "kube_vip")),
    Page("cilium", (C + "cilium:Cilium",), ("cilium",)),
    Page("storage", (C + "storage:Storage",), ("longhorn",)),
    Page("kubevirt", (C + "kubevirt:KubeVirt",), ("kubevirt",)),
    Page("cdi", (C + "cdi:Cdi",), ("cdi",)),
    Page("gpu-operator", (C + "gpu_operator:GpuOperator",), ("gpu_operator",)),
    Page("dra-driver", (C + "dra_driver:DraDriver",), ("dra_driver",)),
    Page("network-operator", (C + "network_operator:NetworkOperator",), ("network_operator",)),
    Page("cert-manager", (C + "cert_manager:CertManager",), ("cert_manager",)),
    Page("kserve", (C + "kserve:KServe",), ("kserve",)),
    Page("keda", (C + "keda:Keda",), ("keda",)),
    Page("metrics", (C + "metrics:Metrics",), ("kube_prometheus_stack",)),
    Page("backups", (C + "backups:Backups",), ("velero", "velero_plugin_for_aws", "kubevirt_velero_plugin")),
    Page("csi-snapshots", (C + "csi_snapshots:CsiSnapshots",), ("external_snapshotter",)),
    Page("priority-classes", (C + "priority_classes:PriorityClasses",)),
    Page("cluster-api", (C + "cluster_api:ClusterApi",), ("cluster_api", "capk", "caaph", "capi_operator")),
    Page("cluster-deny", (C + "cluster_deny:ClusterDeny",)),
    Page(
        "traffic",
        (C + "gateway_api:GatewayApiCrds", C + "lb_ipam:LoadBalancerAddresses", C + "gateway:EndpointGateway"),
        ("gateway_api",),
    ),
    Page("images", (C + "images:ImageCatalog",)),
    Page("instancetypes", (C + "instancetypes:Instancetypes",)),
)
"""Every page, in the order of the index (``docs/components/README.md``)."""

_BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL)
_EXAMPLE = re.compile(r"^```python\n(?P<code>.*?)^```$", re.DOTALL | re.MULTILINE)


# -- the Args ------------------------------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return plain_markdown(" ".join(text.split())).replace("|", "\\|")


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        return f"`{field.default!r}`"
    if field.default_factory is not dataclasses.MISSING:
        factory: Callable[[], Any] = field.default_factory
        if isinstance(factory, type) and factory not in (dict, list, tuple, set, frozenset):
            return f"`{factory.__name__}()`"
        return f"`{factory()!r}`"
    return "required"


def args_block(page: Page) -> str:
    """The ``args`` block: a table per component's ``*Args``."""
    lines: list[str] = []
    for component, args in page.classes():
        docs = field_docs(args)
        lines += [
            f"`{args.__name__}` (`{args.__module__}`), the inputs of `{component.__name__}(name, args, opts)`:",
            "",
            "| field | type | default | what it does |",
            "|---|---|---|---|",
        ]
        for field in dataclasses.fields(args):
            type_name = str(field.type).replace("|", "\\|")
            lines.append(f"| `{field.name}` | `{type_name}` | {_default(field)} | {_one_line(docs[field.name])} |")
        from_cell = getattr(args, "from_cell", None)
        if from_cell is not None:
            lines += ["", f"`{args.__name__}.from_cell`: {_one_line(inspect.getdoc(from_cell) or '')}"]
        lines.append("")
    return "\n".join(lines)


# -- the pins ------------------------------------------------------------------------------------------------------


def pins_block(page: Page) -> str:
    """The ``pins`` block: the ``versions.*`` keys of the page, their defaults and docs."""
    fields = Versions.model_fields
    lines = [
        "The versions are pinned in `gpucell/spec/versions.py` (`Versions`); a stack pins others under",
        "`gpucell:regions.<region>.versions` (docs/config.md), a Python program passes them in the `*Args`.",
        "",
        "| key | pinned | what |",
        "|---|---|---|",
    ]
    for name in page.versions:
        field = fields[name]
        lines.append(f"| `versions.{field.alias or name}` | `{field.default}` | {_one_line(field.description or '')} |")
    return "\n".join(lines) + "\n"


# -- what the example renders ----------------------------------------------------------------------------------------


def example(text: str) -> str:
    """The page's example: its first ```` ```python ```` block."""
    found = _EXAMPLE.search(text)
    assert found is not None, "a component page has a ```python example"
    return found["code"]


def run_example(code: str, name: str = "<example>") -> PlanResult:
    """``code`` run as a Pulumi program under the mock engine, with :data:`EXAMPLE_CONFIG`."""
    compiled = compile(code, name, "exec")
    return run_program(
        lambda: exec(compiled, {"__name__": "__main__"}),  # the docs' own example, run as its program
        config=EXAMPLE_CONFIG,
        secret_keys=list(EXAMPLE_CONFIG),
    )


def _object(resource: Registration) -> str:
    """What Kubernetes (or the host) gets from ``resource``, in a few words."""
    inputs = resource.inputs
    metadata = inputs.get("metadata") if isinstance(inputs.get("metadata"), dict) else {}
    if resource.type == "kubernetes:helm.sh/v3:Release":
        name, chart, version, namespace = (inputs.get(k, "") for k in ("name", "chart", "version", "namespace"))
        return f"Helm release `{name}`: chart `{chart}` `{version}` in `{namespace}`"
    if resource.type.startswith("kubernetes:yaml"):
        files = inputs.get("files") or inputs.get("file") or ""
        return f"the objects of `{files if isinstance(files, str) else ', '.join(files)}`"
    if resource.type.startswith("command:"):
        return "a command over SSH"
    if resource.type.startswith("gpucell:"):
        return "the component"
    if metadata:
        kind = inputs.get("kind") or resource.type.rsplit(":", 1)[-1]
        where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
        return f"`{kind}` `{where}{metadata.get('name', '')}`"
    return ""


def _order(resource: Registration) -> tuple[str, bool, str, str]:
    """Each component, then its children by type and name."""
    component = resource.type.startswith("gpucell:")
    parent = resource.name if component else (resource.parent or "").rsplit("::", 1)[-1]
    return (parent, not component, resource.type, resource.name)


_MOST = 8
"""Rows of one type shown before the rest are counted."""


def renders_block(page: Page) -> str:
    """The ``renders`` block: what the example registers, by type (the provider and the stack left out)."""
    result = run_example(example(page.path.read_text()), str(page.path))
    shown = sorted((r for r in result.resources if not r.type.startswith("pulumi:")), key=_order)
    by_type: dict[tuple[str, str], list[Registration]] = {}
    for resource in shown:  # registration order varies (Outputs resolve in any order): sorted, then grouped
        by_type.setdefault((_order(resource)[0], resource.type), []).append(resource)
    lines = [
        f"The example registers {len(shown)} resources under the mock engine (`gpucell.testing.run_program`; the",
        "Kubernetes provider left out), each component followed by its children:",
        "",
        "| type | name | object |",
        "|---|---|---|",
    ]
    for (_component, type_token), resources in by_type.items():
        for resource in resources[:_MOST]:
            lines.append(f"| `{type_token}` | `{resource.name}` | {_object(resource)} |")
        if len(resources) > _MOST:
            lines.append(f"| `{type_token}` | ... | {len(resources) - _MOST} more |")
    return "\n".join(lines) + "\n"


# -- the page --------------------------------------------------------------------------------------------------------

_BLOCKS: dict[str, Callable[[Page], str]] = {"pins": pins_block, "args": args_block, "renders": renders_block}


def render_page(page: Page) -> str:
    """The page's text with its generated blocks current."""
    text = page.path.read_text()
    names = [m["name"] for m in _BLOCK.finditer(text)]
    expected = ["pins", "args", "renders"] if page.versions else ["args", "renders"]
    assert names == expected, f"{page.path.name}: generated blocks {names}, expected {expected}"
    return _BLOCK.sub(lambda m: m[1] + _BLOCKS[m["name"]](page) + m[4], text)


def main(argv: list[str]) -> int:
    """Rewrite every page's generated blocks (``--check``: report stale pages, exit 1)."""
    stale = []
    for page in PAGES:
        current = render_page(page)
        if current != page.path.read_text():
            stale.append(page.path.name)
            if "--check" not in argv:
                page.path.write_text(current)
    if stale:
        print(("stale: " if "--check" in argv else "rewrote: ") + ", ".join(stale))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
