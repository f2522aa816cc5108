"""Two runs at once: two `bench run` into one results folder while the dashboard's reader polls,
and two processes synthesising the same cached checkpoint.

Fake strategies (`tests/integration/fakes`, via LOADBENCH_EXTRA_STRATEGIES) keep the runs fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bench.records.results import read_results
from tests.commands import loadbench

FAKES = Path(__file__).parent / "fakes"
REPEATS = 4


def _env(cache: Path) -> dict[str, str]:
    path = os.pathsep.join([str(FAKES), str(Path.cwd()), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "PYTHONPATH": path.strip(os.pathsep),
        "LOADBENCH_CACHE": str(cache),
        "LOADBENCH_EXTRA_STRATEGIES": "fake_ok",
    }


def _poll(folder: Path, runs: list[subprocess.Popen]) -> int:
    """Read the folder until both runs end; every read must be clean. Returns the reads made."""
    from dashboard.data import _results  # the dashboard's one reader

    reads = 0
    while any(p.poll() is None for p in runs) or reads == 0:
        res = _results.read_results(folder)
        assert res.errors == [], res.errors  # a line being appended is never parsed half
        assert res.phases["status"].notna().all()
        reads += 1
        time.sleep(0.05)
    return reads


def test_two_runs_into_one_folder_while_a_reader_polls(tmp_path):
    out = tmp_path / "results"
    argv = loadbench(
        "bench",
        "run",
        "--shapes",
        "tiny-gpt2",
        "--strategies",
        "fake-ok",
        "--repeats",
        str(REPEATS),
        "--max-repeats",
        str(REPEATS),
        "--out",
        str(out),
        "--json",
    )
    env = _env(tmp_path / "cache")
    subprocess.run([*argv[:4], "list"], env=env, check=True, capture_output=True)
    runs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    reads = _poll(out, runs)
    for p in runs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    res = read_results(out)
    assert res.errors == [] and reads > 1
    assert res.runs["run_id"].nunique() == 2
    totals = res.phases[res.phases["phase"] == "total"]
    assert (totals.groupby("run_id").size() == REPEATS).all() and len(totals) == 2 * REPEATS
    for jsonl in out.rglob("*.jsonl"):  # whole lines only, one record each
        lines = jsonl.read_bytes().split(b"\n")
        assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])


_SYNTH_CHILD = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import shapes.synth as synth

    out, log, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    write = synth._write_checkpoint

    def slow_write(*args, **kwargs):
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(1.0)  # both processes are inside synthesize() at once
        return write(*args, **kwargs)

    synth._write_checkpoint = slow_write
    while not go.exists():
        time.sleep(0.01)
    path = synth.synthesize("tiny-gpt2", out)
    from loader.format import read_header
    from loader.format.source import CheckpointSource
    read_header(path)
    with CheckpointSource(path) as src:
        for key in src.keys():
            synth.verify_tensor(path, key, src.read(key))
    print("verified")
    """
)


def test_two_processes_synthesise_one_checkpoint(tmp_path):
    out, log, go = tmp_path / "ckpt", tmp_path / "writers.log", tmp_path / "go"
    env = _env(tmp_path / "cache")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SYNTH_CHILD, str(out), str(log), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(2.0)  # both imported and waiting
    go.touch()
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0 and "verified" in stdout, stderr
    assert len(log.read_text().split()) == 1  # one wrote; the other waited, then reused
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


def test_a_line_being_written_is_skipped_quietly_a_cut_one_reported(tmp_path):
    from bench.machine.facts import run_record
    from bench.records.writer import ResultsWriter

    path = tmp_path / "m" / "run.jsonl"
    with ResultsWriter(path) as writer:
        writer.write(run_record("r1", ["test"]))
        with open(path, "ab") as fh:  # the first bytes of the next line, as a reader may see them
            fh.write(b'{"schema_version": 1, "rec')
        res = read_results(tmp_path)
        assert res.errors == [] and len(res.runs) == 1  # still being written: not an error
    res = read_results(tmp_path)  # its writer is gone: a cut line, reported, never parsed
    assert len(res.runs) == 1 and "truncated last line" in res.errors[0][1]


def test_a_killed_bench_leaves_results_the_readers_take(tmp_path):
    import signal

    from dashboard.data import _results

    out = tmp_path / "results"
    argv = loadbench(
        "bench",
        "run",
        "--shapes",
        "tiny-gpt2",
        "--strategies",
        "fake-ok",
        "--repeats",
        "50",
        "--max-repeats",
        "50",
        "--out",
        str(out),
    )
    proc = subprocess.Popen(argv, env=_env(tmp_path / "cache"), stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(
        b'"phase"' in p.read_bytes() for p in out.rglob("*.jsonl")
    ):
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    res = _results.read_results(out)
    assert len(res.runs) == 1 and len(res.phases) > 0
    assert all("truncated last line" in msg for _, msg in res.errors)
    assert [p for p in out.rglob("*") if p.name.endswith(".tmp")] == []
