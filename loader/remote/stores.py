"""From a parsed URL to a store: the transport its ranges go through, and its shard files.

HTTP's ranges go through `loader.remote.transport.HTTPTransport`; so do S3's, on URLs that
`obstore` presigns (`SignedURLs`; obstore also lists a prefix, and reads a bucket it cannot sign
for). The Hub goes through `huggingface_hub` for what is the Hub's own:
the endpoint (`HF_ENDPOINT`), the revision (pinned to its commit with `model_info`, so every range
reads one commit), the token (`HF_TOKEN` or the stored login) and gated repos (its exceptions,
turned into one-line errors here, the token scrubbed and no exception chained); the bytes are then
range requests on the repo's `resolve/<commit>/` URLs through `HTTPTransport`, with the token as
a header that no message repeats and that no redirect to another origin carries.
"""

from __future__ import annotations

import json
import os
import posixpath
import ssl
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from loader.errors import RemoteError
from loader.remote.ranges import TimeLimits, one_line, scrub
from loader.remote.transport import HTTPTransport, ObstoreTransport, SignedURLs, Transport
from loader.remote.urls import INDEX_SUFFIX, RemoteURL, s3_endpoint

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

HF_DEFAULT_ENDPOINT = "https://huggingface.co"
T = TypeVar("T")


@dataclass(frozen=True)
class Store:
    """A store's transport, the URL paths are shown under, and the token to keep out of messages.

    Attributes:
        transport: what its range requests go through (`loader.remote.transport`).
        store: the obstore store (S3: for listing a prefix), or None.
        url: the parsed URL this store serves.
        names: the repo's file names where the store can list them (the Hub), else None.
        secret: a token sent with every request (never printed), or None.
        commit: the Hub commit every request reads (None elsewhere).
        endpoint: the Hub's endpoint (None elsewhere).
    """

    transport: Transport
    store: Any
    url: RemoteURL
    names: tuple[str, ...] | None = None
    secret: str | None = None
    commit: str | None = None
    endpoint: str | None = None


#: A request that has not finished by then failed (then retried): a stall is caught sooner by
#: the idle timeout (`read_timeout`); this bounds a request that trickles.
REQUEST_TIMEOUT = "600s"
_NO_RETRY: RetryConfig = {"max_retries": 0}  # loader.remote.ranges bounds the retries itself


def _client_options(scheme: str, limits: TimeLimits) -> ClientConfig:
    return {
        "allow_http": scheme != "https",
        "timeout": f"{limits.deadline_s:g}s" if limits.deadline_s else REQUEST_TIMEOUT,
        "connect_timeout": f"{limits.connect_s:g}s",
        "read_timeout": f"{limits.idle_s:g}s",
    }


def open_store(url: RemoteURL, limits: TimeLimits | None = None) -> Store:
    """The store for `url` (the Hub: its revision resolved to a commit, its access checked)."""
    limits = limits or TimeLimits()
    if url.scheme in ("http", "https"):
        transport = HTTPTransport(
            url.root, connect_timeout=limits.connect_s, idle_timeout=limits.idle_s
        )
        return Store(transport, None, url)
    if url.scheme == "s3":
        from obstore.store import S3Store

        endpoint = s3_endpoint()
        extra: dict[str, Any] = {"endpoint": endpoint} if endpoint else {}
        scheme = endpoint.split("://", 1)[0] if endpoint else "https"
        store = S3Store(
            url.root,
            client_options=_client_options(scheme, limits),
            retry_config=_NO_RETRY,
            **extra,
        )
        return Store(_s3_transport(store, url, limits), store, url)
    return _hub_store(url, limits)


