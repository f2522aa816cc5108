"""Fixtures for remote loads: real servers on 127.0.0.1 serving one small synthetic checkpoint.

`remote(kind)` gives a `Served` for `http` (Debian's nginx), `s3` (moto's standalone server, the
S3 credentials and endpoint in the environment), `hf` (the Hub-protocol server of
`bench.link.hub`, huggingface_hub pointed at it) or `gs` (fake-gcs-server, `STORAGE_EMULATOR_HOST`
pointed at it). Each serves the checkpoint as one file
(`file_url`) and as a folder of two shards with an index (`folder_url`, `index_url`). A test
that needs a fault puts a `faultproxy.FaultProxy` in front (`Served.proxy()`, then
`Served.point_at` its URL).
Servers the machine lacks (no nginx, no moto, no fake-gcs-server) skip their tests with the
install hint.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import shapes
from loader.placement.leaves import iter_variables

FILE_SPEC = shapes.ShapeSpec(
    "remote-test",
    "",
    ("model.safetensors",),
    (
        shapes.TensorSpec("big.weight", "F32", (256, 256), "model.safetensors"),  # 256 KiB
        shapes.TensorSpec("wide.weight", "F32", (3, 40000), "model.safetensors"),
        shapes.TensorSpec("vec.bias", "F32", (20000,), "model.safetensors"),
        shapes.TensorSpec("half.weight", "BF16", (64, 48), "model.safetensors"),
        shapes.TensorSpec("small.scale", "F32", (8,), "model.safetensors"),
    ),
)
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
SHARD_SPEC = shapes.ShapeSpec(
    "remote-shards",
    "",
    SHARDS,
    (
        shapes.TensorSpec("a.weight", "F32", (128, 64), SHARDS[0]),
        shapes.TensorSpec("b.bias", "F32", (64,), SHARDS[0]),
        shapes.TensorSpec("c.weight", "BF16", (96, 32), SHARDS[1]),
    ),
)
TOKEN = "hf_loadbenchREMOTEtoken0123456789"


def verify(model: object, ckpt: Path) -> int:
    """Check every leaf bit-exactly against the synthetic checkpoint; the number checked."""
    n = 0
    for path, var in iter_variables(model):
        shapes.verify_tensor(ckpt, ".".join(map(str, path)), np.asarray(var.get_value()))
        n += 1
    return n


@dataclass
class Served:
    """One server serving the checkpoints: its base URL (`endpoint`) and the URLs to load."""

    kind: str  # http | s3 | hf | gs
    endpoint: str
    replace: Callable[[bytes], None]  # give the single file new bytes (a new ETag)

    def urls(self, endpoint: str | None = None) -> dict[str, str]:
        """file / folder / index URLs; HTTP's through `endpoint` (a proxy) if given."""
        if self.kind == "http":
            base = endpoint or self.endpoint
            return {
                "file": f"{base}/one/model.safetensors",
                "folder": f"{base}/shards",
                "index": f"{base}/shards/model.safetensors.index.json",
            }
        if self.kind in ("s3", "gs"):
            return {
                "file": f"{self.kind}://loadbench/one/model.safetensors",
                "folder": f"{self.kind}://loadbench/shards/",
                "index": f"{self.kind}://loadbench/shards/model.safetensors.index.json",
            }
        return {
            "file": "hf://org/one/model.safetensors",
            "folder": "hf://org/shards",
            "index": "hf://org/shards@main/model.safetensors.index.json",
        }

    def proxy(self):  # noqa: ANN201 - faultproxy is a test helper beside this one
        """A `faultproxy.FaultProxy` in front of this server (fake-gcs-server routes by Host)."""
        from faultproxy import FaultProxy

        return FaultProxy(self.endpoint, rewrite_host=self.kind == "gs")

    def point_at(self, monkeypatch, endpoint: str, home: Path) -> None:
        """Send S3 or Hub requests to `endpoint` (the server, or a proxy in front of it)."""
        if self.kind == "s3":
            from bench.link.servers import S3_CREDENTIALS

            for k, v in {**S3_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}.items():
                monkeypatch.setenv(k, v)
        elif self.kind == "hf":
            hub_environment(monkeypatch, endpoint, home)
        elif self.kind == "gs":
            monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("remote-ckpt")
    one = shapes.synthesize(FILE_SPEC, root / "file")
    shards = shapes.synthesize(SHARD_SPEC, root / "shards")
    return one, shards


