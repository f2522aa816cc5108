"""`bench run`'s options on the model loaded and its compile: `--model spec|port|port-scanned|
transposed|zoo|MODULE:FACTORY` (several, comma-separated, run interleaved in one run), `--key-map
MODULE:NAME` (a factory's key map, as `loadbench plan` takes them: `bench.user_model`),
`--compile`, `--compile-cache DIR`. A factory is planned against each `--checkpoint` before
anything is measured (`loadbench plan`, in a child: this process imports no jax), and a load a
strict load would refuse is refused here, its problems named."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from bench.commands.common import csv
from bench.errors import BenchError
from bench.user_model import check, is_named, problems_text
from bench.vocabulary import MODELS, PORT, PORT_SCANNED, PORTS, SPEC, ZOO


def _check_zoo(shapes: str | None) -> None:
    """`--model zoo` needs google-tunix (`make zoo`) and a llama-shaped preset."""
    import importlib.util

    from bench.child.zoo import ZOO_PRESETS

    if importlib.util.find_spec("tunix") is None:
        raise BenchError("--model zoo loads tunix's own Llama3: install google-tunix (`make zoo`)")
    lacking = [s for s in csv(shapes or "") if s not in ZOO_PRESETS]
    if lacking:
        raise BenchError(
            f"--model zoo: shape set(s) {', '.join(lacking)} have no tunix model here; "
            f"those that have one: {', '.join(ZOO_PRESETS)}"
        )


def _check_named(models: list[str], key_map: str | None) -> None:
    """Each `MODULE:NAME` model's form and module (not run here: the children import it), and
    `--key-map` only beside one such model."""
    named = [m for m in models if is_named(m)]
    for model in named:
        check(model, "--model")
    if key_map is None:
        return
    if len(named) != 1:
        raise BenchError(
            f"--key-map {key_map} maps the file's keys to your own model's paths: give one "
            "--model MODULE:NAME beside it (a port brings its own key map)"
        )
    check(key_map, "--key-map")


#: How long planning a factory against a checkpoint may take (jax's import, the abstract build).
PLAN_TIMEOUT_S = 300


def _planned(model: str, key_map: str | None, checkpoint: str) -> None:
    """`loadbench plan CHECKPOINT --model MODEL [--key-map KEY_MAP]` in a child; `BenchError`
    naming the first problems where a strict load would fail, or the child's own error."""
    from bench.run.user_checkpoint import open_checkpoint

    mapped = ["--key-map", key_map] if key_map else []
    path = str(open_checkpoint(checkpoint).load_path)  # a file or a folder (an index's)
    argv = [sys.executable, "-m", "bench.cli", "plan", path, "--model", model, *mapped]
    proc = subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, timeout=PLAN_TIMEOUT_S, check=False
    )
    if proc.returncode == 0:
        return
    asked = " ".join(["--model", model, *mapped])
    if proc.returncode == 1:
        shown = problems_text(json.loads(proc.stdout)["problems"])
        raise BenchError(
            f"{asked}: a load of {checkpoint} would not fill the model: {shown}; `loadbench plan "
            f"{path} {asked}` shows every path and key"
        )
    said = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    raise BenchError(said.removeprefix("loadbench: error: "))


def check_model(args: argparse.Namespace) -> None:
    """`--model port` only on shape sets with a real architecture (`port-scanned`: with a scanned
    variant); `--compile` only of a port; your own model (`MODULE:NAME`) found, and planned
    against each `--checkpoint` (module docstring)."""
    from shapes.architectures import port_names, scanned_port_names

    models = csv(args.model)
    unknown = [m for m in models if m not in MODELS and not is_named(m)]
    if unknown or not models:
        raise BenchError(
            f"--model {args.model}: expected one or more of {', '.join(MODELS)}, or your own "
            "model's factory as MODULE:NAME (e.g. mypkg.models:build)"
        )
    _check_named(models, args.key_map)
    presets = [m for m in models if m != SPEC and not is_named(m)]
    if presets and args.checkpoint:
        raise BenchError(
            f"--model {','.join(presets)} needs --shapes (a preset), not --checkpoint; your own "
            "model loads --checkpoint as --model MODULE:NAME"
        )
    for model, names, what in (
        (PORT, port_names(), "real architecture"),
        (PORT_SCANNED, scanned_port_names(), "scanned-layer architecture"),
    ):
        lacking = [s for s in csv(args.shapes or "") if s not in names]
        if model in models and lacking:
            raise BenchError(
                f"--model {model}: shape set(s) {', '.join(lacking)} have no {what}; "
                f"those that have one: {', '.join(names)}"
            )
    if ZOO in models:
        _check_zoo(args.shapes)
    if args.compile and not set(PORTS) & set(models):
        raise BenchError("--compile compiles a real forward: add --model port")
    if args.compile_cache and not args.compile:
        raise BenchError("--compile-cache is the compile's cache: add --compile (and --model port)")
    for model in filter(is_named, models):
        for checkpoint in args.checkpoint or []:
            _planned(model, args.key_map, checkpoint)


def add_model_options(p: argparse.ArgumentParser) -> None:
    """`bench run`'s options on the model loaded and whether its forward is compiled."""
    p.add_argument(
        "--model",
        default=SPEC,
        help="spec: the file's own layout (default); port: the preset's real architecture "
        "through its key map; port-scanned: its scanned-layer variant (layers stacked into one "
        "leaf per parameter, through loader.Stack); transposed: every 2-D tensor transposed "
        "(loader.Transpose); zoo: tunix's own Llama3 class through a key map built from "
        "tunix's mapping (llama3-8b, tinyllama-1.1b; `make zoo`); several (spec,port) run "
        "interleaved in one run; MODULE:NAME: your own model, a zero-argument factory of an "
        "NNX module (as `loadbench plan --model` takes it), imported by each child from the "
        "folder you run in",
    )
    p.add_argument(
        "--key-map",
        metavar="MODULE:NAME",
        help="your own model's key map (model path -> file key, or (file key, transform)), as "
        "`loadbench plan --key-map` takes it; with --model MODULE:NAME",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="also lower and compile the port's forward (batch 1 x 128 tokens; ViT 1x224x224x3): "
        "phase compile, ready_s",
    )
    p.add_argument(
        "--compile-cache",
        help="JAX's persistent compilation cache folder (one per strategy in it): a cold first "
        "start and warm later starts, reported apart",
    )
