"""The stores are reached through the registry only, and only the registry looks at a scheme.

Read from the sources with `ast` (like `test_architecture.py`):

- no module but `loader.remote.registry` imports a store module (`loader.remote.stores.<x>`),
  anywhere in the tree (tests and scripts included), so a store's parse, open and listing are
  reached through `parse_url` / `open_store` and nothing else;
- every store module of `loader/remote/stores/` is registered (its `KIND` in `STORES`) and no
  scheme twice;
- no code in `loader` outside the store modules compares a string with a registered scheme
  (`url.scheme == "s3"`, `scheme in ("http", "https")`): a question about a scheme is a
  capability or a function of its store;
- no message in `loader` spells the schemes out (`"https://, s3://, hf://"`): messages name them
  from the registry (`schemes_text`), so a new store is named everywhere at once.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import pytest

from loader.remote import registry
from loader.remote.store import Capability, StoreKind
from loader.remote.transport import RateWatch, TimeLimits, TransportError, TransportKind

ROOT = Path(__file__).resolve().parents[2]
TREES = ("loader", "bench", "shapes", "dashboard", "scripts", "tests")
STORES_DIR = ROOT / "loader" / "remote" / "stores"
STORE_MODULES = {
    f"loader.remote.stores.{p.stem}" for p in STORES_DIR.glob("*.py") if p.stem != "__init__"
}
SCHEMES = {scheme for kind in registry.STORES for scheme in kind.schemes}


def _python_files(*trees: str) -> list[Path]:
    return [p for tree in trees for p in sorted((ROOT / tree).rglob("*.py"))]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def store_imports(tree: ast.AST) -> list[int]:
    """The lines importing a store module (`import loader.remote.stores.s3`, `from
    loader.remote.stores import s3`, `from loader.remote.stores.s3 import KIND`)."""
    lines = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        if any(n in STORE_MODULES for n in names):
            lines.append(node.lineno)
    return lines


def test_no_module_but_the_registry_imports_a_store():
    assert {"loader.remote.stores.gcs", "loader.remote.stores.s3"} <= STORE_MODULES
    found = [
        f"{_module(p)}:{line}"
        for p in _python_files(*TREES)
        if _module(p) != "loader.remote.registry"
        for line in store_imports(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert not found, f"a store reached other than through loader.remote.registry: {found}"


def test_the_store_import_check_can_fail():
    tree = ast.parse("from loader.remote.stores import gcs\nimport loader.remote.stores.s3\n")
    assert store_imports(tree) == [1, 2]


def test_every_store_module_is_registered_once():
    registered = {kind.open.__module__ for kind in registry.STORES}
    assert registered == STORE_MODULES
    assert len(SCHEMES) == sum(len(k.schemes) for k in registry.STORES)
    twice = (*registry.STORES, registry.STORES[0])
    with pytest.raises(ValueError, match="registered twice"):
        registry._by_scheme(twice)


def scheme_comparisons(tree: ast.AST) -> list[int]:
    """The lines comparing with a registered scheme's name (`== "s3"`, `in ("http", "https")`)."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            literals = [n.value for n in ast.walk(side) if isinstance(n, ast.Constant)]
            if any(isinstance(v, str) and v in SCHEMES for v in literals):
                lines.append(node.lineno)
                break
    return lines


