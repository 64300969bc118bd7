"""The package's layers (docs/architecture.md), checked over the import graph of its source.

Every import counts: at module level, inside a function (a lazy import) and under `TYPE_CHECKING`. A module
may import its own subpackage and the layers below its own, never one above nor a sibling of the same
level; there are no import circles; the pure core imports no I/O library and reads no clock; and the words
of `watchdog.vocabulary` are not written out again elsewhere.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import watchdog.vocabulary as vocabulary
from watchdog.vocabulary import ENGINES, Category, State

PACKAGE = Path(vocabulary.__file__).parent

# Top to bottom; the parts of one tuple are independent of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("replay", "launch", "sources"),  # deprecated import paths, for one release: nothing imports them
    ("cli",),
    ("daemon",),
    ("config",),
    ("alerts", "follow"),
    ("store", "clock", "httpclient", "backoff"),
    ("core",),
    ("profiles",),
    ("vocabulary", "exceptions", "jsontext"),
)
LEVEL = {part: level for level, parts in enumerate(LAYERS) for part in parts}
# What the core may not import: the core reads bytes and time given to it, it fetches neither.
IO_MODULES = {
    "aiohttp", "anyio", "asyncio", "asyncssh", "os", "pathlib", "prometheus_client", "select",
    "shutil", "socket", "sqlite3", "ssl", "structlog", "subprocess", "tenacity", "threading", "time",
}  # fmt: skip


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in module `name`; a `from X import y` of a submodule gives X.y."""
    path = MODULES[name]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                yield (full if full in MODULES else module), node.lineno


def _ours(name: str) -> Iterator[tuple[str, int]]:
    for module, line in _imports(name):
        if module in MODULES and module != name and module != "watchdog":
            yield module, line


def _part(name: str) -> str:
    return name.split(".")[1]


def test_every_module_has_a_layer() -> None:
    """A new top-level module or subpackage is placed in LAYERS (and in docs/architecture.md)."""
    assert {_part(m) for m in MODULES if m != "watchdog"} <= set(LEVEL)


def test_imports_go_down_the_layers_only() -> None:
    """No module imports a layer above its own, nor a sibling of its level."""
    wrong = [
        f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}: {name} -> {module}"
        for name in MODULES
        if name != "watchdog"
        for module, line in _ours(name)
        if _part(module) != _part(name) and LEVEL[_part(module)] <= LEVEL[_part(name)]
    ]
    assert wrong == []


def test_no_import_circles() -> None:
    """The module graph has no cycle (Tarjan's strongly connected components, each of one module)."""
    graph = {name: sorted({m for m, _ in _ours(name)}) for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    # a package's __init__ re-exporting its own modules is not a circle of meaning
    cycles = [
        c for c in cycles if not all(m.startswith(min(c, key=len) + ".") or m == min(c, key=len) for m in c)
    ]
    assert cycles == []


@pytest.mark.parametrize(
    "name", sorted(m for m in MODULES if m.startswith(("watchdog.core", "watchdog.vocabulary")))
)
def test_the_core_does_no_io(name: str) -> None:
    """The core (and the vocabulary under it) imports no I/O library, no clock and no network code."""
    assert sorted({m for m, _ in _imports(name) if m.split(".")[0] in IO_MODULES}) == []


def _words() -> dict[str, str]:
    words = {s.value: "State" for s in State}
    words |= {c.value: "Category" for c in Category}
    words |= dict.fromkeys(ENGINES, "ENGINES")
    return words


def _reached(name: str) -> set[str]:
    """The package's modules that module `name` reaches through any chain of imports, itself included."""
    seen, todo = {name}, [name]
    while todo:
        for module, _ in _ours(todo.pop()):
            if module not in seen:
                seen.add(module)
                todo.append(module)
    return seen


def _imported_names(name: str) -> Iterator[str]:
    # every name an import of module `name` binds, dotted in full: `from importlib import resources` too
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _banned(imported: str) -> bool:
    return imported.split(".", maxsplit=1)[0] in IO_MODULES | {"tomllib"} or imported.startswith(
        "importlib.resources"
    )


def _file_reads(name: str) -> list[str]:
    # What reading a file looks like: open(), any .read_text() / .read_bytes(), and the .open() of a path (a
    # Path(...) or joinpath(...) call, or a name that says path or file: the core's other .open() are its own)
    path = MODULES[name]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append(f"{name}:{node.lineno}: open()")
        elif isinstance(func, ast.Attribute) and func.attr in {"read_text", "read_bytes"}:
            found.append(f"{name}:{node.lineno}: .{func.attr}()")
        elif isinstance(func, ast.Attribute) and func.attr == "open" and _path_like(func.value):
            found.append(f"{name}:{node.lineno}: .open()")
    return found


def _path_like(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        callee = node.func
        called = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", "")
        return called in {"Path", "PurePath", "joinpath", "files"}
    text = ast.unparse(node).lower()
    return "path" in text or "file" in text


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith("watchdog.core")))
def test_the_core_reaches_no_io_through_any_chain(name: str) -> None:
    """Whatever a core module imports, and what that imports in turn, imports no I/O library, no TOML parser
    and no package resources, and reads no file: profiles reach the core as data, parsed outside it."""
    reached = _reached(name)
    io = sorted({f"{m} -> {i}" for m in reached for i in _imported_names(m) if _banned(i)})
    assert io == []
    assert [read for m in sorted(reached) for read in _file_reads(m)] == []
    assert "watchdog.profiles.loader" not in reached


