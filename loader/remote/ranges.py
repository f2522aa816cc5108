"""Range requests with integrity checks: the one place a remote checkpoint's bytes are fetched.

Every request goes through `RangeReader.read_into`, which:
- checks the range against the object's size (known from the header requests) before sending it;
- asks on a validator, so a file replaced during the load is refused (`RemoteChangedError`), never
  mixed: `If-Match` on the object's strong ETag, else `If-Unmodified-Since` on its
  Last-Modified; and checks the answer's own validators. An object with neither is refused
  unless the load gives a digest or `unvalidated="allow"` (`loader.remote.source`);
- feeds the object's sha256 check (`loader.remote.digest`) where a digest is known;
- retries what a retry can fix (a 5xx, 408, 429, a reset or refused connection, a short body) at
  most `RETRIES` times, after the server's `Retry-After` (up to `RETRY_AFTER_CAP_S`) or a
  doubling pause with jitter, within the load's deadline (`timeout=`); what a retry cannot fix
  (a 4xx, a server that ignores `Range` or answers another range, a stall past the idle timeout)
  fails at once; then one one-line `RemoteError` naming the URL, the tensor and the byte range,
  the client's own text in its `details`;
- counts requests and bytes (`RemoteStats`) for the load report and the bench rows.

The requests themselves go through a transport (`loader.remote.transport`): `http.client`,
reading each body straight into its destination, for HTTP, the Hub and S3 (on URLs `obstore`
presigns); `obstore`'s own client for an S3 bucket it cannot sign for.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from loader.errors import RemoteChangedError, RemoteError
from loader.options import DEFAULT_CONCURRENCY, DEFAULT_IDLE_TIMEOUT_S  # (`loader.remote`'s doc)
from loader.remote.digest import FileDigest
from loader.remote.transport import (
    CONNECT_TIMEOUT_S,
    DEFAULT_MIN_RATE_BPS,
    Answer,
    Conditions,
    TimeLimits,
    Transport,
    TransportError,
    TransportKind,
)

RETRIES = 3  # a failed range is retried this many times (then one error)
BACKOFF_S = 0.2  # the first pause between attempts (times 0.5-1, jitter); doubles each time
RETRY_AFTER_CAP_S = 60.0  # a server's Retry-After is honoured up to this
CHUNK_BYTES = 8 << 20  # one request fetches at most this much (a large tensor: several)
__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_MIN_RATE_BPS",
    "RangeReader",
    "RemoteBytes",
    "RemoteObject",
    "RemoteStats",
    "TimeLimits",
]


@dataclass(frozen=True)
class RemoteObject:
    """One remote file: its display URL (no credential), path in its store, size, validators
    (its generation where the store pins one; a strong ETag; the Last-Modified date) and
    expected sha256 (hex) where one is known."""

    url: str
    path: str
    size: int
    etag: str | None
    last_modified: str | None = None
    sha256: str | None = None
    version: str | None = None

    @property
    def conditions(self) -> Conditions:
        """What every range must still match: the generation, else the ETag, else the
        Last-Modified date."""
        if self.version:
            return Conditions(version=self.version)
        if self.etag:
            return Conditions(etag=self.etag)
        return Conditions(last_modified=self.last_modified)

    @property
    def validator(self) -> str:
        """`generation`, `etag`, `last-modified` or `none`."""
        if self.version:
            return "generation"
        return "etag" if self.etag else "last-modified" if self.last_modified else "none"


@dataclass(frozen=True)
class RemoteStats:
    """What a remote load sent and got (recorded in `LoadReport.remote` and bench rows)."""

    url: str
    concurrency: int
    chunk_bytes: int
    requests: int
    bytes_requested: int
    bytes_received: int
    retries: int
    #: of `bytes_received`, what the header requests got (each file's first `HEAD_BYTES` may
    #: hold tensor bytes too): the rest is what the tensor reads got
    header_bytes: int = 0
    #: the checkpoint's tensor bytes (every shard file's data): a load that requests each byte
    #: once gets at most this beyond `header_bytes`
    tensor_bytes: int = 0
    #: what every range was checked against: `etag`, `last-modified`, or `none` (the load gave
    #: `unvalidated="allow"` or a digest); several files' differing validators joined by `+`
    validator: str = ""
    #: the sha256 check: `checked` (every file's bytes matched), `not known` (no digest given
    #: and none from the Hub), or `not checked: <why>` (a process that read part of a file)
    digest: str = ""
    #: bytes fetched again only to complete a digest (ranges received out of turn and not held)
    digest_refetched_bytes: int = 0
    #: the most bytes the digest held at once (copies of ranges received ahead of their turn),
    #: summed over files: host memory the check took beyond the load's own
    digest_held_peak_bytes: int = 0
    #: a `sharded` load's read plan (`loader.sharded.read_plan`; None and 0 for a load without
    #: one): the bound on bytes read over bytes needed it ran under, the requests it planned, the
    #: bytes they read (gaps read through included) and the bytes of the share among them
    max_over_read: float | None = None
    planned_requests: int = 0
    planned_bytes: int = 0
    needed_bytes: int = 0

    @property
    def over_read(self) -> float | None:
        """The plan's bytes read over bytes needed (1.0: the share only); None without a plan."""
        if self.max_over_read is None:
            return None
        return self.planned_bytes / self.needed_bytes if self.needed_bytes else 1.0

    @property
    def refetched_bytes(self) -> int:
        """Bytes received beyond the headers and the checkpoint's tensors, each once: bytes
        requested again (0 for a load that requests each byte at most once)."""
        return max(0, self.bytes_received - self.header_bytes - self.tensor_bytes)

    def __str__(self) -> str:
        """One line a user reads: what was asked and got against the checkpoint's tensors."""
        again = f", {self.refetched_bytes} of them again" if self.refetched_bytes else ""
        plan = (
            ""
            if self.over_read is None
            else f"; planned {self.planned_requests} requests reading {self.planned_bytes} bytes "
            f"for {self.needed_bytes} needed ({self.over_read:.2f}x, at most "
            f"{self.max_over_read}x)"
        )
        return (
            f"{self.url}: {self.requests} requests ({self.concurrency} in flight), "
            f"{self.bytes_requested} bytes requested, {self.bytes_received} received "
            f"({self.header_bytes} by the header requests{again}) for {self.tensor_bytes} "
            f"bytes of tensors{plan}; validator {self.validator or 'none'}, sha256 "
            f"{self.digest or 'not known'}"
        )


