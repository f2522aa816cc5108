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
  clients read) sends every request there, unsigned (as a public bucket is read).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loader.remote.ranges import TimeLimits
from loader.remote.store import RemoteURL, Store, bucket_store, obstore_lister, obstore_settings
from loader.remote.transport import ObstoreTransport

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
    """The `GCSStore` arguments that say how it signs (module docstring)."""
    emulator = _emulator()
    if emulator is not None:  # an emulator takes no credentials: the anonymous path, there
        return {"base_url": emulator, "skip_signature": True}
    chained = any(os.environ.get(v) for v in CREDENTIAL_VARIABLES)
    if chained or GCLOUD_ADC.expanduser().is_file() or _on_google_cloud():
        return {}  # obstore follows the chain itself
    return {"skip_signature": True}  # no credentials anywhere: a public bucket, read anonymously


def _on_google_cloud() -> bool:
    try:
        return "Google" in PRODUCT_NAME.read_text(encoding="utf-8")
    except OSError:
        return False


def _open(url: RemoteURL, limits: TimeLimits) -> Store:
    from obstore.store import GCSStore

    emulator = _emulator()
    plain = emulator is not None and emulator.startswith("http://")
    store = GCSStore(
        url.root,
        **obstore_settings(plain, limits),
        **_credentials(),
    )
    return Store(ObstoreTransport(store, limits=limits), url, obstore_lister(store, url))


KIND = bucket_store("gs", _open, credentials="use gs:// with GOOGLE_APPLICATION_CREDENTIALS ...")
