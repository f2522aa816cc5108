"""Faults on write, for every writer: a full disk (a small tmpfs, root only), a file-size limit
(RLIMIT_FSIZE in a subprocess), a read-only folder and a failing fsync.

Each must leave the previous file intact and no temporary behind, and raise one project error
naming the path and the errno; the CLI exits non-zero with one line and no traceback. A killed
writer's temporary is removed, with a warning, by the next write to the same target, and nothing
else is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import loader
from bench.errors import BenchError
from bench.machine.facts import run_record
from bench.records.results import export_parquet, read_results
from bench.records.writer import ResultsWriter
from loader.format.stale_temps import StaleTempWarning
from shapes.synth import DIGESTS_FILE, synthesize
from tests.commands import loadbench

ROOT = os.geteuid() == 0
ERRORS = (loader.CheckpointError, BenchError)


def _model():
    from flax import nnx

    from tests.unit.nnx_models import MLP

    return MLP(nnx.Rngs(0), din=64, dh=128)  # 40 kB: more than a withdrawn manifest frees


def _save_model(folder: Path) -> Path:
    loader.save_model(_model(), folder / "model.safetensors")
    return folder / "model.safetensors"


def _save_sharded(folder: Path) -> Path:
    loader.save_sharded(_model(), folder / "ckpt")
    return folder / "ckpt" / "shard-0-of-1.safetensors"


def _synthesize(folder: Path) -> Path:
    synthesize("tiny-gpt2", folder / "synth", seed=len(os.listdir(folder)))
    return folder / "synth" / DIGESTS_FILE


def _results_rows(folder: Path) -> Path:
    with ResultsWriter(folder / "run.jsonl") as writer:
        writer.write(run_record("r1", ["test"]))
    return folder / "run.jsonl"


def _parquet(folder: Path) -> Path:
    if not (folder / "run.jsonl").exists():
        _results_rows(folder)
    export_parquet(folder / "run.jsonl")
    return folder / "run.runs.parquet"


WRITERS: dict[str, Callable[[Path], Path]] = {
    "checkpoint": _save_model,
    "shard-directory": _save_sharded,
    "digests": _synthesize,
    "results-rows": _results_rows,
    "parquet": _parquet,
}


def _temps(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*.tmp")]


def _intact(writer: str, target: Path, before: bytes) -> bool:
    """The previous file is whole. A re-synthesis first withdraws its digests (a checkpoint without
    digests is incomplete and gets rewritten), so there every file left must be whole instead."""
    if writer != "digests":
        return target.read_bytes() == before
    from loader.format import read_header

    for f in target.parent.glob("*.safetensors"):
        read_header(f)  # a half-written file would fail its tiling check
    return not target.exists() or target.read_bytes() == before


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_fsync_failure_keeps_previous_file(tmp_path, monkeypatch, writer):
    target = WRITERS[writer](tmp_path)
    before = target.read_bytes()

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(ERRORS) as err, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        WRITERS[writer](tmp_path)
    assert str(target.parent) in str(err.value) and "EIO" in str(err.value), str(err.value)
    assert _intact(writer, target, before)
    assert _temps(tmp_path) == []


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str) -> Iterator[Path]:
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(path: Path) -> None:
    """Take every free byte of the filesystem holding `path`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (1 << 16, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
    finally:
        os.close(fd)


needs_root = pytest.mark.skipif(not ROOT, reason="mounting a tmpfs needs root")


@needs_root
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_full_disk_keeps_previous_file(tmp_path, writer):
    with _tmpfs(tmp_path / "small", "1m") as disk:
        target = WRITERS[writer](disk)
        before = target.read_bytes()
        _fill(disk / "filler")
        with pytest.raises(ERRORS) as err, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(100):  # results rows are small: append until the disk refuses
                WRITERS[writer](disk)
        assert "ENOSPC" in str(err.value) and str(disk) in str(err.value), str(err.value)
        if writer == "results-rows":  # an append writer: earlier rows whole, no cut line
            assert target.read_bytes().startswith(before)
            assert target.read_bytes().endswith(b"\n")
        else:
            assert _intact(writer, target, before)
        assert _temps(disk) == []


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    if ROOT:  # root ignores permissions: remount the tmpfs read-only
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        try:
            yield
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
    else:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")] if p.is_dir()}
        for p in modes:
            p.chmod(0o555)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_read_only_folder_keeps_previous_file(tmp_path, writer):
    ctx = _tmpfs(tmp_path / "ro", "8m") if ROOT else contextlib.nullcontext(tmp_path)
    with ctx as folder:
        target = WRITERS[writer](folder)
        before = target.read_bytes()
        with _read_only(folder), pytest.raises(ERRORS) as err:
            WRITERS[writer](folder)
        assert str(folder) in str(err.value), str(err.value)
        assert any(code in str(err.value) for code in ("EROFS", "EACCES")), str(err.value)
        assert _intact(writer, target, before)
        assert _temps(folder) == []


_FSIZE_CHILD = textwrap.dedent(
    """
    import resource, signal, sys
    from pathlib import Path
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    from tests.integration.test_write_faults import WRITERS
    folder = Path(sys.argv[2])
    target = WRITERS[sys.argv[1]](folder)
    size = target.stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, size // 2))
    try:
        for _ in range(3):
            WRITERS[sys.argv[1]](folder)
    except Exception as e:
        print(type(e).__name__, e)
    """
)


@pytest.mark.parametrize("writer", ["checkpoint", "shard-directory", "parquet", "results-rows"])
def test_file_size_limit_keeps_previous_file(tmp_path, writer):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", _FSIZE_CHILD, writer, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert "EFBIG" in proc.stdout and str(tmp_path) in proc.stdout, proc.stdout + proc.stderr
    assert _temps(tmp_path) == []
    if writer == "results-rows":
        assert read_results(tmp_path / "run.jsonl").errors == []


_KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from loader.format.atomic import atomic_open
    with atomic_open(sys.argv[1]) as fh:
        fh.write(b"half a file")
        fh.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _kill_a_writer_of(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(target)], check=False)
    (left,) = [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]
    return left


