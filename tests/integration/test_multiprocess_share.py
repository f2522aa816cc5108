"""`share=` of the `sharded` strategy as 2 and 4 processes of 1 and 4 CPU devices each.

Each process (`mp_share_worker.py`) loads one checkpoint from a local file and over HTTP (nginx)
in every mode into a poisoned model, and checks itself that every shard is bit-exact and every
leaf has the model's target sharding (a bytes load that skipped the resharding fails there).
These tests check what each process reported against figures the worker works out apart from the
loader: in bytes mode it reads its leading-axis blocks and no more (a local file's preads, a
URL's bytes received within 1.01x plus the headers, in few requests), and reports as exchanged
exactly the bytes its devices hold outside them; in regions mode it reads its own index ranges
and exchanges nothing; `auto` picks regions for a local file and tells why.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from loader.options import DEFAULT_MAX_OVER_READ
from loader.sharded.share import request_bound
from tests.multiprocess import launch

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

WORKER = Path(__file__).with_name("mp_share_worker.py")
SHAPES = {
    "cols.kernel": (32, 64),
    "cols.bias": (64,),
    "rows.kernel": (64, 16),
    "rows.bias": (16,),
    "odd.kernel": (3, 16),
}


def values(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Distinct values per tensor, with a -0.0 and a NaN carrying a payload in each."""
    seed = sum(map(ord, name))
    out = ((np.arange(int(np.prod(shape)), dtype=np.float32) + seed) / 7).reshape(-1)
    out[1] = -0.0
    out.view(np.uint32)[2] = 0x7FC0_1234
    return out.reshape(shape)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The checkpoint's path, and its URL on nginx."""
    from safetensors.numpy import save_file

    from bench.link.servers import start_nginx

    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx is not installed (apt-get install nginx; .ci/run installs it)")
    root = tmp_path_factory.mktemp("mp-share")
    path = root / "model.safetensors"
    save_file({k: values(k, s) for k, s in SHAPES.items()}, str(path))
    with start_nginx(root) as server:
        yield path, f"{server.url}/model.safetensors"


def run(tmp_path: Path, served, processes: int, devices: int) -> list[dict]:
    path, url = served
    outcomes = launch(
        WORKER,
        [str(tmp_path), str(path), url],
        processes=processes,
        devices=devices,
        timeout_s=240,
    )
    for o in outcomes:
        assert o.returncode == 0, f"process {o.process} exit {o.returncode}:\n{o.output[-6000:]}"
    return [json.loads((tmp_path / f"p{i}.json").read_text()) for i in range(processes)]


def reads_its_share(r: dict) -> None:
    """What the process read is what the worker expected of the chosen mode, no more: a local
    file's preads, or a URL's bytes received within 1.01x plus the headers in bytes mode (the
    read plan's bound, `max_over_read`, in regions mode), in bytes mode in at most the share /
    8 MiB + the tensors + 10 requests."""
    assert r["share_bytes"] == r["expected_read"], r
    if "bytes_received" in r:
        bound = 1.01 if r["mode"] == "bytes" else DEFAULT_MAX_OVER_READ
        assert r["bytes_received"] <= bound * r["share_bytes"] + r["header_bytes"], r
        if r["mode"] == "bytes":
            assert r["planned_requests"] <= bound_of(r), r
    else:
        assert r["preads"] == r["expected_read"], r


def bound_of(r: dict) -> float:
    return request_bound(r["share_bytes"], r["tensors"])


def exchanges_what_it_did_not_read(r: dict) -> None:
    assert r["exchanged_bytes"] == r["expected_exchanged"], r
    assert r["block_tensors"] == r["expected_blocks"], r
    assert r["block_tensors"] + r["region_tensors"] + r["whole_tensors"] == len(SHAPES)


@pytest.mark.parametrize("processes", [2, 4])
@pytest.mark.parametrize("devices", [1, 4])
def test_every_mode_is_bit_exact_and_reads_its_share(served, tmp_path, processes, devices):
    reports = run(tmp_path, served, processes, devices)
    for source in ("file", "http"):
        for mode in ("regions", "bytes", "auto"):
            rows = [report[f"{source} {mode}"] for report in reports]
            assert len({r["mode"] for r in rows}) == 1, rows  # every process chose the same
            for r in rows:
                assert r["asked"] == mode and r["reason"], r
                reads_its_share(r)
                exchanges_what_it_did_not_read(r)
                if r["mode"] == "regions":
                    assert r["exchanged_bytes"] == 0 and r["block_tensors"] == 0, r
                else:  # the column-split kernel and the biases come as blocks
                    assert r["block_tensors"] >= 3 and r["exchanged_bytes"] > 0, r
            if mode != "auto":
                assert rows[0]["mode"] == mode
            elif source == "file":
                assert rows[0]["mode"] == "regions" and "local file" in rows[0]["reason"]
            else:  # bytes where some process's regions would send more requests than its bound,
                # or receive more than 1.05x the bytes it reads in bytes mode
                pairs = [(report["http regions"], report["http bytes"]) for report in reports]
                over = any(
                    r["planned_requests"] > bound_of(r)
                    or r["planned_bytes"] > 1.05 * b["share_bytes"]
                    for r, b in pairs
                )
                assert rows[0]["mode"] == ("bytes" if over else "regions"), (rows[0], pairs)
    # bytes mode reads the checkpoint once across the processes; regions reads the replicated
    # biases in every process
    total = {m: sum(report[f"file {m}"]["share_bytes"] for report in reports) for m in MODES}
    checkpoint = sum(4 * int(np.prod(s)) for s in SHAPES.values())
    assert total["bytes"] < total["regions"]
    assert total["bytes"] == checkpoint


MODES = ("regions", "bytes")
