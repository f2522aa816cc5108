"""The stores, registered once: a URL's scheme to its store, and every question about schemes.

Each store is one module of `loader.remote.stores` giving a `StoreKind` (its schemes, its URL
form, what it can do, and how it parses, prints and opens a URL); `STORES` below lists them, and
this is the one place a scheme is looked at: `parse_url`, `is_url`, `open_store`, and the
messages that name the forms (`schemes_text`, `forms_text`). A new store is its module and one
line here.

Example:
    >>> open_store(parse_url("gs://bucket/model.safetensors")).transport.read(...)
"""

from __future__ import annotations

from loader.remote.ranges import TimeLimits
from loader.remote.store import RemoteURL, Store, StoreKind, refuse, shown
from loader.remote.stores import gcs, http, hub, s3

#: Every store, in the order messages name them.
STORES: tuple[StoreKind, ...] = (http.KIND, s3.KIND, hub.KIND, gcs.KIND)


def _by_scheme(stores: tuple[StoreKind, ...]) -> dict[str, StoreKind]:
    found: dict[str, StoreKind] = {}
    for kind in stores:
        for scheme in kind.schemes:
            if scheme in found:
                raise ValueError(f"{scheme}:// is registered twice ({found[scheme].form})")
            found[scheme] = kind
    return found


BY_SCHEME = _by_scheme(STORES)


def schemes_text() -> str:
    """The schemes a URL may have, for messages: `https://, s3://, hf://, gs://`."""
    return ", ".join(f"{kind.name}://" for kind in STORES)


def forms_text() -> str:
    """The URL forms, for messages: `https://host/path/model.safetensors, s3://bucket/key, ...`."""
    return ", ".join(kind.form for kind in STORES)


def store_kind(path: object) -> StoreKind | None:
    """The store a URL's scheme is registered as (None: not a URL of a registered scheme)."""
    if not isinstance(path, str) or "://" not in path:
        return None
    return BY_SCHEME.get(path.split("://", 1)[0])


def is_url(path: object) -> bool:
    """True for a string of one of the registered remote forms (`https://`, `s3://`, ...)."""
    return store_kind(path) is not None


def parse_url(url: str) -> RemoteURL:
    """Parse one of the registered forms; `RemoteError` naming the form expected otherwise.

    Example:
        >>> parse_url("hf://org/model@v1/weights").revision
        'v1'
    """
    scheme, _, rest = url.partition("://")
    kind = store_kind(url)
    if kind is None or not rest:
        raise refuse(url, f"not a remote checkpoint URL; use one of {schemes_text()}")
    if shown(url) != url:
        ways = "; ".join(k.credentials for k in STORES if k.credentials)
        raise refuse(
            url, f"credentials in a URL are refused (they end up in logs and reports); {ways}"
        )
    return kind.parse(scheme, rest, url)


def open_store(url: RemoteURL, limits: TimeLimits | None = None) -> Store:
    """The open store for `url` (the Hub: its revision resolved to a commit, access checked)."""
    assert url.store is not None, "a RemoteURL is made by parse_url"
    return url.store.open(url, limits or TimeLimits())
