"""`s3://bucket/key`: an S3 bucket (or an S3-compatible server), one object, an index or a prefix.

The endpoint and credentials come from the usual AWS variables (`AWS_ENDPOINT_URL_S3` /
`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, ...) through `obstore` (Rust's `object_store`), which
signs and lists a prefix (its index, else every `*.safetensors` right under it). The ranges go
through `HTTPTransport` on URLs obstore presigns (`SignedURLs`: obstore signs, `http.client` reads
each body straight into its destination, without obstore's copy of it: docs/results.md, "The
remote reader's CPU per byte"), trusting `AWS_CA_BUNDLE` where it is set, as the AWS clients do;
through obstore's own client where the store cannot sign (no credentials: a public bucket read
unsigned).
"""

from __future__ import annotations

import os
import ssl
import urllib.parse
from typing import Any

from loader.errors import RemoteError
from loader.remote.ranges import TimeLimits
from loader.remote.store import RemoteURL, Store, bucket_store, obstore_lister, obstore_settings
from loader.remote.transport import HTTPTransport, ObstoreTransport, SignedURLs, Transport


def s3_endpoint() -> str | None:
    """The S3 endpoint from the usual AWS variables (None: AWS itself)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _open(url: RemoteURL, limits: TimeLimits) -> Store:
    from obstore.store import S3Store

    endpoint = s3_endpoint()
    extra: dict[str, Any] = {"endpoint": endpoint} if endpoint else {}
    plain = bool(endpoint) and not str(endpoint).startswith("https://")
    store = S3Store(
        url.root,
        **obstore_settings(plain, limits),
        **extra,
    )
    return Store(_transport(store, url, limits), url, obstore_lister(store, url))


def _transport(store: Any, url: RemoteURL, limits: TimeLimits) -> Transport:
    """Presigned URLs read by `HTTPTransport`; obstore's client where the store cannot sign."""
    signed = SignedURLs(store)
    try:
        probe = signed(url.path or "probe")
    except Exception:  # noqa: BLE001 - no credentials to sign with: obstore reads unsigned
        return ObstoreTransport(store, limits=limits)
    origin = urllib.parse.urlsplit(probe)
    return HTTPTransport(
        f"{origin.scheme}://{origin.netloc}",
        limits=limits,
        locate=signed,
        tls=_aws_ca_bundle(url),
    )


def _aws_ca_bundle(url: RemoteURL) -> ssl.SSLContext | None:
    """A TLS context trusting `AWS_CA_BUNDLE` where it is set (None: the system's authorities)."""
    bundle = os.environ.get("AWS_CA_BUNDLE")
    if not bundle:
        return None
    try:
        return ssl.create_default_context(cafile=bundle)
    except (OSError, ssl.SSLError) as e:
        failure = RemoteError(
            f"{url}: AWS_CA_BUNDLE={bundle!r} cannot be read as certificates ({e}); point it at "
            "a PEM file of certificate authorities, or unset it"
        )
    raise failure


KIND = bucket_store("s3", _open, credentials="use s3:// with AWS_ACCESS_KEY_ID ...")
