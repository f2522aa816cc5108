"""S3's ranges through `HTTPTransport` on presigned URLs (`SignedURLs`, bodies read straight into
their destination), and obstore's own client where the store cannot sign."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest

from bench.link.servers import S3_CREDENTIALS
from loader.errors import RemoteError
from loader.remote import transport
from loader.remote.registry import open_store
from loader.remote.transport import HTTPTransport, ObstoreTransport, SignedURLs
from loader.remote.urls import parse_url

obstore_store = pytest.importorskip("obstore.store")

ENDPOINT = "http://127.0.0.1:9"


def _store(**credentials: str):
    return obstore_store.S3Store(
        "bucket",
        endpoint=ENDPOINT,
        region="us-east-1",
        client_options={"allow_http": True},
        **credentials,
    )


def test_a_signed_url_is_reused_for_a_while_then_signed_again(monkeypatch):
    urls = SignedURLs(_store(access_key_id="k", secret_access_key="s"), lifetime_s=60, reuse_s=30)
    now = [1000.0]
    monkeypatch.setattr(transport.time, "monotonic", lambda: now[0])
    first = urls("sa3/model.safetensors")
    split = urllib.parse.urlsplit(first)
    url = f"{split.scheme}://{split.netloc}{split.path}"
    assert url == f"{ENDPOINT}/bucket/sa3/model.safetensors"
    query = urllib.parse.parse_qs(split.query)
    assert query["X-Amz-Expires"] == ["60"] and query["X-Amz-Signature"][0]
    now[0] += 29
    assert urls("sa3/model.safetensors") is first  # within `reuse_s`: the same URL
    now[0] += 2
    assert urls("sa3/model.safetensors") is not first  # signed again
    assert urls("other.safetensors") != first  # one URL per object


def _s3_environment(monkeypatch) -> None:
    for key, value in {**S3_CREDENTIALS, "AWS_ENDPOINT_URL": ENDPOINT}.items():
        monkeypatch.setenv(key, value)


def test_s3_ranges_go_through_http_client_on_presigned_urls(monkeypatch):
    _s3_environment(monkeypatch)
    store = open_store(parse_url("s3://bucket/sa3/model.safetensors"))
    assert isinstance(store.transport, HTTPTransport)
    origin, target = store.transport._target("sa3/model.safetensors")
    assert origin == ("http", "127.0.0.1:9")
    assert target.startswith("/bucket/sa3/model.safetensors?") and "X-Amz-Signature=" in target


def test_a_store_that_cannot_sign_reads_through_obstore(monkeypatch):
    import obstore

    _s3_environment(monkeypatch)

    def refuse(*args, **kwargs):
        raise RuntimeError("no credentials")

    monkeypatch.setattr(obstore, "sign", refuse)
    store = open_store(parse_url("s3://bucket/sa3/model.safetensors"))
    assert isinstance(store.transport, ObstoreTransport)


def test_an_s3_ca_bundle_is_trusted_as_the_aws_clients_do(monkeypatch):
    import ssl

    _s3_environment(monkeypatch)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://127.0.0.1:9")
    paths = ssl.get_default_verify_paths()
    bundle = next((f for f in (paths.cafile, paths.openssl_cafile) if f and Path(f).is_file()), "")
    if not bundle:
        pytest.skip("no CA bundle file on this machine")
    monkeypatch.setenv("AWS_CA_BUNDLE", bundle)
    with_bundle = open_store(parse_url("s3://bucket/model.safetensors")).transport
    assert isinstance(with_bundle, HTTPTransport) and isinstance(with_bundle._tls, ssl.SSLContext)
    monkeypatch.delenv("AWS_CA_BUNDLE")
    without = open_store(parse_url("s3://bucket/model.safetensors")).transport
    assert isinstance(without, HTTPTransport) and without._tls is None
    monkeypatch.setenv("AWS_CA_BUNDLE", "/nonexistent/ca.pem")
    with pytest.raises(RemoteError, match="AWS_CA_BUNDLE"):
        open_store(parse_url("s3://bucket/model.safetensors"))
