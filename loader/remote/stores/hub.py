"""`hf://org/repo[@revision][/file-or-folder]`: a Hugging Face Hub repo at a branch, tag or commit.

Through `huggingface_hub` for what is the Hub's own: the endpoint (`HF_ENDPOINT`), the revision
(pinned to its commit with `model_info`, so every range reads one commit; default `main`), the
token (`HF_TOKEN` or the stored login), gated repos, the repo's file list (its listing), and each
file's metadata (`check_file`: served from the pinned commit, its LFS sha256, which the load then
checks). Its exceptions become one-line errors here, the token scrubbed and no exception chained.
The bytes are range requests on the repo's `resolve/<commit>/` URLs through `HTTPTransport`, with
the token as a header that no message repeats and that no redirect to another origin carries.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TypeVar

from loader.errors import RemoteChangedError, RemoteError
from loader.remote.ranges import TimeLimits, one_line, scrub
from loader.remote.store import Capability, RemoteURL, Store, StoreKind, refuse
from loader.remote.transport import HTTPTransport

HF_DEFAULT_ENDPOINT = "https://huggingface.co"
_LFS_SHA256 = re.compile(r"^[0-9a-f]{64}$")  # the Hub's ETag of an LFS file is its sha256
T = TypeVar("T")


def _parse(scheme: str, rest: str, url: str) -> RemoteURL:
    parts = rest.strip("/").split("/")
    if len(parts) < 2 or not all(parts[:2]):
        raise refuse(url, f"expected {KIND.form}")
    name, at, revision = parts[1].partition("@")
    if not name or (at and not revision):
        raise refuse(url, f"expected {KIND.form}")
    return RemoteURL(scheme, f"{parts[0]}/{name}", "/".join(parts[2:]), revision or None, KIND)


def _show(url: RemoteURL, path: str) -> str:
    rev = f"@{url.revision}" if url.revision else ""
    return f"hf://{url.root}{rev}" + (f"/{path}" if path else "")


def _open(url: RemoteURL, limits: TimeLimits) -> Store:
    """The repo at its revision's commit (its access checked), its files listed."""
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
        f"{endpoint}/{url.root}/resolve/{commit}", headers=headers, limits=limits
    )
    names = tuple(s.rfilename for s in info.siblings or [])
    return Store(
        transport,
        url,
        list_names=lambda prefix: names,
        secret=token,
        check_file=lambda path: _check_file(url, path, token, commit, endpoint),
    )


def _check_file(
    url: RemoteURL, path: str, token: str | None, commit: str, endpoint: str
) -> str | None:
    """The Hub's own answer for one file (gated, missing, or served from another commit);
    its sha256 where the Hub gives one (an LFS file's ETag)."""
    import huggingface_hub

    file_url = huggingface_hub.hf_hub_url(url.root, path, revision=commit, endpoint=endpoint)
    meta = hub_call(
        url,
        token,
        lambda: huggingface_hub.get_hf_file_metadata(file_url, token=token or False),
    )
    if meta.commit_hash and meta.commit_hash != commit:
        raise RemoteChangedError(
            f"{url.child(path)}: served from commit {meta.commit_hash}, not the {commit} the "
            "load pinned; load again"
        )
    etag = (meta.etag or "").lower()
    return etag if _LFS_SHA256.match(etag) else None


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


KIND = StoreKind(
    schemes=("hf",),
    form="hf://org/repo[@revision][/file-or-folder]",
    can=frozenset(
        {
            Capability.RANGES,
            Capability.LISTING,
            Capability.VALIDATORS,
            Capability.DIGESTS,
            Capability.SIGNING,
        }
    ),
    parse=_parse,
    show=_show,
    open=_open,
    credentials="use hf:// with HF_TOKEN",
)
