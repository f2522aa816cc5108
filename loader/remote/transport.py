"""One range request, sent and classified: the two clients a `RangeReader` speaks through.

A transport sends one request for bytes `[start, end)` of an object and either fills the
caller's buffer (`Answer`) or raises one `TransportError` that says whether a retry can help
(`retryable`), how long the server asked to wait (`retry_after`, from `Retry-After`), and a short
reason (`kind`, a `TransportKind`); the client's raw text goes to `details`, never into a
message. The retry rules, the validators and the digest live above, in `loader.remote.ranges`,
once for both clients; the time limits (`TimeLimits`) are checked here, as the body arrives:
the load's deadline, the idle timeout, and the minimum rate (`RateWatch`: curl's
`--speed-limit` over `--speed-time`, on by default) that fails a body trickling in too slowly
for the idle timeout ever to fire.

- `HTTPTransport` (`http://`, `https://`, the Hub's `resolve/` URLs): Python's `http.client`,
  one kept-alive connection per thread and origin, each body read straight into its destination
  (`readinto`, the GIL released while the socket fills it), redirects followed (the Hub sends
  each LFS file to its CDN) without the `Authorization` header to another origin. A socket
  timeout is the idle timeout: no byte for that long and the request fails ("stalled").
  With `locate` it reads S3 the same way, on URLs `obstore` presigns (`SignedURLs`): obstore
  keeps what it earns its place for (SigV4 signing, the credential chain, listing) and the bodies
  skip its copy (measured: docs/results.md, "The remote reader's CPU per byte"). A GCS emulator's
  JSON API media path is read the same way (`loader.remote.stores.gcs`), its generation taken
  from the answer's header (`version_header`).
- `ObstoreTransport` (`gs://`; `s3://` where the store cannot sign: no credentials, a public
  bucket): `obstore` (Rust's `object_store`); its own retries off, its `read_timeout` the idle
  timeout, a body copied into its destination piece by piece as obstore receives it. A pinned
  generation (GCS) is its validator. It does not expose `Retry-After`.

What a retry cannot fix fails at once: a server that ignores `Range` (a 200 with the whole
file), an answer for another range, a 4xx other than 408 and 429.
"""

from __future__ import annotations

import email.utils
import enum
import http.client
import select
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from loader.options import DEFAULT_IDLE_TIMEOUT_S

if TYPE_CHECKING:
    from obstore import GetOptions

#: No byte for this long and a request fails as stalled (not retried): `idle_timeout=`'s default
#: (`loader.options`; 30 s, as a browser's) is far above a healthy request's gaps: an 8 MiB
#: answer over a 10 Mbit/s link arrives in 7 s.
CONNECT_TIMEOUT_S = 5.0
#: The minimum rate (curl's `--speed-limit`, over `--speed-time` = the idle timeout): a body
#: that brings fewer bytes a second than this, measured over each idle timeout, fails as too
#: slow (not retried), so a server that trickles a byte a second fails a load within about the
#: idle timeout instead of holding it for hours. 1 KiB/s is far below any link a checkpoint is
#: loaded over (a 10 Mbit/s link brings 1.25 MB/s).
DEFAULT_MIN_RATE_BPS = 1024.0


@dataclass(frozen=True)
class TimeLimits:
    """How long a remote load waits: to connect, for the next byte, in all (None: no bound),
    and the least a body must bring a second, measured over each `idle_s` (0: no minimum)."""

    connect_s: float = CONNECT_TIMEOUT_S
    idle_s: float = DEFAULT_IDLE_TIMEOUT_S
    deadline_s: float | None = None
    min_rate_bps: float = DEFAULT_MIN_RATE_BPS


class TransportKind(enum.StrEnum):
    """Why one request failed (`TransportError.kind`)."""

    CHANGED = "changed"  # a validator no longer holds
    NOT_FOUND = "not-found"
    ACCESS = "access"
    STALLED = "stalled"  # no byte for the idle timeout
    SLOW = "slow"  # bytes, but fewer a second than the minimum rate
    DEADLINE = "deadline"  # the load's `timeout=` passed while the body was arriving
    RANGE = "range"  # the server's ranges are wrong: a retry cannot fix them
    STATUS = "status"  # another answer
    CONNECTION = "connection"  # reset, refused, cut


