"""What every store is: a parsed URL, a store kind as the registry holds it, and an open store.

A store kind (`StoreKind`) is one scheme's registration (`loader.remote.registry`): its
schemes, the URL form users write, what it can do (`Capability`), and the three functions its
module gives: parse the part after `scheme://`, print a path of it as a URL, and open it. An open
store (`Store`) is the transport its ranges go through (`loader.remote.transport`) and what else
the store can answer: a folder's listing, the token to keep out of messages, a file's own check
(the Hub's). Code above the registry asks these, never which scheme a URL has.

The helpers every store that lists uses are here too: `shard_paths` (an index's files) and
`pick_in_folder` (a folder's index, else its shards).
"""

from __future__ import annotations

import enum
import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loader.errors import RemoteError
from loader.remote.ranges import TimeLimits, one_line
from loader.remote.transport import Transport

if TYPE_CHECKING:
    from obstore.store import ClientConfig, ObjectStore, RetryConfig


INDEX_SUFFIX = ".safetensors.index.json"
#: A request that has not finished by then failed (then retried): a stall is caught sooner by
#: the idle timeout, a trickle by the minimum rate (`loader.remote.ranges.TimeLimits`).
REQUEST_TIMEOUT = "600s"
NO_RETRY: RetryConfig = {"max_retries": 0}


class Capability(enum.StrEnum):
    """What a store can do, as its registration says."""

    RANGES = "ranges"  # byte ranges of an object (every store)
    LISTING = "listing"  # a folder's files, listed (else: its index, else model.safetensors)
    VALIDATORS = "validators"  # an answer carries an ETag, Last-Modified or generation
    DIGESTS = "digests"  # the store gives a file's sha256 (the Hub's LFS files)
    SIGNING = "signing"  # requests are signed with credentials from the usual chain


@dataclass(frozen=True)
class RemoteURL:
    """A parsed remote checkpoint URL.

    Attributes:
        scheme: the scheme as written (`https`, `s3`, `gs`, `hf`...).
        root: where the store's paths start: `scheme://host` (HTTP), the bucket, the repo id.
        path: the file, index or folder within it (`""`: the root itself).
        revision: the Hub revision asked for (None: `main`, or a store without revisions).
        store: the store kind its scheme is registered as (`loader.remote.registry`).

    Example:
        >>> str(parse_url("s3://bucket/model.safetensors"))  # loader.remote.registry
        's3://bucket/model.safetensors'
    """

    scheme: str
    root: str
    path: str
    revision: str | None = None
    store: StoreKind | None = field(default=None, compare=False, repr=False)

    @property
    def kind(self) -> str:
        """`"file"`, `"index"` or `"folder"`, from the path's ending."""
        if self.path.endswith(INDEX_SUFFIX):
            return "index"
        return "file" if self.path.endswith(".safetensors") else "folder"

    def __str__(self) -> str:
        return self.child(self.path)

    def child(self, path: str) -> str:
        """The URL of another path of the same store (a shard next to an index)."""
        assert self.store is not None, "a RemoteURL is made by loader.remote.registry.parse_url"
        return self.store.show(self, path)


@dataclass(frozen=True)
class Store:
    """An open store: its transport and what else it answers.

    Attributes:
        transport: what its range requests go through (`loader.remote.transport`).
        url: the parsed URL this store serves.
        list_names: a folder's file names (paths in the store) under a prefix, where the store
            lists (`Capability.LISTING`); None: it cannot.
        secret: a token sent with every request (never printed), or None.
        check_file: a file's own check before its first range (the Hub: gated, moved to another
            commit), giving its sha256 where the store knows one; None: nothing to check.
    """

    transport: Transport
    url: RemoteURL
    list_names: Callable[[str], tuple[str, ...]] | None = None
    secret: str | None = None
    check_file: Callable[[str], str | None] | None = None