def _s3_transport(store: Any, url: RemoteURL, limits: TimeLimits) -> Transport:
    """S3's ranges as `HTTPTransport` requests on presigned URLs (`SignedURLs`: obstore signs,
    `http.client` reads each body straight into its destination, without obstore's copy of it:
    docs/results.md, "The remote reader's CPU per byte"), trusting `AWS_CA_BUNDLE` where it is
    set, as the AWS clients do; obstore's client where the store cannot sign (no credentials: a
    public bucket read unsigned)."""
    signed = SignedURLs(store)
    try:
        probe = signed(url.path or "probe")
    except Exception:  # noqa: BLE001 - no credentials to sign with: obstore reads unsigned
        return ObstoreTransport(store, idle_timeout=limits.idle_s)
    origin = urllib.parse.urlsplit(probe)
    return HTTPTransport(
        f"{origin.scheme}://{origin.netloc}",
        connect_timeout=limits.connect_s,
        idle_timeout=limits.idle_s,
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


def _hub_store(url: RemoteURL, limits: TimeLimits) -> Store:

    import huggingface_hub
    from huggingface_hub import HfApi

    endpoint = (os.environ.get("HF_ENDPOINT") or HF_DEFAULT_ENDPOINT).rstrip("/")
    token = huggingface_hub.get_token()
    info = hub_call(
        url,
        token,
        lambda: HfApi(endpoint=endpoint, token=token).model_info(url.root, revision=url.revision),
    )
    commit = info.sha or url.revision or "main"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = HTTPTransport(
        f"{endpoint}/{url.root}/resolve/{commit}",
        headers=headers,
        connect_timeout=limits.connect_s,
        idle_timeout=limits.idle_s,
    )
    names = tuple(s.rfilename for s in info.siblings or [])
    return Store(transport, None, url, names, token, commit, endpoint)


def hub_call(url: RemoteURL, token: str | None, call: Callable[[], T]) -> T:
    """`call()`'s result; huggingface_hub's exceptions as one-line `RemoteError`s, the token
    scrubbed, raised outside the handler so that no exception (which may hold the token, as an
    error body the Hub echoes) is chained to them."""
    from huggingface_hub import errors

    where = str(url)
    try:
        return call()
    except errors.GatedRepoError:
        fix = (
            "the token given has no access: accept the repo's terms on the Hub with that "
            "account, or use another token"
            if token
            else "accept its terms on the Hub, then set HF_TOKEN (or run `hf auth login`)"
        )
        failure = RemoteError(f"{where}: gated repo; {fix}")
    except errors.RevisionNotFoundError:
        failure = RemoteError(f"{where}: no revision {url.revision!r}; check it")
    except errors.RepositoryNotFoundError:
        failure = RemoteError(
            f"{where}: repo not found (or private: set HF_TOKEN); check the repo id"
        )
    except errors.EntryNotFoundError:
        failure = RemoteError(f"{where}: file not found in the repo; check the path")
    except RemoteError:
        raise
    except Exception as exc:  # noqa: BLE001 - offline, refused, a 5xx: one line, no token
        failure = RemoteError(
            f"{where}: the Hub request failed ({one_line(exc, token)}); check HF_ENDPOINT "
            "and the network",
            details=scrub(f"{type(exc).__name__}: {exc}", token),
        )
    raise failure


def shard_paths(index_path: str, text: str, where: str) -> list[str]:
    """The shard files an index names (next to it), sorted."""
    try:
        weight_map = json.loads(text)["weight_map"]
        names = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise RemoteError(f"{where}: not a safetensors index with a weight_map ({e})") from None
    folder = posixpath.dirname(index_path)
    return [posixpath.join(folder, n) if folder else n for n in names]


def pick_in_folder(names: list[str], folder: str) -> list[str]:
    """A folder's index (`model.safetensors.index.json`, else its one index), else its shards."""
    prefix = f"{folder}/" if folder else ""
    here = [n for n in names if n.startswith(prefix) and "/" not in n[len(prefix) :]]
    indexes = sorted(n for n in here if n.endswith(INDEX_SUFFIX))
    preferred = f"{prefix}model{INDEX_SUFFIX}"
    if preferred in indexes:
        return [preferred]
    if len(indexes) == 1:
        return indexes
    return sorted(n for n in here if n.endswith(".safetensors"))
