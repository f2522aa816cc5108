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


@contextlib.contextmanager
def translate(repo_id: str, revision: str | None) -> Iterator[None]:
    """Run a Hub fetch, re-raising huggingface_hub's errors as `FetchError` with a fix."""
    import httpx2
    from huggingface_hub import errors as hf

    where = f"{repo_id} @ {revision or 'main'} on {_endpoint()}"
    if _offline():
        raise FetchError(
            f"cannot fetch {where}: offline mode is on (HF_HUB_OFFLINE); unset it to reach the Hub, "
            "or use a preset or an already fetched name (`loadbench shapes list`)"
        )
    try:
        yield
    except hf.GatedRepoError as e:
        raise FetchError(
            f"{where}: the repo is gated (HTTP {_status(e)}); accept its terms on its Hub page "
            f"and {_LOGIN} with an account that has access"
        ) from None
    except hf.RepositoryNotFoundError as e:
        raise FetchError(
            f"{where}: repository not found (HTTP {_status(e)}); check the repo id, or if it is "
            f"private or gated, {_LOGIN}"
        ) from None
    except hf.RevisionNotFoundError:
        raise FetchError(
            f"{where}: revision {revision!r} not found; give an existing branch, tag or commit"
        ) from None
    except hf.EntryNotFoundError as e:
        raise FetchError(
            f"{where}: a file listed by the repo is missing ({e}); pick files with --include"
        ) from None
    except hf.OfflineModeIsEnabled:
        raise FetchError(
            f"cannot fetch {where}: offline mode is on (HF_HUB_OFFLINE); unset it"
        ) from None
    except hf.SafetensorsParsingError as e:
        raise FetchError(f"{where}: malformed safetensors header: {e}") from None
    except hf.HfHubHTTPError as e:
        raise FetchError(
            f"{where}: Hub request failed (HTTP {_status(e)}): {str(e).splitlines()[0]}"
        ) from None
    except (OSError, ConnectionError, httpx2.HTTPError) as e:
        raise FetchError(
            f"{where}: cannot reach the Hub ({type(e).__name__}: {e}); check the network or HF_ENDPOINT"
        ) from None