def _replace_file(path: Path) -> Callable[[bytes], None]:
    def replace(data: bytes) -> None:
        tmp = path.with_name(path.name + ".new")
        tmp.write_bytes(data)
        st = path.stat()
        os.replace(tmp, path)
        os.utime(path, (st.st_atime + 10, st.st_mtime + 10))  # nginx's ETag: mtime and size

    return replace


@pytest.fixture(scope="module")
def nginx(checkpoints, tmp_path_factory) -> Iterator[Served]:
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx is not installed (apt-get install nginx; .ci/run installs it)")
    from bench.link.servers import start_nginx

    root = tmp_path_factory.mktemp("www")
    shutil.copytree(checkpoints[0].parent, root / "one")
    shutil.copytree(checkpoints[1], root / "shards")
    with start_nginx(root) as server:
        yield Served("http", server.url, _replace_file(root / "one" / "model.safetensors"))


@pytest.fixture(scope="module")
def moto(checkpoints) -> Iterator[Served]:
    pytest.importorskip("moto", reason="moto[server] is not installed (the remote extra)")
    from bench.link.servers import BUCKET, s3_client, start_moto, upload

    with start_moto() as server:
        files = {"one/model.safetensors": checkpoints[0]}
        files |= {f"shards/{p.name}": p for p in sorted(checkpoints[1].iterdir()) if p.is_file()}
        upload(server.url, files)

        def replace(data: bytes) -> None:
            s3_client(server.url).put_object(Bucket=BUCKET, Key="one/model.safetensors", Body=data)

        yield Served("s3", server.url, replace)


def gcs_upload(endpoint: str, key: str, data: bytes, bucket: str = "loadbench") -> None:
    """Put an object on the emulator (GCS's JSON upload: a new generation)."""
    import urllib.parse
    import urllib.request

    name = urllib.parse.quote(key, safe="")
    url = f"{endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}"
    with urllib.request.urlopen(urllib.request.Request(url, data, method="POST")) as answer:
        assert answer.status == 200, answer.status


@pytest.fixture(scope="module")
def fake_gcs(checkpoints) -> Iterator[Served]:
    from bench.link.serve import FAKE_GCS_INSTALL, fake_gcs_binary, start_fake_gcs

    if fake_gcs_binary() is None:
        pytest.skip(f"fake-gcs-server is not installed ({FAKE_GCS_INSTALL})")
    objects = {"loadbench/one/model.safetensors": checkpoints[0]}
    objects |= {
        f"loadbench/shards/{p.name}": p for p in sorted(checkpoints[1].iterdir()) if p.is_file()
    }
    with start_fake_gcs(objects) as server:

        def replace(data: bytes) -> None:
            gcs_upload(server.url, "one/model.safetensors", data)

        yield Served("gs", server.url, replace)


@pytest.fixture(scope="module")
def hub(checkpoints) -> Iterator[Served]:
    from bench.link.hub import InProcessHub

    one, shards = checkpoints
    with InProcessHub() as server:
        server.add_repo("org/one", {"model.safetensors": one.read_bytes()})
        files = {p.name: p.read_bytes() for p in sorted(shards.iterdir()) if p.is_file()}
        server.add_repo("org/shards", files)
        server.add_repo("org/gated", {"model.safetensors": one.read_bytes()}, gated_token=TOKEN)

        def replace(data: bytes) -> None:
            server.server.repos["org/one"].files["model.safetensors"] = data

        yield Served("hf", server.url, replace)


def hub_environment(monkeypatch, url: str, home: Path, token: str | None = None) -> None:
    """Point huggingface_hub at `url` (no request can reach the live Hub), token or none."""
    from huggingface_hub import constants

    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
