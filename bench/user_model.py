"""A model of the user's own, named `MODULE:NAME`: `loadbench plan --model`, `bench run --model`,
and their `--key-map`.

`MODULE` is imported as `python -m` would: the working directory comes first on the import path,
so `--model mpnet:build` finds `./mpnet.py`. `bench run` checks the name's form and that the
module is there (`check`) without running it, then hands the name to each child, which imports
it (`resolve`, `builder`): a child starts in the directory the user ran from, so it finds the
module where the parent did. The name is the model's label in every row.
Parent and child side: imports no jax (the user's module may).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

from bench.errors import BenchError

#: The problems of a load into the model that a message names (the rest counted).
SHOWN_PROBLEMS = 3


def is_named(model: str) -> bool:
    """Whether `model` names a user's object (`MODULE:NAME`) rather than a preset model.

    Example:
        >>> is_named("mypkg.models:build"), is_named("port")
        (True, False)
    """
    return ":" in model


def problems_text(problems: list[str]) -> str:
    """The first problems of a load into the model (`loader.LoadReport.problems`), the rest
    counted: what a refusal and a `wrong` row say.

    Example:
        >>> problems_text(["a: missing", "b: missing", "c: missing", "d: missing"])
        'a: missing; b: missing; c: missing; and 1 more'
    """
    more = len(problems) - SHOWN_PROBLEMS
    return "; ".join(problems[:SHOWN_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")


def _parts(spec: str, option: str) -> tuple[str, str]:
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise BenchError(f"{option} {spec!r}: expected MODULE:NAME, e.g. mypkg.models:build")
    return module_name, name


def _here_on_path() -> None:
    """Put the working directory on the import path, as `python -m` does (a console script's
    path lacks it)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def check(spec: str, option: str) -> None:
    """`spec`'s form, and that its module can be found, without running the module (the parent
    of a bench run imports no jax; the user's module may).

    Example:
        >>> check("mypkg.models:build", "--model")
    """
    module_name, _ = _parts(spec, option)
    _here_on_path()
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as exc:
        found, why = None, f" ({type(exc).__name__}: {exc})"
    else:
        why = ""
    if found is None:
        raise BenchError(
            f"{option} {spec}: no module {module_name!r} on the import path{why}; run from the "
            "folder that holds it, or install its package"
        )


def resolve(spec: str, option: str) -> Any:
    """The object `MODULE:NAME` names; `BenchError` naming `option`, `spec` and what failed.

    Example:
        >>> KEY_MAP = resolve("mypkg.models:KEY_MAP", "--key-map")
    """
    module_name, name = _parts(spec, option)
    _here_on_path()
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's module's
        raise BenchError(
            f"{option} {spec}: cannot import {module_name!r} ({type(exc).__name__}: {exc})"
        ) from None
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise BenchError(f"{option} {spec}: {module_name!r} has no attribute {name!r}")
        obj = getattr(obj, part)
    return obj


def builder(spec: str) -> Callable[[], Any]:
    """The zero-argument model factory `spec` names, whose failure names it.

    Example:
        >>> build = builder("mypkg.models:build")
        >>> model = build()
    """
    factory = resolve(spec, "--model")
    if not callable(factory):
        raise BenchError(f"--model {spec}: {type(factory).__name__} is not callable")

    def build() -> Any:
        try:
            return factory()
        except Exception as exc:  # noqa: BLE001 - the user's factory failed: say which and why
            raise BenchError(
                f"--model {spec}: the factory raised {type(exc).__name__}: {exc}"
            ) from None

    return build