class RateWatch:
    """The minimum rate over one body (`TimeLimits.min_rate_bps` over each `idle_s`): told the
    bytes received so far after each receive, it raises a `TransportError` (`SLOW`) once a
    whole window brought fewer than the minimum."""

    def __init__(self, limits: TimeLimits) -> None:
        self.window_s, self.min_bps = limits.idle_s, limits.min_rate_bps
        self._since, self._got = time.monotonic(), 0

    def check(self, got: int, total: int) -> None:
        now = time.monotonic()
        elapsed = now - self._since
        if not self.min_bps or elapsed < self.window_s:
            return
        rate = (got - self._got) / elapsed
        if rate < self.min_bps:
            raise TransportError(
                TransportKind.SLOW,
                f"{rate:.0f} bytes/s over {elapsed:.0f} s, under the minimum of "
                f"{self.min_bps:g} bytes/s ({got} of {total} bytes)",
                retryable=False,
            )
        self._since, self._got = now, got


#: How many redirects one request follows (the Hub: one, to its CDN).
MAX_REDIRECTS = 5
#: Of an error answer's body, at most this much is read (for `details`).
ERROR_BODY_BYTES = 4096
_REDIRECTS = (301, 302, 303, 307, 308)
_TLS_SCHEMES = frozenset({"https"})  # an origin's scheme whose connection is TLS


@dataclass(frozen=True)
class Conditions:
    """What every answer must still match: the object's generation (a store that pins one:
    GCS), else its strong ETag, else its Last-Modified."""

    etag: str | None = None
    last_modified: str | None = None  # an HTTP date, as the server sent it
    version: str | None = None  # the object's generation (GCS), read as that one or not at all


@dataclass(frozen=True)
class Answer:
    """What came back: the bytes `[start, end)` of an object of `size` bytes, with its
    validators (`etag` strong or None; `last_modified` an HTTP date or None; `version` the
    object's generation where the store has them)."""

    start: int
    end: int
    size: int
    etag: str | None
    last_modified: str | None
    version: str | None = None


class TransportError(Exception):
    """One failed request: a short `reason`, whether a retry can help, the raw client text.

    Attributes:
        kind: why (`TransportKind`).
        retryable: whether the same request again can succeed.
        retry_after: seconds the server asked to wait (`Retry-After`), or None.
        details: the client's or server's own text (not for messages: it may be long).
    """

    def __init__(
        self,
        kind: TransportKind,
        reason: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        details: str = "",
    ) -> None:
        super().__init__(reason)
        self.kind, self.reason, self.retryable = kind, reason, retryable
        self.retry_after, self.details = retry_after, details


class Transport(Protocol):
    """A client for one store's objects (paths relative to the store)."""

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
        """Fill `out` with the object's bytes from `start`. `first`: the object's size is not
        known yet (its first request): a shorter answer that ends at the object's end is
        whole, and `Answer.end` says where it ends. `deadline` (a `time.monotonic()` time):
        past it, a body still arriving is cut off (`kind` `deadline`)."""
        ...


