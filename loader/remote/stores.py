"""From a parsed URL to an `obstore` store and the shard files to read (no tensor byte yet).

HTTP and S3 go through `obstore` alone. The Hub goes through `huggingface_hub` for what is the
Hub's own: the endpoint (`HF_ENDPOINT`), the revision (pinned to its commit with `model_info`, so
every range reads one commit), the token (`HF_TOKEN` or the stored login) and gated repos (its
exceptions, turned into one-line errors here); the bytes are then range requests on the repo's
`resolve/<commit>/` URLs through `obstore`, with the token as a header that no message repeats.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loader.errors import RemoteError
from loader.remote.ranges import CONNECT_TIMEOUT, REQUEST_TIMEOUT, one_line
from loader.remote.urls import INDEX_SUFFIX, RemoteURL, s3_endpoint

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

HF_DEFAULT_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class Store:
    """An `obstore` store, the URL paths are shown under, and the token to keep out of messages.

    Attributes:
        store: the obstore store.
        url: the parsed URL this store serves.
        names: the repo's file names where the store can list them (the Hub), else None.
        secret: a token sent with every request (never printed), or None.
        commit: the Hub commit every request reads (None elsewhere).
        endpoint: the Hub's endpoint (None elsewhere).
    """

    store: Any
    url: RemoteURL
    names: tuple[str, ...] | None = None
    secret: str | None = None
    commit: str | None = None
    endpoint: str | None = None


def _client_options(scheme: str, headers: dict[str, str] | None = None) -> ClientConfig:
    options: ClientConfig = {
        "allow_http": scheme != "https",
        "timeout": REQUEST_TIMEOUT,
        "connect_timeout": CONNECT_TIMEOUT,
    }
    if headers:
        options["default_headers"] = headers
    return options


_NO_RETRY: RetryConfig = {"max_retries": 0}  # loader.remote.ranges bounds the retries itself


def open_store(url: RemoteURL) -> Store:
    """The store for `url` (the Hub: its revision resolved to a commit, its access checked)."""
    from obstore.store import HTTPStore, S3Store

    if url.scheme in ("http", "https"):
        return Store(
            HTTPStore(url.root, client_options=_client_options(url.scheme), retry_config=_NO_RETRY),
            url,
        )
    if url.scheme == "s3":
        endpoint = s3_endpoint()
        extra: dict[str, Any] = {"endpoint": endpoint} if endpoint else {}
        scheme = endpoint.split("://", 1)[0] if endpoint else "https"
        store = S3Store(
            url.root,
            client_options=_client_options(scheme),
            retry_config=_NO_RETRY,
            **extra,
        )
        return Store(store, url)
    return _hub_store(url)


def _hub_store(url: RemoteURL) -> Store:
    import os

    import huggingface_hub
    from huggingface_hub import HfApi
    from obstore.store import HTTPStore

    endpoint = (os.environ.get("HF_ENDPOINT") or HF_DEFAULT_ENDPOINT).rstrip("/")
    token = huggingface_hub.get_token()
    with hub_errors(url, token):
        info = HfApi(endpoint=endpoint, token=token).model_info(url.root, revision=url.revision)
    commit = info.sha or url.revision or "main"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    store = HTTPStore(
        f"{endpoint}/{url.root}/resolve/{commit}",
        client_options=_client_options(endpoint.split("://", 1)[0], headers),
        retry_config=_NO_RETRY,
    )
    names = tuple(s.rfilename for s in info.siblings or [])
    return Store(store, url, names, token, commit, endpoint)


@contextmanager
def hub_errors(url: RemoteURL, token: str | None) -> Iterator[None]:
    """Turns huggingface_hub's exceptions into one-line `RemoteError`s (the token scrubbed)."""
    from huggingface_hub import errors

    where = str(url)
    try:
        yield
    except errors.GatedRepoError:
        fix = (
            "the token given has no access: accept the repo's terms on the Hub with that "
            "account, or use another token"
            if token
            else "accept its terms on the Hub, then set HF_TOKEN (or run `hf auth login`)"
        )
        raise RemoteError(f"{where}: gated repo; {fix}") from None
    except errors.RevisionNotFoundError:
        raise RemoteError(f"{where}: no revision {url.revision!r}; check it") from None
    except errors.RepositoryNotFoundError:
        raise RemoteError(
            f"{where}: repo not found (or private: set HF_TOKEN); check the repo id"
        ) from None
    except errors.EntryNotFoundError:
        raise RemoteError(f"{where}: file not found in the repo; check the path") from None
    except RemoteError:
        raise
    except Exception as exc:  # noqa: BLE001 - offline, refused, a 5xx: one line, no token
        raise RemoteError(
            f"{where}: the Hub request failed ({one_line(exc, token)}); check HF_ENDPOINT "
            "and the network"
        ) from None


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
