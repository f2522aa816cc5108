"""The one writer of bench results: whole JSONL lines, appended, flushed and fsynced.

A run appends to `results/<machine>/<run-id>.jsonl` one record per line (`bench.records.schema`), so
a killed run loses at most its last line. The open file is `flock`ed, so a reader
(`bench.records.results.read_jsonl`) can tell a line its live writer is still appending
(`writer_alive`) from one a killed run cut short. Never import jax here: the dashboard reads through
this module.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from bench.errors import BenchError
from bench.records.schema import PhaseRecord, RunRecord, SampleRecord, to_json_line


class ResultsWriter:
    """Appends records to one JSONL file; each batch is one `write`, flushed and fsynced.

    The file is `flock`ed while open, so readers can tell a run still writing from one that was
    killed (`writer_alive`). A failed write (full disk, file-size limit, fsync error) cuts the file
    back to its last whole line and raises one `BenchError` naming the file and the errno.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise _write_error(self.path, exc) from None

    def write(self, record: RunRecord | PhaseRecord | SampleRecord) -> None:
        self.write_many([record])

    def write_many(self, records: Iterable[RunRecord | PhaseRecord | SampleRecord]) -> None:
        """Append whole lines, then fsync; on failure the file keeps only its earlier lines."""
        data = "".join(to_json_line(r) + "\n" for r in records).encode("utf-8")
        size = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            raise _write_error(self.path, exc) from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_error(path: Path, exc: OSError) -> BenchError:
    code = errno.errorcode.get(exc.errno or 0, "no errno")
    return BenchError(
        f"{path}: cannot write results ({code}: {exc.strerror or exc}); earlier rows are kept; "
        "free space or choose another folder with --out"
    )


def writer_alive(path: str | os.PathLike) -> bool:
    """True while a `ResultsWriter` (of any process) holds `path` open."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)
