"""`gs://bucket/object`: Google Cloud Storage, where TPU users keep checkpoints.

One object, an index, or a prefix (listed: its index, else every `*.safetensors` right under it),
through `obstore` (Rust's `object_store`, its `GCSStore`): its own client reads the ranges, its
retries off (`loader.remote.ranges` retries), its `read_timeout` the idle timeout.

- Credentials: the usual chain, as Google's clients look for them: a service account
  (`GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_SERVICE_ACCOUNT_KEY`), `GOOGLE_APPLICATION_CREDENTIALS`, the
  gcloud login's application default credentials, and on a Google Cloud VM (a TPU VM) its
  metadata server; where there is none of them, the bucket is read anonymously (a public bucket).
- Validators: the first range of each object gives its generation; every later range asks for
  that generation (`Conditions.version`), so an object replaced during the load is refused (its
  old generation is gone: `changed`), never mixed.
- An emulator: `STORAGE_EMULATOR_HOST` (`http://127.0.0.1:4443`, the variable Google's own
  clients read) sends every request there, unsigned, through the JSON API as Google's own
  clients do (`EmulatorTransport`): each range on the object's media path
  (`/storage/v1/b/{bucket}/o/{object}?alt=media`, with `Range`), a folder listed by
  `/storage/v1/b/{bucket}/o?prefix=`. obstore asks the XML API's paths (`/{bucket}/{object}`),
  which fake-gcs-server serves only when started with `-public-host` matching the address
  asked; its default flags serve the JSON API alone, so that is what is asked. Its generation
  (`X-Goog-Generation`) is pinned as GCS's is (`&generation=`).
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loader.errors import RemoteError
from loader.remote.ranges import TimeLimits
from loader.remote.store import RemoteURL, Store, bucket_store, obstore_lister, obstore_settings
from loader.remote.transport import (
    Answer,
    Conditions,
    HTTPTransport,
    ObstoreTransport,
    TransportError,
    TransportKind,
)

EMULATOR = "STORAGE_EMULATOR_HOST"
#: The variables that name credentials (obstore reads each itself).
CREDENTIAL_VARIABLES = (
    "GOOGLE_SERVICE_ACCOUNT",
    "GOOGLE_SERVICE_ACCOUNT_PATH",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_BEARER_TOKEN",
)
#: gcloud's application default credentials (`gcloud auth application-default login`).
GCLOUD_ADC = Path("~/.config/gcloud/application_default_credentials.json")
#: Where a Google Cloud VM names itself (its metadata server then holds its credentials).
PRODUCT_NAME = Path("/sys/class/dmi/id/product_name")


def _emulator() -> str | None:
    """`STORAGE_EMULATOR_HOST` as a base URL (`host:port` alone means plain HTTP)."""
    host = os.environ.get(EMULATOR, "").strip().rstrip("/")
    if not host:
        return None
    return host if "://" in host else f"http://{host}"


def _credentials() -> dict[str, Any]:
    """The `GCSStore` arguments that say how it signs (module docstring); an emulator is not
    read through it (`EmulatorTransport`)."""
    chained = any(os.environ.get(v) for v in CREDENTIAL_VARIABLES)
    if chained or GCLOUD_ADC.expanduser().is_file() or _on_google_cloud():
        return {}  # obstore follows the chain itself
    return {"skip_signature": True}  # no credentials anywhere: a public bucket, read anonymously


def _on_google_cloud() -> bool:
    try:
        return "Google" in PRODUCT_NAME.read_text(encoding="utf-8")
    except OSError:
        return False


class EmulatorTransport:
    """Ranges of a bucket's objects from an emulator's JSON API media path (module docstring),
    through `HTTPTransport`; a read pinned to a generation that is gone is a replaced object.

    Example:
        >>> t = EmulatorTransport("http://127.0.0.1:4443", "bucket", TimeLimits())
        >>> t.read("model.safetensors", 0, memoryview(bytearray(8)), Conditions(), first=True)
    """

    def __init__(self, emulator: str, bucket: str, limits: TimeLimits) -> None:
        self._bucket = urllib.parse.quote(bucket, safe="")
        self.limits = limits
        self._http = HTTPTransport(
            emulator,
            limits=limits,
            locate=lambda target: f"{emulator}{target}",
            version_header="X-Goog-Generation",
        )

    def read(
        self,
        path: str,
        start: int,
        out: memoryview,
        conditions: Conditions,
        *,
        first: bool,
        deadline: float | None = None,
    ) -> Answer:
        pinned = conditions.version
        target = f"/storage/v1/b/{self._bucket}/o/{urllib.parse.quote(path, safe='')}?alt=media"
        target += f"&generation={pinned}" if pinned else ""
        asked = Conditions() if pinned else conditions  # the generation says it all
        try:
            return self._http.read(target, start, out, asked, first=first, deadline=deadline)
        except TransportError as e:
            if not (pinned and e.kind == TransportKind.NOT_FOUND):
                raise
            raise TransportError(
                TransportKind.CHANGED,
                "the file changed (its generation is gone)",
                retryable=False,
                details=e.details,
            ) from None


def _emulator_lister(
    emulator: str, url: RemoteURL, limits: TimeLimits
) -> Callable[[str], tuple[str, ...]]:
    """A folder's listing from an emulator's JSON API (`/storage/v1/b/{bucket}/o?prefix=`, page
    by page): every object name under a prefix."""
    base = f"{emulator}/storage/v1/b/{urllib.parse.quote(url.root, safe='')}/o"

    def list_names(prefix: str) -> tuple[str, ...]:
        names: list[str] = []
        token: str | None = ""
        while token is not None:
            query = {"prefix": prefix, **({"pageToken": token} if token else {})}
            try:
                with urllib.request.urlopen(  # noqa: S310 - the emulator's own http(s) URL
                    f"{base}?{urllib.parse.urlencode(query)}", timeout=limits.idle_s
                ) as answer:
                    page = json.load(answer)
            except (OSError, ValueError) as e:  # HTTPError and URLError are OSErrors
                raise RemoteError(
                    f"{url}: cannot list ({type(e).__name__}: {e}) at the emulator "
                    f"{EMULATOR}={emulator}; check the URL",
                    details=str(e),
                ) from None
            names += [item["name"] for item in page.get("items", [])]
            token = page.get("nextPageToken") or None
        return tuple(names)

    return list_names


def _open(url: RemoteURL, limits: TimeLimits) -> Store:
    from obstore.store import GCSStore

    emulator = _emulator()
    if emulator is not None:
        transport = EmulatorTransport(emulator, url.root, limits)
        return Store(transport, url, _emulator_lister(emulator, url, limits))
    store = GCSStore(url.root, **obstore_settings(False, limits), **_credentials())
    return Store(ObstoreTransport(store, limits=limits), url, obstore_lister(store, url))


KIND = bucket_store("gs", _open, credentials="use gs:// with GOOGLE_APPLICATION_CREDENTIALS ...")