def strong_etag(etag: str | None) -> str | None:
    """An ETag fit for `If-Match` (strong comparison); a weak one (`W/"..."`) is not."""
    return None if not etag or etag.startswith("W/") else etag


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """`Retry-After` in seconds: a number of seconds, or an HTTP date (None: absent or bad)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _status_error(status: int, reason: str, headers: Any, body: bytes) -> TransportError:
    details = f"{status} {reason}: {body[:ERROR_BODY_BYTES].decode('utf-8', 'replace')}".strip()
    if status == 412:
        return TransportError(
            TransportKind.CHANGED, "the file changed (412)", retryable=False, details=details
        )
    if status in (404, 410):
        return TransportError(
            TransportKind.NOT_FOUND, f"not found ({status})", retryable=False, details=details
        )
    if status in (401, 403):
        return TransportError(
            TransportKind.ACCESS, f"access refused ({status})", retryable=False, details=details
        )
    if status == 416:
        return TransportError(
            TransportKind.RANGE,
            "the server says the range is outside the file (416)",
            retryable=False,
            details=details,
        )
    if status in (408, 429) or status >= 500:
        after = retry_after_seconds(headers.get("Retry-After"))
        return TransportError(
            TransportKind.STATUS,
            f"server answered {status}",
            retryable=True,
            retry_after=after,
            details=details,
        )
    return TransportError(
        TransportKind.STATUS, f"server answered {status}", retryable=False, details=details
    )


def _content_range(value: str | None) -> tuple[int, int, int] | None:
    """`bytes a-b/size` as (a, b + 1, size); None where it is not that."""
    if not value or not value.startswith("bytes "):
        return None
    span, _, total = value[6:].partition("/")
    first, _, last = span.partition("-")
    try:
        return int(first), int(last) + 1, int(total)
    except ValueError:
        return None


class HTTPTransport:
    """Range requests over `http.client` (module docstring).

    Args:
        base: the store's URL; object paths are appended to its path.
        headers: sent with every request to the base's origin (the Hub's `Authorization`).
        limits: seconds to connect, seconds without a byte before a request fails as stalled,
            and the minimum rate of a body (`TimeLimits`).
        locate: an object path's absolute URL, where it is not the base's URL of it (S3: a
            presigned URL, `SignedURLs`); None: `base` + the path.
        tls: the TLS context of `https` connections (None: Python's default, the system's
            certificate authorities).
        version_header: the answer's header that holds the object's generation (GCS's JSON
            API: `X-Goog-Generation`), returned as `Answer.version`; None: no generations.

    Example:
        >>> t = HTTPTransport("http://127.0.0.1:8080", limits=TimeLimits(idle_s=30))
        >>> t.read("model.safetensors", 0, memoryview(bytearray(8)), Conditions(), first=True)
    """

    def __init__(
        self,
        base: str,
        *,
        headers: dict[str, str] | None = None,
        limits: TimeLimits = TimeLimits(),
        locate: Callable[[str], str] | None = None,
        tls: ssl.SSLContext | None = None,
        version_header: str | None = None,
    ) -> None:
        split = urllib.parse.urlsplit(base)
        self._origin = (split.scheme, split.netloc)
        self._prefix = split.path.rstrip("/")
        self._headers = dict(headers or {})
        self.limits = limits
        self.connect_timeout, self.idle_timeout = limits.connect_s, limits.idle_s
        self._locate, self._tls, self._version_header = locate, tls, version_header
        self._local = threading.local()

    def _target(self, path: str) -> tuple[tuple[str, str], str]:
        """The origin and request target of an object's path."""
        if self._locate is None:
            return self._origin, f"{self._prefix}/{urllib.parse.quote(path)}"
        split = urllib.parse.urlsplit(self._locate(path))
        return (split.scheme, split.netloc), split.path + (f"?{split.query}" if split.query else "")

    # -- connections ---------------------------------------------------------------------------
    def _connection(self, origin: tuple[str, str]) -> http.client.HTTPConnection:
        """This thread's connection to `origin`: the kept-alive one unless the server closed
        it meanwhile (readable while idle: its EOF), else a new one."""
        pool: dict[tuple[str, str], http.client.HTTPConnection] = self._local.__dict__.setdefault(
            "pool", {}
        )
        conn = pool.get(origin)
        if conn is not None and conn.sock is not None:
            if not select.select([conn.sock], [], [], 0)[0]:
                return conn
            self._drop(origin)
        scheme, netloc = origin
        conn = (
            http.client.HTTPSConnection(netloc, timeout=self.connect_timeout, context=self._tls)
            if scheme in _TLS_SCHEMES
            else http.client.HTTPConnection(netloc, timeout=self.connect_timeout)
        )
        try:
            conn.connect()
        except TimeoutError as e:
            raise TransportError(
                TransportKind.CONNECTION,
                f"no connection within {self.connect_timeout:g} s",
                retryable=True,
                details=str(e),
            ) from None
        except (OSError, ssl.SSLError) as e:
            raise TransportError(
                TransportKind.CONNECTION, "cannot connect", retryable=True, details=str(e)
            ) from None
        assert conn.sock is not None
        conn.sock.settimeout(self.idle_timeout)
        pool[origin] = conn
        return conn

    def _drop(self, origin: tuple[str, str]) -> None:
        conn = self._local.__dict__.get("pool", {}).pop(origin, None)
        if conn is not None:
            conn.close()

    def _send(
        self, origin: tuple[str, str], target: str, headers: dict[str, str]
    ) -> http.client.HTTPResponse:
        """The response to one GET (its headers read)."""
        conn = self._connection(origin)
        try:
            conn.request("GET", target, headers=headers)
            return conn.getresponse()
        except TimeoutError as e:
            self._drop(origin)
            raise self._stalled(e) from None
        except (http.client.HTTPException, OSError) as e:
            self._drop(origin)
            raise TransportError(
                TransportKind.CONNECTION,
                "the connection failed before an answer",
                retryable=True,
                details=f"{type(e).__name__}: {e}",
            ) from None

    def _stalled(self, exc: BaseException) -> TransportError:
        return TransportError(
            TransportKind.STALLED,
            f"no data for {self.idle_timeout:g} s",
            retryable=False,
            details=f"{type(exc).__name__}: {exc}",
        )

    # -- one request ---------------------------------------------------------------------------
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
        end = start + len(out)
        headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
        if conditions.etag:
            headers["If-Match"] = conditions.etag
        elif conditions.last_modified:
            headers["If-Unmodified-Since"] = conditions.last_modified
        origin, target = self._target(path)
        for _ in range(MAX_REDIRECTS + 1):
            sent = {**headers, **self._headers} if origin == self._origin else headers
            response = self._send(origin, target, sent)
            if response.status not in _REDIRECTS:
                return self._answer(origin, response, start, out, first=first, deadline=deadline)
            location = response.getheader("Location") or ""
            response.read()
            here = f"{origin[0]}://{origin[1]}{target}"
            split = urllib.parse.urlsplit(urllib.parse.urljoin(here, location))
            origin = (split.scheme, split.netloc)
            target = split.path + (f"?{split.query}" if split.query else "")
        raise TransportError(
            TransportKind.STATUS, f"more than {MAX_REDIRECTS} redirects", retryable=False
        )

    def _answer(
        self,
        origin: tuple[str, str],
        response: http.client.HTTPResponse,
        start: int,
        out: memoryview,
        *,
        first: bool,
        deadline: float | None,
    ) -> Answer:
        end = start + len(out)
        status = response.status
        length = response.getheader("Content-Length")
        if status not in (200, 206):
            body = response.read(ERROR_BODY_BYTES)
            if response.length:  # a long error body: not worth reading to keep the connection
                self._drop(origin)
            raise _status_error(status, response.reason, response.headers, body)
        size: int
        if status == 206:
            served = _content_range(response.getheader("Content-Range"))
            ok_end = (min(end, served[2]) if first else end) if served else -1
            if served is None or served[0] != start or served[1] != ok_end:
                self._drop(origin)
                raise TransportError(
                    TransportKind.RANGE,
                    f"the server answered {response.getheader('Content-Range')!r} for bytes "
                    f"{start}-{end - 1}",
                    retryable=False,
                )
            start_, end_, size = served
        else:  # 200: the whole object; right only where the whole object was asked for
            size = int(length) if length and length.isdigit() else -1
            whole = start == 0 and (size == end or (first and 0 <= size <= end))
            if not whole:
                self._drop(origin)
                raise TransportError(
                    TransportKind.RANGE,
                    "the server ignores Range (it answered 200 with the whole file)",
                    retryable=False,
                )
            start_, end_ = 0, size
        if length is not None and length.isdigit() and int(length) != end_ - start_:
            self._drop(origin)
            raise TransportError(
                TransportKind.RANGE,
                f"Content-Length {length} for {end_ - start_} bytes of Content-Range",
                retryable=False,
            )
        self._fill(origin, response, out[: end_ - start_], deadline)
        etag = strong_etag(response.getheader("ETag"))
        version = response.getheader(self._version_header) if self._version_header else None
        return Answer(start_, end_, size, etag, response.getheader("Last-Modified"), version)

    def _fill(
        self,
        origin: tuple[str, str],
        response: http.client.HTTPResponse,
        out: memoryview,
        deadline: float | None,
    ) -> None:
        got = 0
        rate = RateWatch(self.limits)
        try:
            while got < len(out):
                if deadline is not None and time.monotonic() > deadline:
                    self._drop(origin)
                    raise TransportError(
                        TransportKind.DEADLINE,
                        f"the body was still arriving: {got} of {len(out)} bytes",
                        retryable=False,
                    )
                # one receive at a time (not `readinto`, which waits for the whole buffer): a
                # trickle is cut by the minimum rate or the deadline, a stall at the socket's
                # idle timeout
                assert response.fp is not None
                n = response.fp.readinto1(out[got:])
                if not n:
                    break
                got += n
                rate.check(got, len(out))
        except TransportError:
            self._drop(origin)
            raise
        except TimeoutError as e:
            self._drop(origin)
            raise self._stalled(e) from None
        except (http.client.HTTPException, OSError) as e:
            self._drop(origin)
            raise TransportError(
                TransportKind.CONNECTION,
                f"the body broke off after {got} of {len(out)} bytes",
                retryable=True,
                details=f"{type(e).__name__}: {e}",
            ) from None
        if got < len(out):
            self._drop(origin)
            raise TransportError(
                TransportKind.CONNECTION,
                f"the body ended after {got} of {len(out)} bytes",
                retryable=True,
            )
        response.length = 0
        response.read()  # the body is read: the response closes, the connection is kept


