"""Follow one tensor of a tiny load from `loader.load_model` to its device buffer, file by file.

`docs/design.md` walks one tensor through the loader; this counts that walk from a real load, so
the page and the code cannot drift apart unseen. A profiler (`sys.setprofile`, and
`threading.setprofile` for the reader threads) watches a `pipelined` load of a one-tensor
checkpoint and keeps the call stack at each of the tensor's stops:

- `plan`: its planned step is made (`Step(...)`);
- `read`: its bytes are read from the file (`os.preadv` on a reader thread);
- `put`: its buffer is handed to its device (`jax.device_put`).

Each stack is cut to the loader's own frames, outermost first, as the files it passes through
(consecutive frames in one file are one stay); a reader thread's stack is put after the stack
that started the thread. The walk takes the stops in the order they happened, each from where
the one before it left off: down from the deepest file the two stacks share, so a file is
entered again only when the walk leaves it and comes back. "files" counts the distinct files on
the walk, "entries" how often it enters each one.

    .venv/bin/python scripts/tensor_walk.py            # the default tiny load (64 x 64, f32)
    .venv/bin/python scripts/tensor_walk.py --cast     # a bf16 model from the f32 file
    .venv/bin/python scripts/tensor_walk.py --strict   # no read before the plan: a job reads it
    .venv/bin/python scripts/tensor_walk.py --staging  # through the staging ring
    .venv/bin/python scripts/tensor_walk.py --sharded  # strategy="sharded" (docs/design.md's walk)

    .venv/bin/python scripts/tensor_walk.py --remote http  # a URL: nginx on 127.0.0.1
    .venv/bin/python scripts/tensor_walk.py --remote gs    # gs://, fake-gcs-server on 127.0.0.1

With `--sharded` the read is the read-ahead's `os.preadv` and the put the first `jax.device_put`
of a host array (a region of the tensor: the sharding rule may split it over the devices).
`--check N` makes it a test: exit 1, saying why, if the walk passes more than N files, enters
one more than twice (the bound `docs/design.md` states for each walk), or, where
`docs/design.md` tells this walk (a table after a "Counted from a real load" paragraph naming
this command: `documented`), stops anywhere but where its table says, or at other stops.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOADER = str(ROOT / "loader") + os.sep
SHAPE = (64, 64)  # the one tensor's shape
DESIGN = ROOT / "docs" / "design.md"
#: What opens a walk's paragraph in `docs/design.md`; its table follows (`documented`).
COUNTED = "**Counted from a real load**"
STOPS = ("open", "read", "plan", "put")
#: Where a remote read's own files are: the walk through the checkpoint-bytes layer.
REMOTE_LAYER = ("loader/remote/", "loader/pipeline/sources/")


def _loader_files(frame: FrameType | None) -> list[str]:
    """The loader files on the stack from `frame` outwards, outermost first, runs merged."""
    files: list[str] = []
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(LOADER):
            files.append(os.path.relpath(name, ROOT))
        frame = frame.f_back
    files.reverse()
    return [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]


def _same_shape(x: object) -> bool:
    """`pipelined`'s put: the whole tensor."""
    return getattr(x, "shape", None) == SHAPE


def _host_region(x: object) -> bool:
    """`sharded`'s put: a host array holding a region of the tensor (its rows, or all of it)."""
    import numpy as np

    return isinstance(x, np.ndarray) and x.ndim == len(SHAPE)


class Walk:
    """The stacks at the tensor's stops, taken by a profile function on every thread."""

    def __init__(self, is_put: Callable[[object], bool] = _same_shape) -> None:
        self.is_put = is_put
        self.stops: dict[str, list[str]] = {}  # in the order they happened
        self.origins: dict[str, list[str]] = {}  # thread name -> the stack that started it
        self.lock = threading.Lock()

    def _keep(self, stop: str, frame: FrameType | None) -> None:
        origin = self.origins.get(threading.current_thread().name, [])
        with self.lock:
            if stop not in self.stops:
                stack = [*origin, *_loader_files(frame)]
                self.stops[stop] = [f for i, f in enumerate(stack) if i == 0 or stack[i - 1] != f]

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__name__", "") == "preadv":
            if threading.current_thread().name.startswith("loader-"):
                self._keep("read", frame)
        elif event == "call":
            code, owner = frame.f_code, frame.f_locals.get("self")
            if code.co_name == "device_put" and code.co_filename.endswith("jax/_src/api.py"):
                if self.is_put(frame.f_locals.get("x")):  # the tensor's
                    self._keep("put", frame)
            elif code.co_name == "__init__" and type(owner).__name__ in ("Step", "Store"):
                self._keep("plan" if type(owner).__name__ == "Step" else "open", frame.f_back)
            elif code.co_name == "_fill" and type(owner).__name__.endswith("Transport"):
                if threading.current_thread().name.startswith("loader-"):  # a tensor's body
                    self._keep("read", frame)
            elif code.co_name == "start" and isinstance(owner, threading.Thread):
                with self.lock:
                    self.origins.setdefault(owner.name, _loader_files(frame.f_back))

    def entries(self, within: tuple[str, ...] = ("loader/",)) -> list[str]:
        """The files the walk enters, in order (see the module docstring), counting only the
        files under `within` (`REMOTE_LAYER`: a remote read's own walk)."""
        walked: list[str] = []
        previous: list[str] = []
        for stack in self.stops.values():
            stack = [f for f in stack if f.startswith(within)]
            shared = 0
            while shared < min(len(stack), len(previous)) and stack[shared] == previous[shared]:
                shared += 1
            walked += stack[shared:]
            previous = stack
        return walked