@dataclass
class _Counts:
    requests: int = 0
    bytes_requested: int = 0
    bytes_received: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def one_line(exc: BaseException, secret: str | None = None) -> str:
    """An exception's first line (at most 200 characters), without `secret` anywhere in it."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = text.split(": Error performing", 1)[0]
    text = text.replace(secret, "***") if secret else text
    return text if len(text) <= 200 else text[:197] + "..."


def scrub(text: str, secret: str | None) -> str:
    """`text` without `secret` (a token) anywhere in it."""
    return text.replace(secret, "***") if secret else text


class RangeReader:
    """Fetches checked byte ranges of the objects of one store (thread-safe).

    Example:
        >>> reader = RangeReader(transport, url="s3://bucket/model.safetensors")
        >>> reader.read_into(obj, 0, out, what="header")  # fills the uint8 array `out`
    """

    def __init__(
        self,
        transport: Transport,
        *,
        url: str,
        concurrency: int = DEFAULT_CONCURRENCY,
        chunk_bytes: int = CHUNK_BYTES,
        secret: str | None = None,
        limits: TimeLimits | None = None,
    ) -> None:
        self.transport = transport
        self.url = url
        self.concurrency = concurrency
        self.chunk_bytes = chunk_bytes
        self.limits = limits or TimeLimits()
        self._secret = secret
        self._counts = _Counts()
        self._started = time.monotonic()
        #: object path -> its running sha256 (`loader.remote.digest`), where a digest is known
        self.digests: dict[str, FileDigest] = {}

    def stats(self) -> RemoteStats:
        c = self._counts
        with c.lock:
            return RemoteStats(
                self.url,
                self.concurrency,
                self.chunk_bytes,
                c.requests,
                c.bytes_requested,
                c.bytes_received,
                c.retries,
            )

    # -- requests ------------------------------------------------------------------------------
    def first(self, path: str, url: str, nbytes: int, *, what: str) -> tuple[np.ndarray, Answer]:
        """An object's first `nbytes` (fewer where it is shorter) and what the answer said of
        the object (size, validators): its first request, retried like any other."""
        out = np.empty(nbytes, np.uint8)
        answer = self._with_retries(path, url, 0, out, Conditions(), what=what, first=True)
        return out[: answer.end], answer

    def read_into(self, obj: RemoteObject, start: int, out: np.ndarray, *, what: str) -> None:
        """Fill the uint8 array `out` with `obj`'s bytes from `start` (one request), checked
        and retried (module docstring)."""
        end = start + out.nbytes
        if not 0 <= start < end <= obj.size:
            raise RemoteError(
                f"{obj.url}: {what}: bytes {start}-{end - 1} lie outside the "
                f"{obj.size}-byte file; the header and the file disagree (re-upload the file)"
            )
        digest = self.digests.get(obj.path)
        if digest is None:
            self._read_checked(obj, start, out, what=what)
            return
        digest.expect(start, end)
        try:
            self._read_checked(obj, start, out, what=what)

            def fill(a: int, b: int) -> np.ndarray:  # a gap for the digest, not fed to it
                gap = np.empty(b - a, np.uint8)
                self._read_checked(obj, a, gap, what=f"{what}, for the file's sha256")
                return gap

            digest.feed(start, out, fill)
        finally:
            digest.settle(start)

    def _read_checked(self, obj: RemoteObject, start: int, out: np.ndarray, *, what: str) -> None:
        answer = self._with_retries(obj.path, obj.url, start, out, obj.conditions, what=what)
        end = start + out.nbytes
        self._check_validators(obj, answer, f"{obj.url}: {what}, bytes {start}-{end - 1}")

    def get(self, obj: RemoteObject, start: int, end: int, *, what: str) -> np.ndarray:
        """The bytes `[start, end)` of `obj` in a fresh uint8 array (one request)."""
        out = np.empty(end - start, np.uint8)
        self.read_into(obj, start, out, what=what)
        return out

    def _with_retries(
        self,
        path: str,
        url: str,
        start: int,
        out: np.ndarray,
        conditions: Conditions,
        *,
        what: str,
        first: bool = False,
    ) -> Answer:
        end = start + out.nbytes
        where = f"{url}: {what}, bytes {start}-{end - 1}"
        view = out.reshape(-1).data
        failure: TransportError | None = None
        for attempt in range(RETRIES + 1):
            if attempt:
                assert failure is not None
                self._pause(attempt, failure, where)
                with self._counts.lock:
                    self._counts.retries += 1
            self._check_deadline(where)
            self._count(requests=1, requested=end - start)
            try:
                answer = self.transport.read(
                    path, start, view, conditions, first=first, deadline=self._deadline_at()
                )
            except TransportError as e:
                if not e.retryable:
                    raise self._error(e, where) from None
                failure = e
                continue
            self._count(received=answer.end - answer.start)
            return answer
        assert failure is not None
        raise RemoteError(
            f"{where}: failed after {RETRIES + 1} attempts (last: {failure.reason}); "
            "check that the server is up and serves byte ranges, then load again",
            details=scrub(failure.details, self._secret),
        )

    def _pause(self, attempt: int, failure: TransportError, where: str) -> None:
        """Wait before attempt `attempt`: the server's Retry-After (capped), else a doubling
        pause with jitter; never past the deadline."""
        if failure.retry_after is not None:
            pause = min(failure.retry_after, RETRY_AFTER_CAP_S)
        else:
            pause = BACKOFF_S * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)
        deadline = self.limits.deadline_s
        if deadline is not None and time.monotonic() + pause > self._started + deadline:
            raise RemoteError(
                f"{where}: the load's timeout of {deadline:g} s would pass while waiting "
                f"{pause:.1f} s to retry ({failure.reason}); raise timeout= or load again later",
                details=scrub(failure.details, self._secret),
            )
        time.sleep(pause)

    def _deadline_at(self) -> float | None:
        deadline = self.limits.deadline_s
        return None if deadline is None else self._started + deadline

    def _check_deadline(self, where: str) -> None:
        deadline = self.limits.deadline_s
        if deadline is not None and time.monotonic() > self._started + deadline:
            raise RemoteError(
                f"{where}: the load's timeout of {deadline:g} s passed; raise timeout= "
                "or check the link"
            )

    def _error(self, e: TransportError, where: str) -> RemoteError:
        """A failure a retry cannot fix, as one line with its fix."""
        details = scrub(e.details, self._secret)
        if e.kind == TransportKind.CHANGED:
            return self._changed(where)
        if e.kind == TransportKind.DEADLINE:
            return RemoteError(
                f"{where}: the load's timeout of {self.limits.deadline_s:g} s passed ({e.reason}); "
                "raise timeout= or check the link",
                details=details,
            )
        url, _, rest = where.partition(": ")
        if e.kind == TransportKind.STALLED:
            return RemoteError(
                f"{url}: {e.reason} ({rest}); check the server, or raise idle_timeout=",
                details=details,
            )
        if e.kind == TransportKind.SLOW:
            return RemoteError(
                f"{url}: too slow: {e.reason} ({rest}); check the server and the link",
                details=details,
            )
        fixes = {
            TransportKind.NOT_FOUND: "check the URL",
            TransportKind.ACCESS: "check the credentials",
            TransportKind.RANGE: "the server does not serve byte ranges correctly; serve the "
            "file from one that does (nginx, S3)",
        }
        fix = fixes.get(e.kind, "check the URL and the server")
        return RemoteError(f"{where}: {e.reason}; {fix}", details=details)

    def _check_validators(self, obj: RemoteObject, answer: Answer, where: str) -> None:
        """The answer's own validators agree with the object's (a server may ignore If-Match)."""
        if obj.version and answer.version and answer.version != obj.version:
            raise self._changed(where)
        if obj.etag and answer.etag and answer.etag != obj.etag:
            raise self._changed(where)
        if (
            not obj.etag
            and obj.last_modified
            and answer.last_modified
            and answer.last_modified != obj.last_modified
        ):
            raise self._changed(where)

    @staticmethod
    def _changed(where: str) -> RemoteChangedError:
        return RemoteChangedError(
            f"{where}: the file changed during the load (its ETag or Last-Modified differs "
            "from the header's); nothing was loaded: load again once the upload is complete"
        )

    # -- several requests ----------------------------------------------------------------------
    def fetch(self, obj: RemoteObject, start: int, out: np.ndarray, *, what: str) -> None:
        """Fill the uint8 array `out` with `obj`'s bytes from `start`, one request per chunk,
        each read straight into its part of `out`."""
        flat = out.reshape(-1)
        for a in range(0, flat.nbytes, self.chunk_bytes):
            b = min(flat.nbytes, a + self.chunk_bytes)
            self.read_into(obj, start + a, flat[a:b], what=what)

    def fetch_views(
        self, obj: RemoteObject, start: int, views: list[np.ndarray], *, what: str
    ) -> None:
        """Fill the uint8 arrays `views` with `obj`'s consecutive bytes from `start` (small
        neighbouring tensors coalesced: one request per chunk of their joint range)."""
        total = sum(v.nbytes for v in views)
        ends = np.cumsum([0, *[v.nbytes for v in views]])
        for a in range(0, total, self.chunk_bytes):
            b = min(total, a + self.chunk_bytes)
            data = self.get(obj, start + a, start + b, what=what)
            for i, view in enumerate(views):
                lo, hi = max(a, int(ends[i])), min(b, int(ends[i + 1]))
                if lo < hi:
                    view.reshape(-1)[lo - ends[i] : hi - ends[i]] = data[lo - a : hi - a]
            del data

    # -- the end of a load ---------------------------------------------------------------------
    def finish_digests(self, objects: dict[str, RemoteObject]) -> None:
        """Complete each known digest (fetching what no read received) and check it; raise
        `RemoteError` naming the file on a mismatch."""
        for path, digest in self.digests.items():
            obj = objects[path]

            def fetch(a: int, b: int, obj: RemoteObject = obj) -> np.ndarray:
                out = np.empty(b - a, np.uint8)
                self._read_checked(obj, a, out, what="the rest of the file, for its sha256")
                return out

            if not digest.finish(fetch, self.chunk_bytes):
                raise RemoteError(
                    f"{obj.url}: the bytes received do not match the file's sha256 (expected "
                    f"{digest.expected[:16]}..., got {digest.actual[:16]}...); nothing was "
                    "loaded: check the digest given, or load again"
                )

    def _count(self, *, requests: int = 0, requested: int = 0, received: int = 0) -> None:
        c = self._counts
        with c.lock:
            c.requests += requests
            c.bytes_requested += requested
            c.bytes_received += received


class RemoteBytes:
    """A tensor's bytes in a remote file (`loader.pipeline.regions.Bytes`), fetched in chunks."""

    shares_rows = True  # a row read again is a request over the link again: read it once
    maps = False  # bytes over a link are never memory to hand out

    def __init__(self, reader: RangeReader, obj: RemoteObject, start: int, where: str) -> None:
        self.reader, self.obj, self.start, self.where = reader, obj, start, where

    def read(self, offset: int, out: np.ndarray) -> None:
        self.reader.fetch(
            self.obj, self.start + offset, out.reshape(-1).view(np.uint8), what=self.where
        )

    def mapped(self, offset: int, nbytes: int) -> np.ndarray | None:
        return None  # `maps` is False