@dataclass(frozen=True)
class StoreKind:
    """One store as registered (`loader.remote.registry`): schemes, form, capabilities, and its
    module's parse / show / open.

    Attributes:
        schemes: the URL schemes it serves (`("https", "http")`).
        form: the URL form users write, for messages (`"s3://bucket/key"`).
        can: what it can do.
        parse: `(scheme, rest, url)` -> `RemoteURL` (`rest`: after `scheme://`), or a
            `RemoteError` naming the form.
        show: `(url, path)` -> the URL of `path` in `url`'s store, as printed.
        open: `(url, limits)` -> an open `Store`.
        credentials: where its credentials come from, for a message refusing them in a URL.
    """

    schemes: tuple[str, ...]
    form: str
    can: frozenset[Capability]
    parse: Callable[[str, str, str], RemoteURL]
    show: Callable[[RemoteURL, str], str]
    open: Callable[[RemoteURL, TimeLimits], Store]
    credentials: str = ""

    @property
    def name(self) -> str:
        """The scheme it is known by (its first)."""
        return self.schemes[0]


def refuse(url: str, why: str) -> RemoteError:
    """A URL refused in one line, any credentials in it hidden."""
    return RemoteError(f"{shown(url)}: {why}")


def shown(url: str) -> str:
    """`url` as it may be printed: any user info (`user:password@`) replaced by `***@`."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if sep and "@" in authority:
        return f"{scheme}://***@{authority.rpartition('@')[2]}{slash}{path}"
    return url


#: What a bucket store (S3, GCS) can do: ranges, listing a prefix, validators, signed requests.
BUCKET_STORE = frozenset(
    {Capability.RANGES, Capability.LISTING, Capability.VALIDATORS, Capability.SIGNING}
)


def bucket_store(
    scheme: str,
    open_store: Callable[[RemoteURL, TimeLimits], Store],
    *,
    credentials: str,
) -> StoreKind:
    """The registration of a bucket store (`scheme://bucket/key`: S3, GCS), opened by
    `open_store`: a URL's bucket is its root, its key (an object, an index or a prefix) its
    path."""
    form = f"{scheme}://bucket/key"

    def parse(scheme: str, rest: str, url: str) -> RemoteURL:
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise refuse(url, f"expected {form} (or {scheme}://bucket/prefix/)")
        return RemoteURL(scheme, bucket, key.strip("/"), store=kind)

    def show(url: RemoteURL, path: str) -> str:
        return f"{scheme}://{url.root}/{path}"

    kind = StoreKind((scheme,), form, BUCKET_STORE, parse, show, open_store, credentials)
    return kind


def obstore_settings(plain_http: bool, limits: TimeLimits) -> dict[str, Any]:
    """An `obstore` store's client options from a load's time limits (`plain_http`: an endpoint
    without TLS, an emulator's, allowed), its own retries off (`loader.remote.ranges` retries)."""
    client: ClientConfig = {
        "allow_http": plain_http,
        "timeout": f"{limits.deadline_s:g}s" if limits.deadline_s else REQUEST_TIMEOUT,
        "connect_timeout": f"{limits.connect_s:g}s",
        "read_timeout": f"{limits.idle_s:g}s",
    }
    return {"client_options": client, "retry_config": NO_RETRY}


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


def obstore_lister(store: ObjectStore, url: RemoteURL) -> Callable[[str], tuple[str, ...]]:
    """A folder's listing through an `obstore` store (S3, GCS): every path under a prefix."""

    def list_names(prefix: str) -> tuple[str, ...]:
        import obstore

        try:
            found = [m["path"] for batch in obstore.list(store, prefix or None) for m in batch]
        except Exception as e:  # noqa: BLE001 - a missing bucket, refused credentials...
            failure = RemoteError(
                f"{url}: cannot list ({one_line(e)}); check the URL", details=str(e)
            )
        else:
            return tuple(found)
        raise failure

    return list_names