def _checkpoint(folder: Path) -> tuple[Any, Path]:
    """A one-tensor checkpoint (a 64 x 64 f32 kernel) and the builder of its model."""
    import jax.numpy as jnp
    from flax import nnx

    import loader

    def build(dtype: Any = jnp.float32) -> nnx.Module:
        return nnx.Linear(*SHAPE, use_bias=False, param_dtype=dtype, rngs=nnx.Rngs(0))

    path = folder / "tiny.safetensors"
    loader.save_model(build(), path)
    return build, path


@contextlib.contextmanager
def _served(path: Path, remote: str | None) -> Iterator[str]:
    """`path` as loaded: itself, or its URL on a server on 127.0.0.1 (`--remote`)."""
    if remote is None:
        yield str(path)
        return
    from bench.link.serve import serving

    source = {"http": "http", "gs": "gcs"}[remote]
    with serving(str(path), source, None, "walk") as url:
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cast", action="store_true", help="load into a bf16 model")
    parser.add_argument("--strict", action="store_true", help="strict: no speculative read")
    parser.add_argument("--staging", action="store_true", help="through the staging ring")
    parser.add_argument("--sharded", action="store_true", help='strategy="sharded"')
    parser.add_argument(
        "--check",
        type=int,
        metavar="FILES",
        help="exit 1 if the walk passes more than FILES files or enters one more than twice",
    )
    parser.add_argument("--remote", choices=("http", "gs"), help="load it from a URL")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # bench.link serves `--remote`
    import jax.numpy as jnp

    import loader

    with tempfile.TemporaryDirectory() as tmp:
        build, path = _checkpoint(Path(tmp))
        served = _served(path, args.remote)
        url = served.__enter__()
        dtype = jnp.bfloat16 if args.cast else jnp.float32
        walk = Walk(_host_region if args.sharded else _same_shape)
        threading.setprofile(walk)
        sys.setprofile(walk)
        try:
            options: dict[str, Any] = {"staging": True} if args.staging else {}
            if args.sharded:
                options["strategy"] = "sharded"
            target = lambda: build(dtype)  # noqa: E731
            loader.load_model(target, url, casts="allow", strict=args.strict, **options)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
            served.__exit__(None, None, None)
    for stop, stack in walk.stops.items():
        print(f"{stop:5} {' -> '.join(stack)}")
    entries = Counter(walk.entries())
    _count("", entries)
    if args.remote:
        _count("the remote read's own ", Counter(walk.entries(REMOTE_LAYER)))
    if args.check is None:
        return 0
    told = documented().get(walk_args(argv if argv is not None else sys.argv[1:]))
    return _checked(walk, entries, args.check, told)


def _count(what: str, entries: Counter[str]) -> None:
    print(f"{what}files: {len(entries)}; most entries of one file: {max(entries.values())}")
    for name, n in sorted(entries.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n}  {name}")


def walk_args(argv: list[str]) -> tuple[str, ...]:
    """A walk's options as `docs/design.md` names it: in order, without `--check N`.

    Example:
        >>> walk_args(["--sharded", "--check", "8"])
        ('--sharded',)
    """
    args = list(argv)
    if "--check" in args:
        at = args.index("--check")
        del args[at : at + 2]
    return tuple(args)


def documented(text: str | None = None) -> dict[tuple[str, ...], dict[str, list[str]]]:
    """Every walk `docs/design.md` tells: its options (`walk_args` of the first
    `python scripts/tensor_walk.py ...` of a paragraph that opens with `COUNTED`) -> the table
    after that paragraph: each stop's files, outermost first (`loader/` left out, as the table
    writes them).

    Example:
        >>> documented(f"{COUNTED} (`python scripts/tensor_walk.py --sharded`):\n\n"
        ...            "| read | `load.py` > `x/y.py` |\n")
        {('--sharded',): {'read': ['load.py', 'x/y.py']}}
    """
    text = DESIGN.read_text(encoding="utf-8") if text is None else text
    walks: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for block in text.split(COUNTED)[1:]:
        command = re.search(r"`python scripts/tensor_walk\.py([^`]*)`", block)
        if command is None:
            continue
        table: dict[str, list[str]] = {}
        rows = block[block.index("\n|") :] if "\n|" in block else ""
        for line in rows.splitlines()[1:]:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 2 and cells[0] in STOPS:
                table[cells[0]] = [f.strip().strip("`") for f in cells[1].split(">")]
        walks[walk_args(shlex.split(command.group(1)))] = table
    return walks


def _checked(
    walk: Walk, entries: Counter[str], most_files: int, told: dict[str, list[str]] | None = None
) -> int:
    """0 if the walk reached its stops (those `told`, the walk's table in `docs/design.md`, else
    plan, read and put) within `most_files` files, none entered more than twice, and each stop
    where `told` says; else 1, after a line saying what went past."""
    wanted = list(told) if told is not None else ["plan", "read", "put"]
    wrong = [f"no {stop} stop" for stop in wanted if stop not in walk.stops]
    if told is not None:
        wrong += [
            f"a {stop} stop docs/design.md does not tell" for stop in walk.stops if stop not in told
        ]
        for stop, files in told.items():
            found = [f.removeprefix("loader/") for f in walk.stops.get(stop, [])]
            if stop in walk.stops and found != files:
                said = " > ".join(files)
                wrong.append(f"{stop}: {' > '.join(found)}, docs/design.md says {said}")
    if len(entries) > most_files:
        wrong.append(f"{len(entries)} files, more than {most_files}")
    wrong += [f"{name} entered {n} times" for name, n in entries.items() if n > 2]
    if wrong:
        print("walk check failed: " + "; ".join(wrong), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