def test_the_vocabulary_is_not_written_out_again() -> None:
    """No tuple, list, set or dict literal outside vocabulary.py holds two or more of its words (states,
    categories, engines): such a literal is a copy that drifts. Derive it from `watchdog.vocabulary`."""
    words = _words()
    copies = []
    for name, path in MODULES.items():
        if name == "watchdog.vocabulary":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            items: list[ast.expr | None] = []
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                items = list(node.elts)
            elif isinstance(node, ast.Dict):
                items = list(node.keys)
            found = {i.value for i in items if isinstance(i, ast.Constant) and i.value in words}
            if len(found) >= 2:
                copies.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {sorted(found)}")
    assert copies == []


_ENUMS: dict[str, type[State] | type[Category]] = {"State": State, "Category": Category}
# the vocabulary's collections of states or categories, by name: `(*STARTUP_PHASES, State.READY)` is a new set
_COLLECTIONS = {
    name: (type(value[0]).__name__, len(value))
    for name, value in vars(vocabulary).items()
    if isinstance(value, tuple) and value and all(isinstance(v, State | Category) for v in value)
}


def _members(node: ast.expr) -> tuple[str, int] | None:
    """(enum, how many members) that one item of a display stands for: `State.X`, `State.X.value`, "x", or a
    starred collection of the vocabulary."""
    if isinstance(node, ast.Starred):
        name = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
        return _COLLECTIONS.get(name)
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in _ENUMS:
        return node.value.id, 1
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return next(
            ((name, 1) for name, enum in _ENUMS.items() if node.value in enum._value2member_map_), None
        )
    return None


