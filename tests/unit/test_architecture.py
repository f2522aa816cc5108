"""Imports only go down, and nothing imports in a circle: read from the sources with `ast`.

The four packages stack as loader < shapes < bench, dashboard; only the command-line entry
(`bench/cli.py`) sits above all four. The rules:

- `loader` imports none of `shapes`, `bench`, `dashboard`; `shapes` none of `bench`, `dashboard`;
  no module of `bench` but `bench/cli.py` imports `dashboard`. These count every import, at module
  level or inside a function (a deferred import is still a dependency).
- `dashboard` never imports jax or flax. Counted: every import a dashboard module makes (module
  level, inside functions, and `importlib.import_module("literal")`), then, transitively, what
  importing each reached module runs: its module-level imports and its parent packages'
  `__init__`. Function-level imports of non-dashboard modules are not followed: they run only if
  that function is called, and the dashboard's own calls are what this rule is about.
- Inside `bench`, the machine probe (`bench.machine`, with the machine facts every record carries)
  sits below the packages that use it: it imports none of `BENCH_ABOVE_MACHINE` (`bench.run`
  stamps its runs with `bench.machine.facts`, never the other way), type-only imports counted.
- The one arrow that runs up is `bench.cli` -> `dashboard.cli` (`loadbench dashboard` starts the
  app); `UPWARD` names it, and the test fails if it goes or another appears.
- The formatter owns the layout: `# fmt: skip` / `# fmt: off` appear at most 10 times in the tree,
  and only on literal data tables. (Module and folder sizes are a report, `make sizes`, not a rule.)
- No import cycle between modules: over module-level imports (including those in class bodies and
  under `if` / `try` at module level). Function-level imports are left out of the cycle check, since
  they run after both modules have finished importing; they are the sanctioned way to defer a heavy
  import (jax), not a way around this rule: a layering rule above still counts them.
- Outside the modules that define the byte sources, no code in `loader` asks a source which kind
  it is (`isinstance` of a source or bytes class): a question about where bytes come from is a
  method or property of `loader.pipeline.sources.ByteSource` (or of the `Bytes` it makes).
- No engine imports another: nothing under `loader/sharded/` (nor the strategies that run it)
  imports `loader.pipeline`, by any kind of import (the byte budget both count with is
  `loader.budget`), and a sharded load in a fresh process runs no module of `loader.pipeline`.
- The pipelined engine asks no job its kind: in `loader.pipeline`, an `isinstance` of a job, part
  or work class (those of `JOB_MODULES`) appears only inside a job type's own methods (a class
  that finishes a leaf, telling its own parts apart); and no `getattr` / `hasattr` probes a job,
  a piece of work or a tensor's `Bytes` for a member of their protocols.
- In `loader`, not even a type-only cycle: the imports under `if TYPE_CHECKING:` count too. Such a
  block never runs, but two modules that need each other's types are one role split in the wrong
  place (the plan's types live in `loader.planning.plan`, below the planner and the executors).
- Folders layer too: inside each package, no circle between its folders (`loader/placement/` is
  below `loader/planning/`, `bench/records/` below `bench/analysis/`). A folder stands for every
  module under it, its own subfolders included; a module at the package's root stands for
  itself (`loader/report.py` is one node, `loader/sharded/` another). Every import counts, at
  module level, type-only or inside a function: a folder that needs another only inside a
  function still needs it.
"""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("loader", "shapes", "bench", "dashboard")
#: The one import arrow that runs up: `loadbench dashboard` (in the CLI) starts the app.
UPWARD = {("bench.cli", "dashboard.cli")}
FORBIDDEN = {"loader": {"shapes", "bench", "dashboard"}, "shapes": {"bench", "dashboard"}}
#: What uses the machine probe and its facts, so is above `bench.machine` (`_under` matches them).
BENCH_ABOVE_MACHINE = ("bench.cli", "bench.commands", "bench.run", "bench.child", "bench.analysis")
HEAVY = {"jax", "jaxlib", "flax"}


