"""`bench run`'s options on the model loaded and its compile: `--model spec|port|transposed`
(several, comma-separated, run interleaved in one run), `--compile`, `--compile-cache DIR`."""

from __future__ import annotations

import argparse

from bench.commands.common import csv
from bench.errors import BenchError
from bench.vocabulary import MODELS, PORT, SPEC


def check_model(args: argparse.Namespace) -> None:
    """`--model port` only on shape sets with a real architecture; `--compile` only of a port."""
    from shapes.architectures import port_names

    models = csv(args.model)
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise BenchError(f"--model {args.model}: expected one or more of {', '.join(MODELS)}")
    if models != [SPEC] and args.checkpoint:
        raise BenchError(f"--model {args.model} needs --shapes (a preset), not --checkpoint")
    no_port = [s for s in csv(args.shapes or "") if s not in port_names()]
    if PORT in models and no_port:
        raise BenchError(
            f"--model port: shape set(s) {', '.join(no_port)} have no real architecture; "
            f"those that have one: {', '.join(port_names())}"
        )
    if args.compile and PORT not in models:
        raise BenchError("--compile compiles a real forward: add --model port")
    if args.compile_cache and not args.compile:
        raise BenchError("--compile-cache is the compile's cache: add --compile (and --model port)")


def add_model_options(p: argparse.ArgumentParser) -> None:
    """`bench run`'s options on the model loaded and whether its forward is compiled."""
    p.add_argument(
        "--model",
        default=SPEC,
        help="spec: the file's own layout (default); port: the preset's real architecture "
        "through its key map; transposed: every 2-D tensor transposed (loader.Transpose); "
        "several (spec,port) run interleaved in one run",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="also lower and compile the port's forward (batch 1 x 128 tokens; ViT 1x224x224x3): "
        "phase compile, ready_s",
    )
    p.add_argument("--compile-cache", help="JAX's persistent compilation cache folder")