@pytest.mark.parametrize("writer", ["checkpoint", "shard-directory", "digests"])
def test_next_write_removes_a_killed_writers_temporary(tmp_path, writer):
    target = WRITERS[writer](tmp_path)
    left = _kill_a_writer_of(target)
    lookalikes = [
        target.parent / f".{target.name}.notes",  # not the pattern: kept
        target.parent / f".other.safetensors.{left.name.split('.')[-2]}.tmp",  # another target
        target.parent / f"{target.name}.{left.name.split('.')[-2]}.tmp",  # not hidden: kept
    ]
    for p in lookalikes:
        p.write_bytes(b"keep me")
    with pytest.warns(StaleTempWarning, match=left.name):
        WRITERS[writer](tmp_path)
    assert not left.exists()
    assert all(p.read_bytes() == b"keep me" for p in lookalikes)


def test_a_live_writers_temporary_is_never_removed(tmp_path):
    from loader.format.atomic import atomic_open

    target = _save_model(tmp_path)
    with atomic_open(target) as fh:  # a writer still at work on the same target
        fh.write(b"first writer")
        (live,) = [p for p in tmp_path.iterdir() if p.name.startswith(f".{target.name}.")]
        with warnings.catch_warnings():
            warnings.simplefilter("error", StaleTempWarning)
            _save_model(tmp_path)
        assert live.exists()
    assert target.read_bytes() == b"first writer"  # it finished: last replace wins


def test_cli_reports_a_failed_write_in_one_line(tmp_path):
    ctx = _tmpfs(tmp_path / "ro", "8m") if ROOT else contextlib.nullcontext(tmp_path)
    with ctx as folder, _read_only(folder):
        proc = subprocess.run(
            loadbench(
                "shapes",
                "synth",
                "tiny-gpt2",
                "--out",
                str(folder / "synth"),
            ),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert str(folder) in proc.stderr, proc.stderr