def _sets_of_members(source: str) -> list[str]:
    """Each tuple, list or set display in `source` (in an `in (...)` test too) that holds two or more members
    of State, or of Category, as members or as their values: "line: enum"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            counts: dict[str, int] = {}
            for item in node.elts:
                if (m := _members(item)) is not None:
                    counts[m[0]] = counts.get(m[0], 0) + m[1]
            found += [f"{node.lineno}: {enum}" for enum, n in counts.items() if n >= 2]
    return found


def test_no_set_of_states_or_categories_is_written_out_again() -> None:
    """No module but vocabulary.py writes out a set of two or more states, or of categories (as members or
    their values): each such set means something, and has its name in `watchdog.vocabulary`."""
    copies = [
        f"{path.relative_to(PACKAGE.parent)}:{where}"
        for name, path in MODULES.items()
        if name != "watchdog.vocabulary"
        for where in _sets_of_members(path.read_text())
    ]
    assert copies == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param("x in (State.READY, State.CRASHED)", ["1: State"], id="in-tuple"),
        pytest.param("S = frozenset({State.READY.value, 'stopped'})", ["1: State"], id="values"),
        pytest.param("S = (*STARTUP_PHASES, State.READY)", ["1: State"], id="starred"),
        pytest.param("S = [Category.OOM, 'cuda']", ["1: Category"], id="categories"),
        pytest.param("S = (State.READY, Category.OOM, 'x')", [], id="one-each"),
        pytest.param("S = tuple(s.value for s in SETTLED_STATES)", [], id="derived"),
    ],
)
def test_sets_of_members_are_found(source: str, found: list[str]) -> None:
    """The check above finds a written-out set of states or categories however it is spelled."""
    assert _sets_of_members(source) == found


def test_no_second_exit_code_or_version_lookup() -> None:
    """Exit codes and the version lookup live in vocabulary.py only."""
    offenders = []
    for name, path in MODULES.items():
        if name == "watchdog.vocabulary":
            continue
        text = path.read_text()
        offenders += [
            f"{name}: {m.group(0).strip()}" for m in re.finditer(r"^\s*_?EXIT_[A-Z_]+\s*=\s*\d+", text, re.M)
        ]
        if "metadata.version(" in text or ("import version" in text and "importlib.metadata" in text):
            offenders.append(f"{name}: its own version lookup")
    assert offenders == []


def test_the_status_page_script_takes_its_phases_from_the_vocabulary() -> None:
    """The page's JavaScript gets the phase list injected, not written out."""
    from watchdog.daemon.statuspage import render_page  # noqa: PLC0415

    page = render_page([], nonce="abc")
    assert (
        'const PHASES = ["starting", "loading_weights", "allocating_kv_cache", "capturing_graphs", "ready"];'
        in page
    )


def test_deadlines_are_the_deadline_states() -> None:
    """The config's `deadlines` table has a key for each state a deadline may be set for, and no other."""
    from watchdog.config.models import Deadlines  # noqa: PLC0415

    assert list(Deadlines.model_fields) == [s.value for s in vocabulary.DEADLINE_STATES]


def test_config_imports_no_ssh_http_asyncio_or_daemon_code() -> None:
    """`import watchdog.config` and the `check-config` command load no asyncio, asyncssh, aiohttp or
    daemon module: `check-config` starts fast (issue 17: under 0.3 s)."""
    loaded = _loaded(
        "watchdog.config, watchdog.cli.app, watchdog.cli.checkconfig",
        "m.split('.')[0] in ('asyncio', 'asyncssh', 'aiohttp') or m.startswith(('watchdog.daemon', "
        "'watchdog.alerts.delivery', 'watchdog.follow.follower', 'watchdog.httpclient'))",
    )
    assert loaded == "[]"


def _loaded(modules: str, which: str) -> str:
    # the modules a fresh interpreter holds, of those `which` (a condition on `m`), after importing `modules`
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = f"import sys, {modules}; print(sorted(m for m in sys.modules if {which}))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_docs_architecture_names_every_module() -> None:
    """docs/architecture.md has a line for each module (the notifiers of services share one line)."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    missing = []
    for path in MODULES.values():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("alerts/notifiers/") and rel != "alerts/notifiers/__init__.py":
            continue
        if f"`{rel}`" not in text:
            missing.append(rel)
    assert missing == []


def test_a_daemon_of_local_launches_loads_no_ssh_code() -> None:
    """The daemon's modules (service, supervisor, follower, local source, probes) load asyncssh only when an SSH
    host is configured: its ~14 MB stay out of a daemon that follows local logs (issue 31, RSS)."""
    loaded = _loaded(
        "watchdog.daemon.service, watchdog.daemon.supervisor, watchdog.follow.follower, "
        "watchdog.follow.sources.local, watchdog.follow.probes.process, watchdog.follow.probes.gpusampler",
        "m.split('.')[0] == 'asyncssh' or m.startswith(('watchdog.follow.sources.ssh', "
        "'watchdog.follow.sources.hostkeys'))",
    )
    assert loaded == "[]"
