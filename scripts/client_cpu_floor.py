"""The remote reader's CPU per byte against a client at the floor: `http.client` into the buffer.

nginx serves the checkpoint on 127.0.0.1 (`bench.link.serve`, no shaping; `--source s3`:
SeaweedFS) and each repeat runs, in fresh processes and in an order that rotates between repeats:

- `reference` (HTTP only): Python's `http.client`, `--threads` threads (16), one kept-alive
  connection each, 8 MiB ranges, each body read with `readinto` straight into its part of one
  buffer of the file's size, allocated in the timed part: `np.empty` (the issue's reference,
  transparent huge pages), and the loader's own host buffer (`reference, host buffer`: ordinary
  pages, populated at once);
- `<tree>: RangeReader` (HTTP only): the same threads, ranges and host buffer through the loader's
  `RangeReader` over `HTTPTransport`, and with `--obstore` over obstore's client (its `HTTPStore`
  on the same server: the client S3 loads used) - the client alone, no model, no pipeline;
- `<tree>`: `loader.load_model(builder, url)` with the default strategy and options (the builder
  makes an NNX model of the checkpoint's shapes, `shapes.model_builder`), with `--digest` also
  with `digest="sha256:..."`.

`<tree>` is each `--src NAME=PATH` (e.g. the code before a change; the child runs there, first on
`sys.path`), default this one. Each child times its own work (wall, and the CPU-seconds of its
process, every thread: user + system) and, for a load, samples each thread's CPU from
`/proc/self/task` to say where it went (the reader threads, the main thread, the others: obstore's
runtime, XLA's). The table gives medians, ranges, CPU-s per GB (10^9 bytes of the file) and the
median of the ratios paired within a repeat, which the machine's drift between repeats moves
least: against each reference, and against the first tree's same client.

    .venv/bin/python scripts/client_cpu_floor.py /tmp/sa3/model.safetensors --shapes sa3 \
        --repeats 5 --obstore --src before=/tmp/main-src --src after=.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from remote_checks_cost import _sha256  # scripts/ is this script's folder, first on sys.path

REFERENCE = """
import http.client, json, sys, threading, time, urllib.parse
import numpy as np
url, threads, buffer, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3], 8 << 20
split = urllib.parse.urlsplit(url)
cpu0, t0 = time.process_time(), time.perf_counter()
conn = http.client.HTTPConnection(split.netloc)
conn.request("HEAD", split.path)
size = int(conn.getresponse().getheader("Content-Length"))
conn.close()
if buffer == "numpy":
    out = np.empty(size, np.uint8)
else:  # the loader's own host buffers: ordinary pages, populated at once
    from loader.format.buffers import host_buffer, populate_for_write
    out = host_buffer((size,), np.uint8)
    populate_for_write(out)
spans = [(a, min(size, a + chunk)) for a in range(0, size, chunk)]
lock = threading.Lock()
def run():
    conn = http.client.HTTPConnection(split.netloc)
    while True:
        with lock:
            if not spans:
                break
            a, b = spans.pop()
        conn.request("GET", split.path, headers={"Range": f"bytes={a}-{b - 1}"})
        response = conn.getresponse()
        assert response.status == 206, response.status
        view = memoryview(out)[a:b]
        got = 0
        while got < b - a:
            got += response.readinto(view[got:])
    conn.close()
workers = [threading.Thread(target=run) for _ in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
print(json.dumps({"wall": wall, "cpu": cpu, "bytes": size}))
"""

READER = """
import json, sys, threading, time
import numpy as np
from loader.format.buffers import host_buffer, populate_for_write
from loader.remote.ranges import RangeReader, RemoteObject
from loader.remote.transport import HTTPTransport, ObstoreTransport
url, threads, client, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3], 8 << 20
base, _, name = url.rpartition("/")
cpu0, t0 = time.process_time(), time.perf_counter()
if client == "obstore":  # obstore's own HTTP client, as it reads S3 (no signing here)
    from obstore.store import HTTPStore
    store = HTTPStore.from_url(base, client_options={"allow_http": True})
    transport = ObstoreTransport(store)
else:
    transport = HTTPTransport(base)
reader = RangeReader(transport, url=url, concurrency=threads)
_, answer = reader.first(name, url, 1 << 16, what="header")
obj = RemoteObject(url, name, answer.size, answer.etag, answer.last_modified)
out = host_buffer((obj.size,), np.uint8)
populate_for_write(out)
spans = [(a, min(obj.size, a + chunk)) for a in range(0, obj.size, chunk)]
lock = threading.Lock()
def run():
    while True:
        with lock:
            if not spans:
                break
            a, b = spans.pop()
        reader.read_into(obj, a, out[a:b], what="bytes")