@dataclass
class Module:
    name: str
    is_package: bool
    top: set[str] = field(default_factory=set)  # module-level imports (dotted names)
    deferred: set[str] = field(default_factory=set)  # imports inside functions
    typing: set[str] = field(default_factory=set)  # under `if TYPE_CHECKING:` (never run)


def _package(name: str) -> str:
    return name.split(".")[0]


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """`from base import a, b` as `base.a`, `base.b` (each mapped later to a module or `base`)."""
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{a.name}" for a in node.names]


def _imports_of(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return _resolve(node, module, is_package)
    if (  # importlib.import_module("a.b")
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


def _collect(node: ast.AST, mod: Module, deferred: bool) -> None:
    for child in ast.iter_child_nodes(node):
        inner = deferred or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        (mod.deferred if inner else mod.top).update(_imports_of(child, mod.name, mod.is_package))
        _collect(child, mod, inner)


def _type_checking_only(tree: ast.Module, mod: Module) -> None:
    """Drop `if TYPE_CHECKING:` blocks (they never run), keeping their imports in `mod.typing`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            block = ast.Module(body=node.body, type_ignores=[])
            for child in ast.walk(block):
                mod.typing.update(_imports_of(child, mod.name, mod.is_package))
            node.body = []


def _longest_module(name: str, known: set[str]) -> str:
    """`loader.errors.MismatchError` -> `loader.errors`: the longest prefix that is a module."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def read_modules() -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name, is_package = _module_name(path)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            mod = modules[name] = Module(name, is_package)
            _type_checking_only(tree, mod)
            _collect(tree, mod, deferred=False)
    known = set(modules)
    for mod in modules.values():  # ours: the module each name is in (not `module.attribute`)
        for attr in ("top", "deferred", "typing"):  # externals: by their top-level name
            names = {n for n in getattr(mod, attr) if n}
            ours = {_longest_module(n, known) for n in names if _package(n) in PACKAGES}
            theirs = {n.split(".")[0] for n in names if _package(n) not in PACKAGES}
            setattr(mod, attr, ours | theirs)
    return modules


MODULES = read_modules()


def test_the_reader_sees_the_tree():
    assert {"loader", "loader.sequence", "bench.cli", "dashboard"} <= set(MODULES)
    assert "loader.errors" in MODULES["loader"].top
    assert "jax" in MODULES["loader.planning.match"].top
    assert "jax" in MODULES["loader.sharded.rule"].deferred


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_only_go_down(package):
    wrong = sorted(
        f"{mod.name} imports {dep}"
        for mod in MODULES.values()
        if _package(mod.name) == package
        for dep in mod.top | mod.deferred
        if _package(dep) in FORBIDDEN[package]
    )
    assert not wrong, "\n".join(wrong)


def test_the_one_upward_arrow_is_the_dashboard_command():
    arrows = {
        (mod.name, dep)
        for mod in MODULES.values()
        if _package(mod.name) == "bench"
        for dep in mod.top | mod.deferred
        if _package(dep) == "dashboard"
    }
    assert arrows == UPWARD, f"bench -> dashboard arrows: {sorted(arrows)}; only {UPWARD} may be"


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_machine_probe_imports_nothing_above_it():
    wrong = sorted(
        f"{mod.name} imports {dep}"
        for mod in MODULES.values()
        if _under(mod.name, "bench.machine")
        for dep in mod.top | mod.deferred | mod.typing
        if any(_under(dep, above) for above in BENCH_ABOVE_MACHINE)
    )
    assert not wrong, "\n".join(wrong)


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _jax_paths() -> list[str]:
    """Each chain from a dashboard module to jax/flax, as 'a -> b -> jax'."""
    found = []
    for start in (m for m in MODULES if _package(m) == "dashboard"):
        mod = MODULES[start]
        todo = [(dep, [start]) for dep in sorted(mod.top | mod.deferred | set(_parents(start)))]
        seen: set[str] = set()
        while todo:
            name, chain = todo.pop()
            if name in HEAVY:
                found.append(" -> ".join([*chain, name]))
                continue
            if name in seen or name not in MODULES:
                continue
            seen.add(name)
            nxt = MODULES[name].top | set(_parents(name))
            if _package(name) == "dashboard":
                nxt |= MODULES[name].deferred
            todo += [(dep, [*chain, name]) for dep in sorted(nxt)]
    return sorted(set(found))


def test_dashboard_never_imports_jax():
    paths = _jax_paths()
    assert not paths, "the dashboard reaches jax/flax:\n" + "\n".join(paths)


def _cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """One import cycle in `graph` (module -> the modules it imports), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in graph[node]:
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycles():
    graph = {n: sorted(d for d in m.top if d in MODULES and d != n) for n, m in MODULES.items()}
    cycle = _cycle(graph)
    assert cycle is None, "module-level import cycle: " + " -> ".join(cycle)


def _loader_graph(package: str = "loader") -> dict[str, list[str]]:
    """`package`'s modules and what each imports at module level, type-only imports included."""
    ours = {n: m for n, m in MODULES.items() if _package(n) == package}
    return {n: sorted(d for d in m.top | m.typing if d in ours and d != n) for n, m in ours.items()}


def test_the_reader_sees_type_only_imports():
    assert "loader.report" in MODULES["loader.strategies"].typing
    assert "loader.report" not in MODULES["loader.strategies"].top


@pytest.mark.parametrize("package", ["loader", "bench"])
def test_no_import_cycles_type_only_ones_included(package):
    cycle = _cycle(_loader_graph(package))
    assert cycle is None, f"import cycle in {package} (type-only imports counted): " + " -> ".join(
        cycle
    )


def test_the_loader_cycle_check_can_fail():
    graph = _loader_graph()
    graph["loader.planning.plan"] = [*graph["loader.planning.plan"], "loader.planning.match"]
    assert _cycle(graph) is not None


# -- folders layer: no circle between a package's folders -------------------------------------
def _folder(name: str, package: str | None = None) -> str:
    """The node `name` stands for in `package`'s folder graph (default: its top package's): the
    folder right under the package that holds it (`loader.pipeline` for
    `loader.pipeline.sources.local` in `loader`, `loader.pipeline.sources` in `loader.pipeline`),
    or itself for a module at the package's root (`loader.report`, `loader.pipeline.order`)."""
    depth = (package or _package(name)).count(".") + 2  # the parts of a node under the package
    parts = name.split(".")
    return ".".join(parts[:depth]) if len(parts) > depth or MODULES[name].is_package else name


def _folder_graph(package: str) -> dict[str, dict[str, str]]:
    """Each folder (or root module) of `package` -> the others it imports, each with one import
    that shows it (`module -> module`), every kind of import counted."""
    graph: dict[str, dict[str, str]] = {}
    for name, mod in sorted(MODULES.items()):
        if not _under(name, package) or name == package:
            continue
        here = graph.setdefault(_folder(name, package), {})
        for dep in sorted(mod.top | mod.typing | mod.deferred):
            if dep in MODULES and _under(dep, package) and dep != package:
                node = _folder(dep, package)
                if node != _folder(name, package):
                    here.setdefault(node, f"{name} -> {dep}")
    return graph


#: Every package, and every folder of one that holds folders itself (`loader.pipeline`, whose
#: `sources/` must not import back what imports it).
NESTED = sorted(
    {".".join(name.split(".")[:-1]) for name, mod in MODULES.items() if mod.is_package}
    - {""}
    - set(PACKAGES)
)


@pytest.mark.parametrize("package", [*PACKAGES, *NESTED])
def test_no_folder_circles(package):
    graph = _folder_graph(package)
    cycle = _cycle({node: sorted(deps) for node, deps in graph.items()})
    assert cycle is None, (
        f"folder circle in {package}: "
        + " -> ".join(cycle)
        + (" (" + "; ".join(graph[a][b] for a, b in zip(cycle, cycle[1:])) + ")")
    )


def test_the_folder_circle_check_can_fail():
    """`loader/placement/` importing `loader/planning/` again (what `materialize.py` did) is a
    circle: `planning/` imports `placement/`."""
    graph = {node: sorted(deps) for node, deps in _folder_graph("loader").items()}
    assert "loader.placement" in graph["loader.planning"]
    graph["loader.placement"] = [*graph["loader.placement"], "loader.planning"]
    assert _cycle(graph) is not None
    assert _folder("loader.pipeline.sources.local") == "loader.pipeline"
    assert _folder("loader.report") == "loader.report"
    # one level down: `pipeline/sources/` importing the queue order again (what `local.py` did
    # for `file_order`) is a circle: `order` reads the sources' types
    nested = {node: sorted(deps) for node, deps in _folder_graph("loader.pipeline").items()}
    assert "loader.pipeline.sources" in nested["loader.pipeline.order"]
    sources = "loader.pipeline.sources"
    nested[sources] = [*nested[sources], "loader.pipeline.order"]
    assert _cycle(nested) is not None
    assert _folder("loader.pipeline.sources.local", "loader.pipeline") == "loader.pipeline.sources"
    assert "loader.pipeline" in NESTED


# -- nobody asks a byte source which kind it is ------------------------------------------------
#: The modules that define the sources and their bytes: they may tell their own kinds apart.
SOURCE_MODULES = (
    "loader.format.source",
    "loader.remote.source",
    "loader.remote.ranges",
    "loader.pipeline.regions",
    "loader.pipeline.sources",
    "loader.pipeline.sources.local",
    "loader.pipeline.sources.remote",
    "loader.pipeline.sources.memory",
    "loader.sharded.layout",
    "loader.sharded.remote",
    "loader.sharded.files",
)


def _path(module: str) -> Path:
    base = ROOT.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _source_classes() -> set[str]:
    """The sources and bytes the source modules define (`...Source`, `...Files`, `...Bytes`,
    `...Checkpoint`, `...SliceFile`, `...Headers`), but the protocols every kind implements."""
    kinds = ("Source", "Files", "Bytes", "Checkpoint", "SliceFile", "Headers")
    names = set()
    for module in SOURCE_MODULES:
        tree = ast.parse(_path(module).read_text(encoding="utf-8"))
        names |= {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    return {n for n in names if n.endswith(kinds)} - {"ByteSource", "Bytes", "SliceFile"}


def _kind_questions(tree: ast.AST, classes: set[str]) -> list[int]:
    """The lines of `isinstance(x, C)` where C names one of `classes`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
            named = {getattr(n, "id", getattr(n, "attr", "")) for n in ast.walk(node.args[1])}
            if named & classes:
                lines.append(node.lineno)
    return lines


def test_no_code_asks_a_byte_source_which_kind_it_is():
    classes = _source_classes()
    assert {"CheckpointSource", "RemoteSource", "LocalFiles", "RemoteBytes"} <= classes
    found = [
        f"{name}:{line}"
        for name in sorted(MODULES)
        if _package(name) == "loader" and name not in SOURCE_MODULES
        for line in _kind_questions(ast.parse(_path(name).read_text(encoding="utf-8")), classes)
    ]
    assert not found, f"isinstance of a byte source's kind outside the source modules: {found}"


def test_the_kind_question_check_can_fail():
    tree = ast.parse("if isinstance(source, RemoteSource | CheckpointSource):\n    pass\n")
    assert _kind_questions(tree, _source_classes()) == [1]


# -- the formatter owns the layout ----------------------------------------------------------
MAX_FMT_SKIPS = 10
_FMT = re.compile(r"\bfmt:\s*(skip|off)\b")  # in a comment: ruff format leaves the code as is


def _source_files() -> list[Path]:
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        files += [Path(folder, n) for n in sorted(names) if n.endswith(".py")]
    return files


def _is_data_table(node: ast.AST) -> bool:
    """A literal dict/list/tuple/set of constants and names (e.g. a dtype table)."""
    leaves = (ast.Constant, ast.Name, ast.Attribute, ast.UnaryOp, ast.unaryop, ast.expr_context)
    containers = (ast.Dict, ast.List, ast.Tuple, ast.Set)
    return isinstance(node, containers) and all(
        isinstance(n, containers + leaves) for n in ast.walk(node)
    )


def _fmt_markers(path: Path) -> list[tuple[int, bool]]:
    """(line, on a data table) for each formatter-bypass comment in one file."""
    text = path.read_text(encoding="utf-8")
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    lines = [t.start[0] for t in tokens if t.type == tokenize.COMMENT and _FMT.search(t.string)]
    if not lines:
        return []
    stmts = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Assign | ast.AnnAssign)]
    marked = []
    for line in lines:
        owners = [s for s in stmts if s.lineno <= line <= (s.end_lineno or s.lineno)]
        marked.append((line, any(s.value is not None and _is_data_table(s.value) for s in owners)))
    return marked


def test_fmt_skip_is_rare_and_only_on_data_tables():
    found = {str(p.relative_to(ROOT)): _fmt_markers(p) for p in _source_files()}
    assert "tests/unit/test_architecture.py" in found  # the walk reaches the tests too
    markers = [f"{name}:{line}" for name, marks in found.items() for line, _ in marks]
    off_table = [f"{name}:{line}" for name, marks in found.items() for line, ok in marks if not ok]
    assert len(markers) <= MAX_FMT_SKIPS, f"{len(markers)} formatter bypasses: {markers}"
    assert not off_table, f"formatter bypasses outside a literal data table: {off_table}"


# -- no engine imports another ------------------------------------------------------------------
#: The sharded engine: its folder and the strategies that run it.
SHARDED = ("loader.sharded", "loader.strategies.sharded", "loader.strategies.sharded_dir")


def _pipeline_imports(modules: dict[str, Module]) -> list[str]:
    """`module -> loader.pipeline...` for each import of the pipelined engine by the sharded one,
    every kind of import counted (module level, type-only, inside a function)."""
    return sorted(
        f"{name} -> {dep}"
        for name, mod in modules.items()
        if any(_under(name, sharded) for sharded in SHARDED)
        for dep in mod.top | mod.typing | mod.deferred
        if _under(dep, "loader.pipeline")
    )


def test_the_sharded_engine_imports_nothing_of_the_pipelined_one():
    wrong = _pipeline_imports(MODULES)
    assert not wrong, "the sharded engine imports loader.pipeline: " + "; ".join(wrong)


def test_the_engine_import_check_can_fail():
    planted = {"loader.sharded.load": Module("loader.sharded.load", False)}
    planted["loader.sharded.load"].deferred.add("loader.pipeline.budget")
    assert _pipeline_imports(planted) == ["loader.sharded.load -> loader.pipeline.budget"]


#: A sharded load in a fresh process: the modules of `loader.pipeline` it ran, and whether every
#: value came from the file (the model is built from another seed than the one saved).
SHARDED_LOAD = """
import sys, tempfile
from pathlib import Path
import numpy as np
from flax import nnx
import loader
build = lambda seed: nnx.Linear(8, 8, use_bias=False, rngs=nnx.Rngs(seed))
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "tiny.safetensors"
    loader.save_model(build(0), path)
    model, _ = loader.load_model(lambda: build(1), path, strategy="sharded")
saved = np.asarray(build(0).kernel.get_value())
exact = np.array_equal(np.asarray(model.kernel.get_value()), saved)
print(exact, sorted(n for n in sys.modules if n.split(".")[:2] == ["loader", "pipeline"]))
"""


def test_a_sharded_load_runs_no_file_of_the_pipelined_engine():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", SHARDED_LOAD],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "[]"], done.stdout


# -- the engine asks no job its kind -----------------------------------------------------------
#: The modules that define the jobs, their parts and the work the readers take.
JOB_MODULES = (
    "loader.pipeline.jobs",
    "loader.pipeline.ring_job",
    "loader.pipeline.ring_chunks",
    "loader.pipeline.stacked",
    "loader.pipeline.order",
    "loader.pipeline.fused",
)


def _classes(module: str) -> list[ast.ClassDef]:
    tree = ast.parse(_path(module).read_text(encoding="utf-8"))
    return [n for n in tree.body if isinstance(n, ast.ClassDef)]


def _job_kinds() -> tuple[set[str], set[str]]:
    """(every class of the job modules: jobs, parts, work; the job types among them, the
    classes that finish a leaf, which may tell their own parts apart)."""
    classes = [c for module in JOB_MODULES for c in _classes(module)]
    finishes = {
        c.name
        for c in classes
        if any(isinstance(f, ast.FunctionDef) and f.name == "finish" for f in c.body)
    }
    return {c.name for c in classes}, finishes - {"Job"}


def _pipeline_kind_questions(tree: ast.AST, kinds: set[str], own: set[str]) -> list[int]:
    """The lines of `isinstance(x, K)` with K one of `kinds`, outside the classes `own`."""
    inside = {
        id(node)
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and cls.name in own
        for node in ast.walk(cls)
    }
    return [line for line in _kind_questions(tree, kinds) if not _at_line_in(tree, line, inside)]


def _at_line_in(tree: ast.AST, line: int, inside: set[int]) -> bool:
    return any(
        isinstance(n, ast.Call) and n.lineno == line and id(n) in inside for n in ast.walk(tree)
    )


def test_the_engine_asks_no_job_its_kind():
    kinds, own = _job_kinds()
    assert {"AdoptJob", "HostCopyJob", "RingJob", "JobPart", "Chunk"} <= kinds
    assert {"AdoptJob", "HostCopyJob", "RingJob"} <= own
    found = [
        f"{name}:{line}"
        for name in sorted(MODULES)
        if _under(name, "loader.pipeline")
        for line in _pipeline_kind_questions(
            ast.parse(_path(name).read_text(encoding="utf-8")), kinds, own
        )
    ]
    assert not found, f"isinstance of a job, part or work kind outside the job types: {found}"


def test_the_job_kind_check_can_fail():
    kinds, own = _job_kinds()
    asked = "def f(work):\n    return isinstance(work.job, RingJob)\n"
    assert _pipeline_kind_questions(ast.parse(asked), kinds, own) == [2]
    inside = "class RingJob:\n    def read(self, part):\n        return isinstance(part, Chunk)\n"
    assert _pipeline_kind_questions(ast.parse(inside), kinds, own) == []


def _protocol_members(module: str, names: set[str]) -> set[str]:
    """The members (methods, properties, attributes) of the protocols `names` of `module`."""
    members: set[str] = set()
    for cls in _classes(module):
        if cls.name in names:
            members |= {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
            members |= {
                n.target.id
                for n in cls.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
    return members


def _probes(tree: ast.AST, members: set[str]) -> list[int]:
    """The lines of `getattr(x, "m", ...)` / `hasattr(x, "m")` with `m` one of `members`."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") in ("getattr", "hasattr")
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in members
    ]


def test_no_code_probes_a_job_or_its_bytes_for_a_capability():
    """What a job, a piece of work or a tensor's bytes can do is on their protocols (`Job`,
    `Work`, `Bytes`): read it there, never by `getattr` (as `maps` and `mapped` once were)."""
    members = _protocol_members("loader.pipeline.jobs", {"Job", "Work", "MapsChunks"})
    members |= _protocol_members("loader.pipeline.regions", {"Bytes"})
    assert {"maps", "mapped", "parts", "device_bytes", "shares_rows"} <= members
    found = [
        f"{name}:{line}"
        for name in sorted(MODULES)
        if _under(name, "loader.pipeline")
        for line in _probes(ast.parse(_path(name).read_text(encoding="utf-8")), members)
    ]
    assert not found, f"getattr of a job's or bytes' capability: {found}"
    assert _probes(ast.parse('getattr(src, "maps", False)'), members) == [1]