#: A presigned URL says it is valid this long (`X-Amz-Expires`)...
SIGNED_URL_LIFETIME_S = 3600.0
#: ...but is signed again after this: a URL signed with temporary credentials (an instance
#: profile's, STS's) dies with them, and obstore renews them minutes before they expire, so a URL
#: at most this old was signed with credentials that outlive the requests it starts.
SIGNED_URL_REUSE_S = 60.0


class SignedURLs:
    """Presigned GET URLs of an obstore store's objects (`obstore.sign`: S3's query-string
    signature, made from the store's own credentials and endpoint), each signed again once
    `reuse_s` has passed (signing is a local HMAC: cheap). `HTTPTransport(locate=SignedURLs(store))`
    then reads S3's bodies straight into their destination, as it reads HTTP's.

    Example:
        >>> urls = SignedURLs(S3Store("bucket"))
        >>> urls("sa3/model.safetensors")  # 'https://bucket.s3...?X-Amz-Signature=...'
    """

    def __init__(
        self,
        store: Any,
        *,
        lifetime_s: float = SIGNED_URL_LIFETIME_S,
        reuse_s: float = SIGNED_URL_REUSE_S,
    ) -> None:
        self.store, self.lifetime_s, self.reuse_s = store, lifetime_s, reuse_s
        self._signed: dict[str, tuple[str, float]] = {}  # path -> (URL, when signed)
        self._lock = threading.Lock()

    def __call__(self, path: str) -> str:
        now = time.monotonic()
        with self._lock:
            signed = self._signed.get(path)
            if signed is not None and now - signed[1] < self.reuse_s:
                return signed[0]
        import obstore

        url = obstore.sign(self.store, "GET", path, timedelta(seconds=self.lifetime_s))
        with self._lock:
            self._signed[path] = (url, now)
        return url