workers = [threading.Thread(target=run) for _ in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
print(json.dumps({"wall": wall, "cpu": cpu, "bytes": obj.size}))
"""

LOAD = """
import json, os, sys, threading, time
import loader, shapes
url, spec, digest = sys.argv[1], sys.argv[2], sys.argv[3] or None
tick = os.sysconf("SC_CLK_TCK")
seen = {}  # native thread id -> (group, user CPU-s, system CPU-s)
def group(name):
    return "readers" if name.startswith(("loader-pipeline", "loader-remote")) else (
        "main" if name == "MainThread" else "other")
def sample():
    names = {t.native_id: group(t.name) for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user, sys_ = int(fields[11]) / tick, int(fields[12]) / tick
        seen[int(tid)] = (names.get(int(tid), "other"), user, sys_)
stop = threading.Event()
def sampler():
    while not stop.wait(0.1):
        sample()
builder = shapes.model_builder(shapes.load_spec(spec))
sample()
base = dict(seen)
watcher = threading.Thread(target=sampler, name="sampler", daemon=True)
watcher.start()
cpu0, t0 = time.process_time(), time.perf_counter()
model, report = loader.load_model(builder, url, digest=digest)
wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
stop.set(); watcher.join(); sample()
threads = {}
for tid, (name, user, sys_) in seen.items():
    if tid != watcher.native_id:
        _, user0, sys0 = base.get(tid, (name, 0.0, 0.0))
        was = threads.get(name, [0.0, 0.0])
        threads[name] = [was[0] + user - user0, was[1] + sys_ - sys0]
bytes_ = report.remote.bytes_received
print(json.dumps({"wall": wall, "cpu": cpu, "bytes": bytes_, "threads": threads,
                  "requests": report.remote.requests, "digest": report.remote.digest}))
"""


#: The `RangeReader` alone (no model, no pipeline) over each client: `HTTPTransport` and
#: `ObstoreTransport` (obstore's `HTTPStore` on the same server: its client as S3 loads use it).
READERS = {"RangeReader": "http", "RangeReader over obstore": "obstore"}
#: The reference's two destinations: numpy's `np.empty` (transparent huge pages asked for, as
#: the issue's reference) and the loader's own host buffer (ordinary pages, populated at once).
REFERENCES = {"reference": "numpy", "reference, host buffer": "host"}


def _child(code: str, argv: list[str], src: str) -> dict:
    """Run `code` with the source tree `src` first on `sys.path` (`python -c` puts its working
    folder there: the child runs in `src`) and return its JSON line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=src,
    )
    if run.returncode:
        raise SystemExit(f"child failed: {run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _range(values: list[float], digits: int = 2) -> str:
    return (
        f"{statistics.median(values):.{digits}f} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def _kinds(args: argparse.Namespace, trees: dict[str, str]) -> list[str]:
    """What each repeat runs: the references and the bare readers (over HTTP), then the loads."""
    loads = [*trees, *([f"{t}+digest" for t in trees] if args.digest else [])]
    if args.source != "http":
        return loads
    clients = list(READERS)[: 2 if args.obstore else 1]
    return [*REFERENCES, *[f"{t}: {c}" for t in trees for c in clients], *loads]


def _run(kind: str, url: str, args: argparse.Namespace, trees: dict[str, str]) -> dict:
    here = str(Path(__file__).resolve().parent.parent)
    if kind in REFERENCES:
        return _child(REFERENCE, [url, str(args.threads), REFERENCES[kind]], here)
    tree, _, client = kind.partition(": ")
    if client:
        return _child(READER, [url, str(args.threads), READERS[client]], trees[tree])
    given = args.digest if kind.endswith("+digest") else ""
    return _child(LOAD, [url, args.shapes, given], trees[kind.removesuffix("+digest")])


def _paired(rows: list[dict], against: list[dict] | None) -> str:
    if not against or rows is against:
        return "-"
    return _range([r["cpu"] / f["cpu"] for r, f in zip(rows, against)]) + "x"


def _table(runs: dict[str, list[dict]], size: int, first: str) -> None:
    """Medians (ranges) per kind; ratios paired within a repeat: against each reference, and a
    tree's load (or reader) against the first tree's same one."""
    print(
        "| client | wall s | CPU-s | CPU-s per GB | CPU / reference's | CPU / host buffer "
        f"reference's | CPU / {first}'s | CPU-s by thread: readers, main, other (user + sys) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind, rows in runs.items():
        cpus = [r["cpu"] for r in rows]
        name, sep, client = kind.partition(": ")  # "after+digest", "after: RangeReader"
        suffix = name[len(name.removesuffix("+digest")) :]
        same = None if kind in REFERENCES else f"{first}{suffix}{sep}{client}"
        paired = [_paired(rows, runs.get(k) if k else None) for k in (*REFERENCES, same)]
        by_thread = "-"
        if "threads" in rows[0]:
            by_thread = ", ".join(
                f"{statistics.median([r['threads'].get(g, [0, 0])[0] for r in rows]):.2f} + "
                f"{statistics.median([r['threads'].get(g, [0, 0])[1] for r in rows]):.2f}"
                for g in ("readers", "main", "other")
            )
        print(
            f"| {kind} | {_range([r['wall'] for r in rows])} | {_range(cpus)} | "
            f"{_range([c / (size / 1e9) for c in cpus])} | {' | '.join(paired)} | {by_thread} |",
            flush=True,
        )


def main() -> int:
    from bench.link.serve import serving

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--shapes", default="sa3")
    parser.add_argument("--source", default="http", choices=("http", "s3"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=16, help="the reference's threads")
    parser.add_argument(
        "--src",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a source tree to load with (first on PYTHONPATH); default: this one",
    )
    parser.add_argument("--digest", action="store_true", help="also load with digest=")
    parser.add_argument(
        "--obstore", action="store_true", help="also read through obstore's client (as for S3)"
    )
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    trees = dict(s.split("=", 1) for s in args.src) or {"load": here}
    size = args.checkpoint.stat().st_size
    args.digest = _sha256(args.checkpoint) if args.digest else ""
    kinds = _kinds(args, trees)
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    with serving(str(args.checkpoint), args.source, None, args.shapes) as url:
        for r in range(args.repeats):
            for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
                runs[kind].append(row := _run(kind, url, args, trees))
                print(f"# repeat {r}: {kind}: {json.dumps(row)}", file=sys.stderr, flush=True)
    _table(runs, size, next(iter(trees)))
    print(
        f"\n{args.checkpoint.name}: {size / 1e9:.2f} GB over {args.source} on 127.0.0.1; "
        f"{args.repeats} repeats per client; medians (min-max), ratios paired within a repeat"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
