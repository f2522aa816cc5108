"""Turning huggingface_hub's exceptions into one-line `FetchError`s that say how to fix them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from shapes.errors import FetchError

_LOGIN = "log in with `hf auth login` or set HF_TOKEN"


def _endpoint() -> str:
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def _offline() -> bool:
    from huggingface_hub import constants

    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return constants.HF_HUB_OFFLINE or flag.upper() in {"1", "ON", "YES", "TRUE"}


def _status(e: Exception) -> str:
    response = getattr(e, "response", None)
    return str(getattr(response, "status_code", "")) or "?"


def _offline_message(where: str) -> str:
    return (
        f"cannot fetch {where}: offline mode is on (HF_HUB_OFFLINE); unset it to reach the Hub, "
        "or use a preset or an already fetched name (`loadbench shapes list`)"
    )


def _message(  # noqa: PLR0911  one return per Hub error kind, subclasses first
    e: Exception,
    where: str,
    revision: str | None,
) -> str | None:
    """The one-line message, with its fix, for an error of a Hub fetch; None if not one of those."""
    import httpx2
    from huggingface_hub import errors as hf

    if isinstance(e, hf.GatedRepoError):  # before its base class, RepositoryNotFoundError
        return (
            f"{where}: the repo is gated (HTTP {_status(e)}); accept its terms on its Hub page "
            f"and {_LOGIN} with an account that has access"
        )
    if isinstance(e, hf.RepositoryNotFoundError):
        return (
            f"{where}: repository not found (HTTP {_status(e)}); check the repo id, or if it is "
            f"private or gated, {_LOGIN}"
        )
    if isinstance(e, hf.RevisionNotFoundError):
        return f"{where}: revision {revision!r} not found; give an existing branch, tag or commit"
    if isinstance(e, hf.EntryNotFoundError):
        return f"{where}: a file listed by the repo is missing ({e}); pick files with --include"
    if isinstance(e, hf.OfflineModeIsEnabled):
        return _offline_message(where)
    if isinstance(e, hf.SafetensorsParsingError):
        return f"{where}: malformed safetensors header: {e}"
    if isinstance(e, hf.HfHubHTTPError):
        return f"{where}: Hub request failed (HTTP {_status(e)}): {str(e).splitlines()[0]}"
    if isinstance(e, OSError | ConnectionError | httpx2.HTTPError):
        return (
            f"{where}: cannot reach the Hub ({type(e).__name__}: {e}); "
            "check the network or HF_ENDPOINT"
        )
    return None


@contextlib.contextmanager
def translate(repo_id: str, revision: str | None) -> Iterator[None]:
    """Run a Hub fetch, re-raising huggingface_hub's errors as `FetchError` with a fix."""
    where = f"{repo_id} @ {revision or 'main'} on {_endpoint()}"
    if _offline():
        raise FetchError(_offline_message(where))
    try:
        yield
    except Exception as e:
        message = _message(e, where, revision)
        if message is None:
            raise
        raise FetchError(message) from None