class ObstoreTransport:
    """Range requests through an `obstore` store (S3 unsigned, GCS); module docstring.

    The body comes as `obstore` receives it (`stream`), each piece copied into its place, so
    the load's deadline and the minimum rate are checked as it arrives, as `HTTPTransport`
    does; a stall is obstore's `read_timeout` (the idle timeout). A store that pins a generation
    (`Conditions.version`: GCS) reads that generation or nothing: a not-found once the object is
    open is a replaced object (`changed`).
    """

    def __init__(self, store: Any, *, limits: TimeLimits = TimeLimits()) -> None:
        self.store = store
        self.limits = limits
        self.idle_timeout = limits.idle_s

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
        import obstore

        end = start + len(out)
        try:
            result = obstore.get(self.store, path, options=_get_options(start, end, conditions))
            meta = result.meta
            served = result.range
            size = int(meta["size"])
            ok_end = min(end, size) if first else end
            if tuple(served) != (start, ok_end):
                raise TransportError(
                    TransportKind.RANGE,
                    f"asked for bytes {start}-{ok_end - 1}, got {served[0]}-{served[1] - 1}",
                    retryable=False,
                )
            self._fill(result, out[: ok_end - start], deadline)
        except TransportError:
            raise
        except Exception as e:  # noqa: BLE001 - classified here, once
            raise self._classify(e, pinned=conditions.version is not None) from None
        modified = meta.get("last_modified")
        return Answer(
            start,
            ok_end,
            size,
            strong_etag(meta.get("e_tag")),
            email.utils.format_datetime(modified, usegmt=True)
            if isinstance(modified, datetime)
            else None,
            meta.get("version"),
        )

    def _fill(self, result: Any, out: memoryview, deadline: float | None) -> None:
        """The body, piece by piece as it arrives, into `out` (deadline and minimum rate)."""
        got = 0
        rate = RateWatch(self.limits)
        for piece in result.stream(min_chunk_size=0):
            if deadline is not None and time.monotonic() > deadline:
                raise TransportError(
                    TransportKind.DEADLINE,
                    f"the body was still arriving: {got} of {len(out)} bytes",
                    retryable=False,
                )
            n = len(piece)
            if got + n > len(out):
                raise TransportError(
                    TransportKind.RANGE,
                    f"the body is longer than the {len(out)} bytes asked for",
                    retryable=False,
                )
            out[got : got + n] = memoryview(piece).cast("B")
            got += n
            rate.check(got, len(out))
        if got < len(out):
            raise TransportError(
                TransportKind.CONNECTION,
                f"the body ended after {got} of {len(out)} bytes",
                retryable=True,
            )

    def _classify(self, exc: Exception, *, pinned: bool) -> TransportError:
        from obstore.exceptions import (
            NotFoundError,
            PermissionDeniedError,
            PreconditionError,
            UnauthenticatedError,
        )

        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, PreconditionError):
            return TransportError(
                TransportKind.CHANGED, "the file changed", retryable=False, details=text
            )
        if isinstance(exc, NotFoundError | FileNotFoundError):
            if pinned:  # the generation read so far is gone: the object was replaced
                return TransportError(
                    TransportKind.CHANGED,
                    "the file changed (its generation is gone)",
                    retryable=False,
                    details=text,
                )
            return TransportError(
                TransportKind.NOT_FOUND, "not found", retryable=False, details=text
            )
        if isinstance(exc, PermissionDeniedError | UnauthenticatedError):
            return TransportError(
                TransportKind.ACCESS, "access refused", retryable=False, details=text
            )
        if "timed out" in text or "operation timed out" in text.lower():
            return TransportError(
                TransportKind.STALLED,
                f"no data for {self.idle_timeout:g} s",
                retryable=False,
                details=text,
            )
        return TransportError(
            TransportKind.CONNECTION, "the request failed", retryable=True, details=text
        )


def _get_options(start: int, end: int, conditions: Conditions) -> GetOptions:
    """obstore's `GetOptions` for one range on the object's validators: its generation where
    pinned (GCS), else If-Match on its ETag, else If-Unmodified-Since."""
    options: GetOptions = {"range": (start, end)}
    if conditions.version:
        options["version"] = conditions.version
    elif conditions.etag:
        options["if_match"] = conditions.etag
    elif conditions.last_modified:
        options["if_unmodified_since"] = email.utils.parsedate_to_datetime(conditions.last_modified)
    return options