def test_no_scheme_is_compared_outside_the_stores():
    outside = [p for p in _python_files("loader") if _module(p) not in STORE_MODULES]
    found = [
        f"{_module(p)}:{line}"
        for p in outside
        for line in scheme_comparisons(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert not found, f"a scheme compared outside its store (ask the registry): {found}"


def test_the_scheme_comparison_check_can_fail():
    tree = ast.parse('if url.scheme == "s3":\n    pass\nok = scheme in ("http", "https")\n')
    assert scheme_comparisons(tree) == [1, 3]


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


_ONE = "(?:" + "|".join(sorted(SCHEMES)) + r")://`?"
#: Two schemes in a row, as a list of them is spelled: `https://, s3://`, `s3:// or hf://`.
LISTED = re.compile(rf"{_ONE}(?:,\s*(?:or\s+)?|\s+or\s+)`?{_ONE}")


def spelled_scheme_lists(tree: ast.AST) -> list[int]:
    """The lines of a string (not a docstring) listing schemes (`"https://, s3://, hf://"`)."""
    skip = _docstrings(tree)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and LISTED.search(node.value)
    ]


def test_messages_name_the_schemes_from_the_registry():
    found = [
        f"{_module(p)}:{line}"
        for p in _python_files("loader")
        for line in spelled_scheme_lists(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert not found, f"schemes spelled out in a message (use schemes_text()): {found}"
    assert registry.schemes_text() == "https://, s3://, hf://, gs://"


def test_the_spelled_list_check_can_fail():
    tree = ast.parse(
        '"""Docs may list https://, s3://."""\nraise E("a URL (https://, s3://, hf://)")\n'
        'why = "s3:// only through s3fs"\nraise E("give s3:// or gs://")\n'
    )
    assert spelled_scheme_lists(tree) == [2, 4]


def test_a_url_reaches_its_store_through_the_registry():
    for url, scheme, root, path in [
        ("gs://bucket/dir/model.safetensors", "gs", "bucket", "dir/model.safetensors"),
        ("s3://bucket/prefix/", "s3", "bucket", "prefix"),
        ("hf://org/repo@v1/sub", "hf", "org/repo", "sub"),
        ("http://127.0.0.1:8/a/model.safetensors", "http", "http://127.0.0.1:8", "a/..."),
    ]:
        parsed = registry.parse_url(url)
        assert isinstance(parsed.store, StoreKind) and scheme in parsed.store.schemes
        assert (parsed.scheme, parsed.root) == (scheme, root)
        assert path.endswith("...") or parsed.path == path
        assert str(parsed) == url.rstrip("/") or parsed.kind == "folder"
    index = registry.parse_url("gs://b/x/model.safetensors.index.json")
    assert index.kind == "index" and index.child("x/y.safetensors") == "gs://b/x/y.safetensors"
    assert Capability.LISTING in registry.BY_SCHEME["gs"].can
    assert Capability.LISTING not in registry.BY_SCHEME["https"].can
    for bad, said in [
        ("ftp://host/model.safetensors", "use one of https://, s3://, hf://, gs://"),
        ("gs:///model.safetensors", "expected gs://bucket/key"),
        ("gs://user:pw@bucket/model.safetensors", "credentials in a URL are refused"),
    ]:
        with pytest.raises(Exception, match=said) as e:
            registry.parse_url(bad)
        assert "pw" not in str(e.value)


def test_the_gcs_store_follows_the_emulator_variable(monkeypatch):
    """`STORAGE_EMULATOR_HOST`: the JSON API's media path (what fake-gcs-server serves with its
    default flags), not obstore's XML paths; without it, obstore's client."""
    import sys

    from loader.remote.transport import ObstoreTransport

    gcs = sys.modules[registry.BY_SCHEME["gs"].open.__module__]  # reached through the registry
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:9")
    url = registry.parse_url("gs://bucket/dir/")
    store = registry.open_store(url)
    assert isinstance(store.transport, gcs.EmulatorTransport) and store.list_names is not None
    assert store.transport.limits == TimeLimits()
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    assert isinstance(registry.open_store(url).transport, ObstoreTransport)


# -- the minimum rate ----------------------------------------------------------------------------
def test_the_minimum_rate_fails_a_trickle_after_one_window(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    watch = RateWatch(TimeLimits(idle_s=10, min_rate_bps=1024))
    for second in range(1, 10):  # a byte a second: within the first window, nothing said
        now[0] = 100.0 + second
        watch.check(second, 1 << 20)
    now[0] = 110.0
    with pytest.raises(TransportError) as e:
        watch.check(10, 1 << 20)
    assert e.value.kind == TransportKind.SLOW and not e.value.retryable
    assert "1 bytes/s over 10 s, under the minimum of 1024 bytes/s" in e.value.reason


def test_the_minimum_rate_lets_a_steady_body_through(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    watch = RateWatch(TimeLimits(idle_s=1, min_rate_bps=1024))
    for step in range(1, 100):  # 2 KiB a second, for 99 s: every window above the minimum
        now[0] = float(step)
        watch.check(2048 * step, 1 << 30)
    off = RateWatch(TimeLimits(idle_s=1, min_rate_bps=0))
    now[0] = 1000.0
    off.check(0, 1 << 30)  # no minimum: nothing said


@pytest.mark.parametrize(
    ("variable", "adc", "vm", "expected"),
    [
        ("GOOGLE_APPLICATION_CREDENTIALS", False, False, set()),  # the chain, obstore's own
        (None, True, False, set()),  # gcloud's login
        (None, False, True, set()),  # a Google Cloud VM: its metadata server
        (None, False, False, {"skip_signature"}),  # nothing: a public bucket, anonymously
    ],
)
def test_gcs_credentials_come_from_the_usual_chain_else_none(
    monkeypatch, tmp_path, variable, adc, vm, expected
):
    import sys

    gcs = sys.modules[registry.BY_SCHEME["gs"].open.__module__]  # reached through the registry
    for name in (gcs.EMULATOR, *gcs.CREDENTIAL_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    if variable:
        monkeypatch.setenv(variable, "127.0.0.1:4443")
    if adc:
        (tmp_path / "adc.json").write_text("{}")
    (tmp_path / "product").write_text("Google Compute Engine\n" if vm else "Standard PC\n")
    monkeypatch.setattr(gcs, "GCLOUD_ADC", tmp_path / "adc.json")
    monkeypatch.setattr(gcs, "PRODUCT_NAME", tmp_path / "product")
    chosen = gcs._credentials()
    assert set(chosen) == expected
