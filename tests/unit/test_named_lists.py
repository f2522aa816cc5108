"""Lists of URL schemes and strategy names in prose are checked against their registries.

The schemes come from `loader.remote.registry.STORES`, the strategies from
`loader.strategies.names()`. Read from the text of the product packages (docstrings, messages,
comments) and the docs:

- every scheme named (`` `gs://` ``, `s3://bucket/key`) is registered, but for the few places
  that name another library's schemes, each listed below with its reason;
- a list of URLs that names two stores or more (`` `https://`, `s3://`, `hf://` ``) names every
  store, unless it says it is a sample (it ends with `...`);
- `load_model`'s docstring names every registered store;
- every strategy a command line or a call names (`--strategies a,b`, `strategy="x"`) is registered.

A new store is then named in every list at once, or a test says where it is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loader import strategies
from loader.remote import registry

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("loader", "bench", "shapes", "dashboard")
DOCS = ("README.md", "docs")

#: `scheme://...`, with or without backquotes, up to a space, a comma, `;` or `)`.
_URL = r"`?[a-z][a-z0-9+]*://[^`\s,;)]*`?"
URL = re.compile(r"`?(?P<s>[a-z][a-z0-9+]*)://[^`\s,;)]*`?")
#: two URLs or more in a row: `a://`, `b://` or `c://` (commas, "or", "and").
URL_LIST = re.compile(rf"{_URL}(?:(?:,\s*|\s+or\s+|\s+and\s+|,\s+or\s+|,\s+and\s+){_URL})+")
STRATEGY = re.compile(r"(?:--strategy[= ]|--strategies[= ]|strategy=[\"'])(?P<names>[a-z0-9,-]+)")

#: (file, scheme): where prose names a scheme that is no store of ours, and why.
OTHER_SCHEMES = {
    # etils epath (the orbax peer's reader) knows Azure through fsspec; loadbench has no az store
    ("loader/strategies/orbax_safetensors.py", "az"),
    # a process launcher's rendezvous address, not a checkpoint's
    ("loader/launcher.py", "tcp"),
}
#: files whose lists of schemes are about another library's reader, not ours.
OTHER_LISTS = {"loader/strategies/orbax_safetensors.py"}
#: words that stand for a scheme in prose (`scheme://bucket/key`).
PLACEHOLDERS = {"scheme"}


def _texts() -> dict[str, str]:
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    files += [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in files}


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def unknown_schemes(name: str, text: str, known: set[str]) -> list[str]:
    """`file:line scheme://` for each scheme named in `text` that `known` lacks."""
    return [
        f"{name}:{_line(text, m.start())} {m.group('s')}://"
        for m in URL.finditer(text)
        if m.group("s") not in known | PLACEHOLDERS and (name, m.group("s")) not in OTHER_SCHEMES
    ]


def short_lists(name: str, text: str, stores: dict[str, str]) -> list[str]:
    """`file:line: missing x://` for each list naming two stores or more but not all of them.

    `stores` maps each registered scheme to its store's name (`http` -> `https`)."""
    found = []
    for m in URL_LIST.finditer(text):
        named = {stores.get(s.group("s")) for s in URL.finditer(m.group(0))} - {None}
        sample = re.match(r"\s*,?\s*(\.\.\.|…)", text[m.end() :])
        if len(named) < 2 or sample:
            continue
        missing = sorted(set(stores.values()) - named)
        if missing:
            where = f"{name}:{_line(text, m.start())}"
            found.append(f"{where}: missing {', '.join(s + '://' for s in missing)}")
    return found


def _registry() -> tuple[set[str], dict[str, str]]:
    stores = {scheme: kind.name for kind in registry.STORES for scheme in kind.schemes}
    return set(stores), stores


def test_every_scheme_named_in_prose_is_registered():
    known, _ = _registry()
    found = [x for name, text in _texts().items() for x in unknown_schemes(name, text, known)]
    assert not found, f"schemes named but not registered (loader.remote.registry): {found}"


def test_every_list_of_stores_names_them_all():
    _, stores = _registry()
    found = [
        x
        for name, text in _texts().items()
        if name not in OTHER_LISTS
        for x in short_lists(name, text, stores)
    ]
    assert not found, f"lists of URL schemes that miss a registered store: {found}"


def test_load_models_docstring_names_every_store():
    from loader import load_model

    doc = load_model.__doc__ or ""
    missing = [kind.name for kind in registry.STORES if f"`{kind.name}://" not in doc]
    assert not missing, f"load_model's docstring does not name {missing}"


def test_every_strategy_named_in_prose_is_registered():
    names = set(strategies.names())
    found = [
        f"{name}:{_line(text, m.start())} {s}"
        for name, text in _texts().items()
        for m in STRATEGY.finditer(text)
        for s in m.group("names").split(",")
        if s and s not in names
    ]
    assert not found, f"strategies named but not registered: {found}"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a URL (`https://`, `s3://`, `hf://`) is read", ["t.py:1: missing gs://"]),
        ("(https://, s3://, hf://; loader.remote)", ["t.py:1: missing gs://"]),
        ("`https://`, `s3://`, `hf://` or `gs://`", []),
        ("(`https://`, `s3://`, ...)", []),
        ("`https://` and `http://`", []),
    ],
)
def test_a_short_list_is_found(text, want):
    """The check can fail: the lists issue 72 found (`errors.py`, `strategies/__init__.py`)."""
    stores = {"https": "https", "http": "https", "s3": "s3", "hf": "hf", "gs": "gs"}
    assert short_lists("t.py", text, stores) == want


def test_an_unknown_scheme_is_found():
    text = "reads `gs://bucket/key` and\n`az://container/blob`"
    assert unknown_schemes("t.py", text, {"gs"}) == ["t.py:2 az://"]
