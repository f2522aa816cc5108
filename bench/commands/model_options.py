"""`bench run`'s options on the model loaded and its compile: `--model spec|port|port-scanned|
transposed|zoo`
(several, comma-separated, run interleaved in one run), `--compile`, `--compile-cache DIR`."""

from __future__ import annotations

import argparse

from bench.commands.common import csv
from bench.errors import BenchError
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


def check_model(args: argparse.Namespace) -> None:
    """`--model port` only on shape sets with a real architecture (`port-scanned`: with a scanned
    variant); `--compile` only of a port."""
    from shapes.architectures import port_names, scanned_port_names

    models = csv(args.model)
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise BenchError(f"--model {args.model}: expected one or more of {', '.join(MODELS)}")
    if models != [SPEC] and args.checkpoint:
        raise BenchError(f"--model {args.model} needs --shapes (a preset), not --checkpoint")
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
        "interleaved in one run",
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
