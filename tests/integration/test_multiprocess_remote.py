"""The `sharded` strategy over real servers: 2 and 4 `jax.distributed` processes, each its share.

nginx (HTTP) and moto's S3 server on 127.0.0.1 serve one checkpoint (a row-sharded and a
column-sharded kernel, two replicated biases). Each process (`mp_remote_worker.py`) fills a
poisoned model and checks its shards bit-exactly; these tests check what each reported: its
column block (`fc2.kernel`, one run per row) read in few requests by its read plan (at most its
share / 8 MiB + its tensors + 10, where one request per run took more), and the bytes it received
within the plan's bound (`max_over_read` x its share, its distinct index ranges) plus the header
requests, far from the whole file that the same process received when it loaded the URL whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from loader.options import DEFAULT_MAX_OVER_READ
from loader.remote.ranges import CHUNK_BYTES
from tests.multiprocess import launch

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

WORKER = Path(__file__).with_name("mp_remote_worker.py")
HTTP_PATH = "/one/model.safetensors"
S3_URL = "s3://loadbench/one/model.safetensors"


def expected(name: str, shape: tuple[int, ...]) -> np.ndarray:
    seed = sum(map(ord, name))
    return ((np.arange(int(np.prod(shape)), dtype=np.float32) + seed) / 7).reshape(shape)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from safetensors.numpy import save_file

    path = tmp_path_factory.mktemp("mp-remote") / "one" / "model.safetensors"
    path.parent.mkdir()
    shapes = {"fc1.kernel": (512, 256), "fc1.bias": (256,), "fc2.kernel": (32, 512)}
    shapes["fc2.bias"] = (512,)
    save_file({k: expected(k, s) for k, s in shapes.items()}, str(path))
    return path


@pytest.fixture(scope="module")
def servers(checkpoint) -> dict[str, str]:
    """The checkpoint's URLs on nginx and on moto's S3 server (S3 variables set for the workers)."""
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx is not installed (apt-get install nginx; .ci/run installs it)")
    pytest.importorskip("moto", reason="moto[server] is not installed (the remote extra)")
    from bench.link.servers import s3_environment, start_moto, start_nginx, upload

    with start_nginx(checkpoint.parent.parent) as nginx, start_moto() as moto:
        upload(moto.url, {"one/model.safetensors": checkpoint})
        with s3_environment(moto.url):
            yield {"http": nginx.url + HTTP_PATH, "s3": S3_URL}


def run(tmp_path: Path, checkpoint: Path, urls: list[str], processes: int) -> list[dict]:
    outcomes = launch(
        WORKER,
        [str(tmp_path), str(checkpoint), *urls],
        processes=processes,
        devices=8 // processes,
        timeout_s=240,
    )
    for o in outcomes:
        assert o.returncode == 0, f"process {o.process} exit {o.returncode}:\n{o.output[-6000:]}"
    return [json.loads((tmp_path / f"p{i}.json").read_text()) for i in range(processes)]


TENSORS = 4
#: One request per contiguous run: what each process sent before its reads were planned (the
#: column-split `fc2.kernel` one per row, 32; the other tensors one each).
UNPLANNED_REQUESTS = 32 + 3


def own_share_only(received: dict, share: int, bound: float) -> None:
    """The bytes received are at most `bound` (the plan's `max_over_read`) times the share, plus
    the header requests (and none asked for twice: requested == received)."""
    most = bound * share + received["header_bytes"]
    assert received["bytes_received"] <= most, (received, share)
    assert received["bytes_requested"] == received["bytes_received"]


def few_requests(received: dict, share: int) -> None:
    """The requests for the tensors (the plan's: all but the one or two header requests) are at
    most the share / 8 MiB + the tensors + 10, fewer than one per contiguous run."""
    planned = received["planned_requests"]
    assert planned <= share / CHUNK_BYTES + TENSORS + 10 < UNPLANNED_REQUESTS, received
    assert 1 <= received["requests"] - planned <= 2, received
    assert received["needed_bytes"] == share


def check(reports: list[dict], url: str, checkpoint: Path, processes: int) -> None:
    size = checkpoint.stat().st_size
    for r in (report[url] for report in reports):
        bound = r["sharded"]["max_over_read"]
        assert bound == DEFAULT_MAX_OVER_READ
        own_share_only(r["sharded"], r["share"], bound)
        few_requests(r["sharded"], r["share"])
        assert r["sharded"]["concurrency"] == 4 and r["sharded"]["retries"] == 0
        # the share is this process's part: the kernels split `processes` ways, biases whole
        assert r["share"] < size / processes + 4 * (256 + 512)
        # a process that reads the whole file (the same URL loaded whole) fails the check
        assert r["whole"]["bytes_received"] >= size - 65536
        with pytest.raises(AssertionError):
            own_share_only(r["whole"], r["share"], bound)
    shares = [report[url]["share"] for report in reports]
    assert len(set(shares)) == 1  # an even split here


def test_two_processes_over_http_and_s3(servers, checkpoint, tmp_path):
    reports = run(tmp_path, checkpoint, [servers["http"], servers["s3"]], processes=2)
    for url in servers.values():
        check(reports, url, checkpoint, 2)


def test_four_processes_over_s3(servers, checkpoint, tmp_path):
    reports = run(tmp_path, checkpoint, [servers["s3"]], processes=4)
    check(reports, servers["s3"], checkpoint, 4)
