"""The hosts downloads contact and Cilium's FQDN pattern semantics, as the custom-egress admission uses them."""

from __future__ import annotations

from ipaddress import IPv4Network

import pytest

from gpucell.catalog.download_hosts import (
    HUGGING_FACE_HOSTS,
    disk_source_hosts,
    fqdn_allows,
    refused_host,
    registry_of,
    storage_uri_hosts,
)


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        ("docker://quay.io/containerdisks/ubuntu:24.04", "quay.io"),
        ("docker://ubuntu:24.04", "docker.io"),
        ("docker://library/ubuntu", "docker.io"),
        ("docker://registry.example.net:5000/vm/img:1", "registry.example.net"),
        ("docker://localhost/img", "localhost"),
    ],
)
def test_registry_of_follows_the_docker_reference_rule(image: str, registry: str) -> None:
    assert registry_of(image) == registry


def test_disk_source_hosts() -> None:
    assert disk_source_hosts("docker://quay.io/containerdisks/fedora:41", None) == (
        "quay.io",
        "cdn.quay.io",
        "cdn01.quay.io",
        "cdn02.quay.io",
        "cdn03.quay.io",
    )
    assert disk_source_hosts("docker://ubuntu", None) == (
        "registry-1.docker.io",
        "auth.docker.io",
        "production.cloudflare.docker.com",
    )
    assert disk_source_hosts("docker://registry.example.net/img", None) == ("registry.example.net",)
    assert disk_source_hosts(None, "https://images.example.net:8443/a.qcow2") == ("images.example.net",)
    assert disk_source_hosts(None, None) == ()


def test_storage_uri_hosts() -> None:
    assert storage_uri_hosts("hf://org/model") == HUGGING_FACE_HOSTS
    assert storage_uri_hosts("s3://acme-models/fraud") == ("s3.amazonaws.com", "acme-models.s3.amazonaws.com")
    assert storage_uri_hosts("s3://acme-models/fraud", s3_region="eu-central-1") == (
        "s3.eu-central-1.amazonaws.com",
        "acme-models.s3.eu-central-1.amazonaws.com",
    )
    assert storage_uri_hosts("s3://m/x", s3_endpoint="https://minio.example.net:9000") == ("minio.example.net",)
    assert storage_uri_hosts("s3://m/x", s3_endpoint="minio.example.net") == ("minio.example.net",)
    assert storage_uri_hosts("gs://bucket/model") == ("storage.googleapis.com",)
    assert storage_uri_hosts("https://models.example.net/m.onnx") == ("models.example.net",)
    assert storage_uri_hosts("oci://registry.example.net/models/llama:1") == ()  # a modelcar: the node pulls it
    assert storage_uri_hosts("pvc://models/llama") == ()


@pytest.mark.parametrize(
    ("pattern", "host", "allowed"),
    [
        ("quay.io", "quay.io", True),
        ("quay.io", "cdn.quay.io", False),
        ("*.quay.io", "cdn01.quay.io", True),
        ("*.quay.io", "quay.io", False),
        ("*.hf.co", "cas-bridge.xethub.hf.co", False),
        ("**.hf.co", "cas-bridge.xethub.hf.co", True),
        ("**.hf.co", "cdn-lfs.hf.co", True),
        ("**.hf.co", "hf.co", False),
        ("**.hf.co", "evilhf.co", False),
        ("HuggingFace.co.", "huggingface.co", True),
    ],
)
def test_fqdn_patterns_match_as_cilium_does(pattern: str, host: str, allowed: bool) -> None:
    assert fqdn_allows(pattern, host) is allowed


def test_refused_host_checks_names_and_addresses() -> None:
    cidrs = [IPv4Network("10.200.0.0/16")]
    assert refused_host(("quay.io", "10.200.1.1"), ["quay.io"], cidrs) is None
    assert refused_host(("quay.io", "10.201.1.1"), ["quay.io"], cidrs) == "10.201.1.1"
    assert refused_host(HUGGING_FACE_HOSTS, ["huggingface.co", "*.huggingface.co", "*.hf.co"], []) == (
        "cas-bridge.xethub.hf.co"
    )
