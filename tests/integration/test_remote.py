"""Remote loads (`https://`, `s3://`, `hf://`, `gs://`) against real servers on 127.0.0.1.

nginx, moto's S3 server, the Hub-protocol server and fake-gcs-server serve one synthetic
checkpoint as a file and as two shards with an index; every load fills a poisoned model and is
checked bit-exactly, so a loader that reads nothing (or the wrong bytes) fails. Faults come
through `tests/faultproxy.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import loader
import shapes
from loader.errors import RemoteChangedError, RemoteError
from loader.strategies import StrategyError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from faultproxy import Fault, FaultProxy  # noqa: E402
from remote_servers import FILE_SPEC, SHARD_SPEC, TOKEN, hub_environment, verify  # noqa: E402

pytestmark = pytest.mark.timeout(60)
KINDS = ("http", "s3", "hf", "gs")
FILE_SPEC_BYTES = sum(t.nbytes for t in FILE_SPEC.tensors)
FIXTURE = {"http": "nginx", "s3": "moto", "hf": "hub", "gs": "fake_gcs"}


@pytest.fixture(params=KINDS)
def served(request, monkeypatch, tmp_path):
    s = request.getfixturevalue(FIXTURE[request.param])
    s.point_at(monkeypatch, s.endpoint, tmp_path / "hf")
    return s


def poisoned(spec, poison, dtype=None):
    model = shapes.model_builder(spec, dtype=dtype)()
    poison(model)
    return model


@pytest.mark.parametrize("strategy", ["pipelined", "hostcast", "sharded"])
def test_file_folder_and_index_load_exactly(served, checkpoints, poison, strategy):
    one, shards = checkpoints
    urls = served.urls()
    model, report = loader.load_model(
        poisoned(FILE_SPEC, poison), urls["file"], strategy=strategy, strict=True, concurrency=4
    )
    assert verify(model, one) == len(FILE_SPEC.tensors)
    stats = report.remote
    assert stats is not None and stats.concurrency == 4 and stats.requests >= 2
    assert stats.bytes_received == stats.bytes_requested >= one.stat().st_size - 65536
    for form in ("folder", "index"):
        model, report = loader.load_model(
            poisoned(SHARD_SPEC, poison), urls[form], strategy=strategy, strict=True
        )
        assert verify(model, shards) == len(SHARD_SPEC.tensors), form
        assert report.remote is not None and report.remote.concurrency == 16


def test_sharded_reads_a_process_neighbouring_ranges_as_one_box(nginx, checkpoints):
    """One process holding all 8 devices of every split axis (a plain builder: the sharding rule)
    reads each tensor's ranges as the one box they tile: one range request per contiguous run of
    it (here one per tensor), not one per device and row (`wide.weight` (3, 40000), split on its
    columns, took 24), and the same bytes."""
    one, _ = checkpoints
    builder = shapes.model_builder(FILE_SPEC)
    model, report = loader.load_model(
        builder, nginx.urls()["file"], strategy="sharded", strict=True, concurrency=1
    )
    assert verify(model, one) == len(FILE_SPEC.tensors)
    assert len(model.wide.weight.get_value().sharding.device_set) == 8  # split, not replicated
    stats = report.remote
    assert stats is not None and report.share_bytes == FILE_SPEC_BYTES
    assert stats.bytes_received == report.share_bytes + stats.header_bytes
    header_requests = 2  # the first 64 KiB, then the rest of a longer header if any
    assert stats.requests <= len(FILE_SPEC.tensors) + header_requests


def test_cast_and_small_budget_chunks_every_tensor(nginx, checkpoints, poison):
    """bf16 model from an f32 file, 256 KiB budget: many small requests, all checked."""
    one, _ = checkpoints
    model, report = loader.load_model(
        poisoned(FILE_SPEC, poison, "bfloat16"),
        nginx.urls()["file"],
        budget=256 << 10,
        concurrency=2,
    )
    assert verify(model, one) == len(FILE_SPEC.tensors)
    assert report.remote.requests > 8 and report.inflight_peak_bytes <= 256 << 10


def test_download_then_load_reference(served, checkpoints, poison, tmp_path, monkeypatch):
    """`download`: the file fetched whole (its own phase), loaded, the folder removed."""
    phases: list[str] = []

    class Probe:
        def phase(self, name):
            import contextlib

            phases.append(name)
            return contextlib.nullcontext()

        def add_time(self, substep, seconds):
            pass

    monkeypatch.setenv("LOADBENCH_DOWNLOAD_DIR", str(tmp_path))
    model, report = loader.strategies.get("download").load(
        poisoned(FILE_SPEC, poison), served.urls()["file"], Probe(), strict=True
    )
    assert verify(model, checkpoints[0]) == len(FILE_SPEC.tensors)
    assert phases[0] == "download" and report.remote.bytes_received >= FILE_SPEC_BYTES
    assert not list(tmp_path.iterdir())  # the downloaded copy is gone


def test_other_strategies_refuse_a_url_naming_those_that_take_one(nginx):
    with pytest.raises(StrategyError, match=r"'eager' reads local files only.*hostcast, pipelined"):
        loader.load_model(lambda: None, nginx.urls()["file"], strategy="eager")


def test_remote_options_refused_for_a_local_path(checkpoints):
    with pytest.raises(loader.CheckpointError, match="concurrency= applies to a remote"):
        loader.load_model(lambda: None, checkpoints[0], concurrency=4)


# -- bad input: one line naming the URL and what to do ---------------------------------------------
def test_missing_file_bucket_key_and_repo(nginx, moto, hub, monkeypatch, tmp_path):
    cases = [(f"{nginx.endpoint}/nope/model.safetensors", "not found; check the URL")]
    with pytest.raises(RemoteError) as e:
        loader.load_model(lambda: None, cases[0][0])
    assert str(e.value).startswith(cases[0][0]) and "\n" not in str(e.value)
    moto.point_at(monkeypatch, moto.endpoint, tmp_path)
    for url, what in [
        ("s3://loadbench/nokey.safetensors", "not found"),
        ("s3://nobucket/model.safetensors", "no such bucket 'nobucket'"),
    ]:
        with pytest.raises(RemoteError, match=what) as e:
            loader.load_model(lambda: None, url)
        assert str(e.value).startswith(url) and "\n" not in str(e.value)
    hub.point_at(monkeypatch, hub.endpoint, tmp_path)
    with pytest.raises(RemoteError, match=r"^hf://org/none: repo not found"):
        loader.load_model(lambda: None, "hf://org/none")
    with pytest.raises(RemoteError, match=r"^hf://org/one@v9: no revision 'v9'"):
        loader.load_model(lambda: None, "hf://org/one@v9")


def test_missing_gs_object_bucket_and_folder(fake_gcs, monkeypatch, tmp_path):
    fake_gcs.point_at(monkeypatch, fake_gcs.endpoint, tmp_path)
    for url, what in [
        ("gs://loadbench/nokey.safetensors", "not found; check the URL"),
        ("gs://nobucket/model.safetensors", "not found; check the URL"),
        ("gs://loadbench/empty/", "no \\*.safetensors file"),  # listed: nothing there
    ]:
        with pytest.raises(RemoteError, match=what) as e:
            loader.load_model(lambda: None, url)
        assert str(e.value).startswith(url.rstrip("/")) and "\n" not in str(e.value)


@pytest.mark.parametrize("token", [None, "hf_wrongTOKEN0123456789"])
def test_gated_repo_without_or_with_a_wrong_token(hub, monkeypatch, tmp_path, capfd, token):
    hub_environment(monkeypatch, hub.endpoint, tmp_path, token)
    with pytest.raises(RemoteError) as e:
        loader.load_model(lambda: None, "hf://org/gated")
    message = str(e.value)
    assert message.startswith("hf://org/gated: gated repo") and "\n" not in message
    assert ("HF_TOKEN" in message) == (token is None)
    out = capfd.readouterr()
    assert token is None or token not in message + out.out + out.err


def test_token_reaches_the_server_and_no_output(hub, checkpoints, monkeypatch, tmp_path, capfd):
    import logging

    hub_environment(monkeypatch, hub.endpoint, tmp_path, TOKEN)
    logging.getLogger().setLevel(logging.DEBUG)
    try:
        model, report = loader.load_model(
            shapes.model_builder(FILE_SPEC), "hf://org/gated", strict=True
        )
    finally:
        logging.getLogger().setLevel(logging.WARNING)
    assert verify(model, checkpoints[0]) == len(FILE_SPEC.tensors)
    out = capfd.readouterr()
    assert TOKEN not in out.out + out.err + repr(report) + str(report.remote)


# -- faults through a proxy in front of the real servers -------------------------------------------
def _through_proxy(served, monkeypatch, tmp_path):
    proxy = served.proxy()
    served.point_at(monkeypatch, proxy.url, tmp_path / "hf")
    return proxy


@pytest.mark.parametrize("kind", ["truncate", "status500", "reset"])
def test_a_failing_range_is_retried_then_named(served, monkeypatch, tmp_path, kind):
    with _through_proxy(served, monkeypatch, tmp_path) as proxy:
        proxy.fault = Fault(kind, nth=3)
        url = served.urls(proxy.url)["file"]
        with pytest.raises(RemoteError) as e:
            loader.load_model(shapes.model_builder(FILE_SPEC), url, budget=256 << 10, concurrency=2)
    message = str(e.value)
    assert message.startswith(url) and "\n" not in message
    assert "tensor" in message and "bytes " in message and "after 4 attempts" in message
    assert proxy.fault.hits == 4  # the first try and three retries, no more


@pytest.mark.parametrize("kind", ["truncate", "status500", "reset"])
def test_a_transient_fault_is_outlived(served, checkpoints, monkeypatch, tmp_path, poison, kind):
    with _through_proxy(served, monkeypatch, tmp_path) as proxy:
        proxy.fault = Fault(kind, nth=3, times=1)
        model, report = loader.load_model(
            poisoned(FILE_SPEC, poison),
            served.urls(proxy.url)["file"],
            budget=256 << 10,
            concurrency=2,
        )
    assert verify(model, checkpoints[0]) == len(FILE_SPEC.tensors)
    assert report.remote.retries == 1 and proxy.fault.hits == 1


@pytest.mark.parametrize("kind", ["status500", "reset"])
def test_sharded_ranges_are_checked_and_retried(
    nginx, checkpoints, monkeypatch, tmp_path, poison, kind
):
    """The `sharded` strategy's range requests go through the same checks: a transient fault
    is outlived, a lasting one named, an object replaced during the load refused."""
    builder = shapes.model_builder(FILE_SPEC)
    with _through_proxy(nginx, monkeypatch, tmp_path) as proxy:
        proxy.fault = Fault(kind, nth=3, times=1)
        model, report = loader.load_model(
            poisoned(FILE_SPEC, poison), nginx.urls(proxy.url)["file"], strategy="sharded"
        )
        assert verify(model, checkpoints[0]) == len(FILE_SPEC.tensors)
        assert report.remote.retries == 1 and proxy.fault.hits == 1
    with _through_proxy(nginx, monkeypatch, tmp_path) as proxy:
        proxy.fault = Fault(kind, nth=3)
        with pytest.raises(RemoteError, match=r"tensor '.*', bytes \d+-\d+: failed after 4"):
            loader.load_model(builder, nginx.urls(proxy.url)["file"], strategy="sharded")
    original = checkpoints[0].read_bytes()
    with _through_proxy(nginx, monkeypatch, tmp_path) as proxy:
        proxy.on_range = lambda n: nginx.replace(original[:-4] + b"1234") if n == 3 else None
        try:
            with pytest.raises(RemoteChangedError, match="changed during the load"):
                loader.load_model(builder, nginx.urls(proxy.url)["file"], strategy="sharded")
        finally:
            nginx.replace(original)


def test_a_trickling_server_fails_within_the_idle_timeout_on_every_scheme(
    served, monkeypatch, tmp_path
):
    """A body that keeps coming a byte at a time never lets the idle timeout fire: the minimum
    rate (on by default) fails it once a whole idle timeout brought less, not retried, saying so."""
    with _through_proxy(served, monkeypatch, tmp_path) as proxy:
        # the first tensor range (every load requests one; a third range GET need not exist)
        proxy.fault = Fault("trickle", nth=2)  # a byte every half second
        url = served.urls(proxy.url)["file"]
        began = time.monotonic()
        with pytest.raises(RemoteError) as e:
            loader.load_model(shapes.model_builder(FILE_SPEC), url, idle_timeout=2)
        took = time.monotonic() - began
    message = str(e.value)
    assert took < 2 + 10, took
    assert message.startswith(url) and "\n" not in message
    assert "too slow" in message and "bytes/s" in message and "bytes " in message
    assert proxy.fault.hits == 1  # a trickle is not retried


def test_server_dying_mid_load(checkpoints, tmp_path):
    from bench.link.servers import start_nginx

    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "model.safetensors").write_bytes(checkpoints[0].read_bytes())
    with start_nginx(tmp_path / "www") as server, FaultProxy(server.url) as proxy:
        proxy.on_range = lambda n: server.kill() if n == 3 else None
        with pytest.raises(RemoteError, match="after 4 attempts.*check that the server is up"):
            loader.load_model(
                shapes.model_builder(FILE_SPEC),
                f"{proxy.url}/model.safetensors",
                budget=256 << 10,
                concurrency=2,
            )


def test_an_object_replaced_during_the_load_is_refused(served, checkpoints, monkeypatch, tmp_path):
    original = checkpoints[0].read_bytes()
    changed = original[:-4] + b"\x01\x02\x03\x04"
    with _through_proxy(served, monkeypatch, tmp_path) as proxy:
        proxy.on_range = lambda n: served.replace(changed) if n == 3 else None
        try:
            with pytest.raises(RemoteChangedError, match="changed during the load"):
                loader.load_model(
                    shapes.model_builder(FILE_SPEC),
                    served.urls(proxy.url)["file"],
                    budget=256 << 10,
                    concurrency=2,
                )
        finally:
            served.replace(original)


def test_no_file_written_without_cache_dir_and_cache_dir_reused(nginx, checkpoints, tmp_path):
    """The load runs under strace: no open for writing, no rename, no mkdir anywhere."""
    import shutil

    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (apt-get install strace; .ci/run installs it)")
    url = nginx.urls()["file"]
    script = (
        textwrap.dedent(f"""
        import loader, shapes
        sys_spec = shapes.ShapeSpec("t", "", ("model.safetensors",), {FILE_SPEC.tensors!r})
        model, report = loader.load_model(shapes.model_builder(sys_spec), {url!r})
        print("loaded", len(report.loaded))
    """)
        .replace("shapes.ShapeSpec", "shapes.ShapeSpec")
        .replace("TensorSpec(", "shapes.TensorSpec(")
    )
    trace = tmp_path / "trace"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(Path.cwd())}
    run = subprocess.run(
        [
            "strace",
            "-f",
            "-qq",
            "-o",
            str(trace),
            "-e",
            "trace=openat,creat,rename,renameat2,mkdir,mkdirat,unlinkat",
            sys.executable,
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert run.returncode == 0 and "loaded 5" in run.stdout, run.stderr[-2000:]
    writes = [
        line
        for line in trace.read_text().splitlines()
        if (
            "O_WRONLY" in line
            or "O_RDWR" in line
            or "O_CREAT" in line
            or "rename" in line
            or "mkdir" in line
            or "unlink" in line
        )
        and "/dev/" not in line
        and "/proc/" not in line
        and "= -1" not in line
    ]
    assert not writes, writes[:10]
    cache = tmp_path / "cache"
    model, _ = loader.load_model(shapes.model_builder(FILE_SPEC), url, cache_dir=cache)
    assert verify(model, checkpoints[0]) == len(FILE_SPEC.tensors)
    (copy,) = cache.glob("*/model.safetensors")
    assert copy.read_bytes() == checkpoints[0].read_bytes()
    mtime = copy.stat().st_mtime_ns
    loader.load_model(shapes.model_builder(FILE_SPEC), url, cache_dir=cache)
    assert copy.stat().st_mtime_ns == mtime  # reused, not fetched again


def test_runai_s3_peer_reads_the_same_object(moto, checkpoints, poison, monkeypatch, tmp_path):
    """runai-model-streamer's own S3 client over moto: the peer the remote loads are beside."""
    info = loader.strategies.get("runai-s3")
    if not info.available():
        pytest.skip(f"runai-s3 needs {', '.join(info.missing())} (make peers)")
    moto.point_at(monkeypatch, moto.endpoint, tmp_path)
    monkeypatch.setenv("RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING", "0")
    model, report = info.load(poisoned(FILE_SPEC, poison), moto.urls()["file"], strict=True)
    assert verify(model, checkpoints[0]) == len(FILE_SPEC.tensors)
    assert report.remote is not None and report.remote.requests <= 2  # headers only: runai read
