"""The strategy registry: one record (`StrategyInfo`), read with `ast`, extras by dotted name.

A throwaway strategy package is written to a temp folder on `sys.path`; the registry must find
it by name, read its constants without importing it, and refuse duplicates and malformed modules.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

import loader
from loader import strategies
from loader.sequence import UNIVERSAL, LoadArgs
from loader.vocabulary import PEER, REFERENCE, STRATEGY

GOOD = '''
"""Throwaway: fills nothing, returns what it was given."""
from loader.vocabulary import PEER
KIND = PEER
REQUIRES = ("json", "no_such_module_xyz")
INSTALL_HINT = "pip install xyz"
OPTIONS = ("reading.budget",)
def load(request):
    return request.target, (request.args, request.options.given())
'''


@pytest.fixture
def extra_pkg(tmp_path, monkeypatch):
    """A package `tmp_strats` on sys.path; returns a writer of modules in it."""
    pkg = tmp_path / "tmp_strats"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.split(".")[0] == "tmp_strats"]:
        monkeypatch.delitem(sys.modules, name)  # a previous test's package, in another tmp_path

    def write(name: str, text: str) -> str:
        (pkg / f"{name}.py").write_text(textwrap.dedent(text))
        return f"tmp_strats.{name}"

    return write


def test_builtins_have_kinds_from_the_vocabulary():
    found = strategies.catalog()
    assert found["floor"].kind == REFERENCE
    assert found["hostcast"].kind == STRATEGY
    assert found["orbax"].checkpoint == "orbax" and found["sharded-dir"].checkpoint == "sharded-dir"
    assert found["sharded"].multiprocess and not found["zerocopy"].multiprocess
    assert all(info.available() for info in found.values() if info.kind != PEER)
    assert found["runai"].kind == PEER and "torch" in found["runai"].requires


def test_an_extra_module_is_read_without_import(extra_pkg):
    module = extra_pkg("my_fast_load", GOOD + "\nraise RuntimeError('imported')\n")
    info = strategies.catalog([module])["my-fast-load"]
    assert (info.kind, info.module, info.install_hint) == (PEER, module, "pip install xyz")
    assert info.requires == ("json", "no_such_module_xyz")
    assert info.description == "Throwaway: fills nothing, returns what it was given."
    assert "tmp_strats.my_fast_load" not in sys.modules
    assert not info.available()
    with pytest.raises(strategies.StrategyError, match=r"no_such_module_xyz.*pip install xyz"):
        info.load(object(), "x")


def test_a_description_wrapped_over_lines_is_read_whole(extra_pkg):
    wrapped = GOOD.replace(
        '"""Throwaway: fills nothing, returns what it was given."""',
        '"""Throwaway: fills nothing,\n  returns what it was given.\n\nDetails, not described."""',
    )
    info = strategies.catalog([extra_pkg("wrapped", wrapped)])["wrapped"]
    assert info.description == "Throwaway: fills nothing, returns what it was given."


def test_load_imports_lazily_and_passes_options(extra_pkg):
    module = extra_pkg("echo", GOOD.replace(', "no_such_module_xyz"', ","))
    info = strategies.get("echo", [module])
    target = object()
    assert info.options == ("budget",)
    assert info.load(target, "p", budget=5) == (target, (LoadArgs(), {"budget": 5}))
    assert info.load(target, "p", budget=None) == (target, (LoadArgs(), {}))  # None: not given
    assert info.prepare() is None


def test_every_strategy_gets_the_universal_arguments_with_no_code_of_its_own(extra_pkg):
    """`strict`, `key_map`, `on_built` (`LoadArgs`' fields) reach a strategy that declares none
    of them: a keyword added there needs nothing in any strategy."""
    info = strategies.get("echo", [extra_pkg("echo", GOOD.replace(', "no_such_module_xyz"', ","))])
    given = {name: object() for name in UNIVERSAL}
    _, (args, options) = info.load(object(), "p", **given)
    assert {name: getattr(args, name) for name in UNIVERSAL} == given and options == {}


def test_an_option_the_strategy_does_not_take_is_refused_in_one_line_naming_it(tmp_path):
    """`budget` to hostcast (issue 35): refused before anything is read, naming the option, the
    strategy and the strategies that take it."""
    with pytest.raises(strategies.StrategyError) as err:
        loader.load_model(
            object(), tmp_path / "none.safetensors", strategy="hostcast", budget=1 << 20
        )
    message = str(err.value)
    assert "\n" not in message
    assert "'hostcast'" in message and "'budget'" in message and "pipelined" in message
    with pytest.raises(strategies.StrategyError, match=r"'budgt'.*no strategy takes it"):
        strategies.get("pipelined").load(object(), tmp_path / "none.safetensors", budgt=1)
    with pytest.raises(strategies.StrategyError, match=r"'floor' takes no option 'threads'"):
        strategies.get("floor").load(None, tmp_path / "none.safetensors", threads=2)


def test_the_declared_options_are_what_the_strategies_take():
    """pipelined declares the `reading` and `placement` groups' fields and the remote ones, the
    other strategies that load a URL only the remote ones (and `download` the budget of its
    pipelined load), the runai S3 peer its clients in flight, `sharded` also how its processes
    share the file and the budget of what it reads ahead; none is one every strategy takes.
    (Declared by role since issue 55: `loader.options`' groups, so the names come in the groups'
    order.)"""
    from loader.options import Checking, Placement, Reading

    declared = {name: info.options for name, info in strategies.catalog().items() if info.options}
    pipeline = tuple(f.name for g in (Reading, Placement) for f in dataclasses.fields(g))
    checks = tuple(f.name for f in dataclasses.fields(Checking))  # a URL's bytes checked, waits
    assert sorted(declared["pipelined"][:4]) == sorted(pipeline)
    assert declared == {
        "pipelined": ("budget", "threads", "cache_policy", "staging", "concurrency", "cache_dir")
        + checks,
        "hostcast": ("concurrency", "cache_dir", *checks),
        "download": ("concurrency", "budget", *checks),
        "sharded": ("budget", "concurrency", "share", "max_over_read", *checks),
        "runai-s3": ("concurrency",),
    }
    assert not {o for options in declared.values() for o in options} & set(UNIVERSAL)


@pytest.mark.parametrize(
    "body, message",
    [
        ('"""Doc."""\n', "defines no load"),
        ("def load(target, path): ...\n", "module docstring"),
        ('"""Doc."""\nKIND = "model"\ndef load(target, path): ...\n', "KIND one of"),
        ('"""Doc."""\nREQUIRES = "torch"\ndef load(target, path): ...\n', "REQUIRES a tuple"),
        ('"""Doc."""\nKIND = make()\ndef load(target, path): ...\n', "must be a literal"),
        ('"""Doc."""\nOPTIONS = "budget"\ndef load(target, path): ...\n', "OPTIONS a tuple"),
        ('"""Doc."""\nOPTIONS = ("budget",)\ndef load(request): ...\n', "option groups"),
        ('"""Doc."""\nOPTIONS = ("reading.bugdet",)\ndef load(r): ...\n', "'group.field'"),
        ('"""Doc."""\nPLATFORMS = ("tpuu",)\ndef load(target, path): ...\n', "PLATFORMS a tuple"),
        ('"""Doc."""\nWHY_NOT_REMOTE = 1\ndef load(target, path): ...\n', "one line of text"),
        (
            '"""Doc."""\nREMOTE = True\nWHY_NOT_REMOTE = "no"\ndef load(target, path): ...\n',
            "no WHY_NOT_REMOTE while REMOTE = True",
        ),
        (
            '"""Doc."""\nMULTIPROCESS = True\nWHY_NOT_MULTIPROCESS = "x"\ndef load(t, p): ...\n',
            "no WHY_NOT_MULTIPROCESS while MULTIPROCESS = True",
        ),
    ],
)
def test_malformed_modules_are_refused_by_name(extra_pkg, body, message):
    module = extra_pkg("bad_one", body)
    with pytest.raises(strategies.StrategyError, match=message) as err:
        strategies.catalog([module])
    assert "bad_one" in str(err.value)


def test_duplicates_and_unknowns_raise(extra_pkg):
    module = extra_pkg("hostcast", GOOD)
    with pytest.raises(strategies.StrategyError, match="registered twice"):
        strategies.catalog([module])
    with pytest.raises(strategies.StrategyError, match="cannot be found"):
        strategies.catalog(["tmp_strats.nope"])
    with pytest.raises(strategies.UnknownStrategyError, match="known strategies: .*hostcast"):
        strategies.get("nope")


def test_catalog_imports_no_strategy_and_no_jax():
    code = (
        "import sys, loader.strategies as s; s.catalog()\n"
        "print(sorted(m for m in sys.modules if m.startswith('loader.strategies.')),\n"
        "      'jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] False"
