"""`shapes fetch` through huggingface_hub against the Hub-protocol server on 127.0.0.1 (never the
live Hub): `bench.link.hub`, the one the bench serves `--source hf` with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import shapes
from bench.link.hub import InProcessHub
from loader.format import encode_header
from shapes.cli import main
from shapes.hub import fetch_and_save, fetch_spec

REPO = Path(__file__).resolve().parents[2]
TOKEN = "hf_loadbenchTESTtoken0123456789"


def st(entries: dict, metadata: dict | None = None) -> bytes:
    """A valid safetensors file (zeros as data) with `entries` name -> (dtype, shape)."""
    header, offsets = encode_header(entries, metadata)
    return header + bytes(max((end for _, end in offsets.values()), default=0))


SINGLE = {"h.0.w": ("F32", (2, 3)), "h.1.w": ("BF16", (4,)), "z": ("F32", (1, 0))}
SHARD1 = {"a.w": ("F32", (3,)), "b.w": ("F16", (5,))}
SHARD2 = {"c.w": ("I64", (2, 2))}
INDEX = {
    "metadata": {"total_size": 54},
    "weight_map": {
        "a.w": "model-00001-of-00002.safetensors",
        "b.w": "model-00001-of-00002.safetensors",
        "c.w": "model-00002-of-00002.safetensors",
    },
}
BIG = {
    f"blocks.{i}.a_rather_long_parameter_name_to_grow_the_header.weight": ("F32", (1,))
    for i in range(2000)
}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    from huggingface_hub import constants

    with InProcessHub() as server:
        for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            monkeypatch.delenv(key, raising=False)
        env = {
            "HF_ENDPOINT": server.url,
            "HF_HOME": str(tmp_path / "hf"),
            "LOADBENCH_HOME": str(tmp_path / "lb"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        # huggingface_hub read HF_ENDPOINT at import: point its constants here too (and the URL
        # template built from it), so no request of any kind can leave 127.0.0.1.
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setattr(
            constants,
            "HUGGINGFACE_CO_URL_TEMPLATE",
            server.url + "/{repo_id}/resolve/{revision}/{filename}",
        )
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"))
        server.add_repo(
            "org/single", {"model.safetensors": st(SINGLE, {"format": "pt"}), "config.json": b"{}"}
        )
        server.add_repo(
            "org/sharded",
            {
                "model-00001-of-00002.safetensors": st(SHARD1),
                "model-00002-of-00002.safetensors": st(SHARD2),
                "model.safetensors.index.json": json.dumps(INDEX).encode(),
            },
        )
        server.add_repo(
            "org/other", {"weights_b.safetensors": st(SHARD2), "weights_a.safetensors": st(SHARD1)}
        )
        server.add_repo(
            "org/nested",
            {
                "transformer/diffusion_pytorch_model.safetensors": st(SHARD1),
                "text/model.safetensors": st(SHARD2),
            },
        )
        server.add_repo("org/big", {"model.safetensors": st(BIG)})
        server.add_repo("org/gated", {"model.safetensors": st(SINGLE)}, gated_token=TOKEN)
        server.add_repo("org/empty", {"README.md": b"hi"})
        bad = bytearray(st(SHARD1))
        bad[8 : 8 + len(b'{"a.w"')] = b'{"a.w"'  # keep JSON valid, then break an offset
        server.add_repo("org/bad", {"model.safetensors": bytes(bad).replace(b"[0,12]", b"[0,16]")})
        yield server


def _names(spec):
    return [(t.name, t.dtype, t.shape, t.file) for t in spec.tensors]


def test_single_file_repo_pins_revision_and_saves(hub, tmp_path):
    path, spec = fetch_and_save("org/single")
    assert path == tmp_path / "lb" / "shapes" / "org--single.json"
    assert _names(spec) == [(n, d, s, "model.safetensors") for n, (d, s) in SINGLE.items()]
    assert spec.revision == hub.server.repos["org/single"].sha and spec.metadata == {"format": "pt"}
    assert shapes.load_spec("org--single") == spec == shapes.load_spec("org/single")
    assert all(
        path_.startswith(("/api/models/org/single", f"/org/single/resolve/{spec.revision}/"))
        for method, path_, _ in hub.requests
        if "org/single" in path_
    )


def test_sharded_repo_reads_index_then_each_shard(hub):
    spec = fetch_spec("org/sharded", revision="main")
    assert spec.files == ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    assert [t.file for t in spec.tensors] == [spec.files[0], spec.files[0], spec.files[1]]
    assert spec.total_bytes == INDEX["metadata"]["total_size"]


def test_other_names_and_subfolders(hub):
    assert fetch_spec("org/other").files == ("weights_a.safetensors", "weights_b.safetensors")
    nested = fetch_spec("org/nested")
    assert nested.files == (
        "text/model.safetensors",
        "transformer/diffusion_pytorch_model.safetensors",
    )
    only = fetch_spec("org/nested", include="transformer/*")
    assert (
        only.files == ("transformer/diffusion_pytorch_model.safetensors",)
        and len(only.tensors) == 2
    )


def test_header_over_100kb(hub):
    header_len = int.from_bytes(
        hub.server.repos["org/big"].files["model.safetensors"][:8], "little"
    )
    assert header_len > 100_000
    spec = fetch_spec("org/big")
    assert len(spec.tensors) == len(BIG)
    ranges = [
        p
        for m, p, _ in hub.requests
        if p.endswith("org/big/resolve/" + spec.revision + "/model.safetensors")
    ]
    assert len(ranges) == 2  # the first 100 kB, then the whole header


@pytest.mark.parametrize(
    "repo, revision, fragment",
    [
        ("org/gated", None, "gated"),
        ("org/missing", None, "repository not found"),
        ("org/single", "no-such-branch", "revision 'no-such-branch' not found"),
        ("org/empty", None, "no \\*.safetensors weights"),
        ("org/bad", None, "header rejected"),
    ],
)
def test_clear_errors(hub, repo, revision, fragment):
    with pytest.raises(shapes.FetchError, match=fragment):
        fetch_spec(repo, revision=revision)


def test_gated_wrong_token_is_403_and_right_token_works_without_leaking(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(shapes.FetchError, match="gated \\(HTTP 403\\)"):
        fetch_spec("org/gated")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    path, spec = fetch_and_save("org/gated", name="gated")
    assert len(spec.tensors) == 3 and shapes.load_spec("gated") == spec
    assert (
        "GET",
        f"/org/gated/resolve/{spec.revision}/model.safetensors",
        f"Bearer {TOKEN}",
    ) in hub.requests
    for file in (tmp_path / "lb").rglob("*"):
        assert not file.is_file() or TOKEN not in file.read_text(errors="replace")


def test_offline_mode(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(shapes.FetchError, match="offline mode"):
        fetch_spec("org/single")
    assert not hub.requests


def test_preset_name_is_refused(hub):
    with pytest.raises(shapes.FetchError, match="shipped preset"):
        fetch_and_save("org/single", name="sa3")


def test_cli_in_process_errors_are_one_line(hub, capsys):
    assert main(["shapes", "fetch", "org/missing"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "repository not found" in err


def test_cli_subprocess_fetch_then_show(hub, tmp_path):
    env = {**os.environ}
    out = tmp_path / "spec.json"
    cmd = [sys.executable, "-m", "shapes.cli", "shapes"]
    run = dict(cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    proc = subprocess.run([*cmd, "fetch", "org/sharded", "--name", "sh"], **run)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([*cmd, "show", "sh", "--json"], **run)
    assert json.loads(proc.stdout)["files"] == 2
    proc = subprocess.run([*cmd, "fetch", "org/single", "--out", str(out)], **run)
    assert proc.returncode == 0 and shapes.load_spec(out).source == "org/single"
