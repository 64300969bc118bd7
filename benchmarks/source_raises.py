"""What category an engine's own checks get: every `raise Class("message")` of its source, read as a crash.

    python benchmarks/source_raises.py ROOT [--engine sglang] [--under srt/] [--others] [--json]

ROOT is an unpacked wheel's package folder (`pip download sglang==0.5.9 --no-deps -d /tmp/w && cd /tmp/w && unzip
-q sglang-*.whl 'sglang/*'`, then ROOT=/tmp/w/sglang). Each `raise Name(<literal or f-string>)` under ROOT/UNDER
is taken once per (class, message): its message with each f-string hole filled with `8`, raised in its own file and
function under the scheduler's frames of a launch that printed its `server_args=` line, and replayed with ENGINE's
profile. The table counts the categories; `--others` lists those called `other` (file, function, message), the
checks no rule reads yet: what to read when adding a `[[category]]` rule (docs/categories.md). The messages are the
source's, not a log's: a figure of coverage, not of accuracy. Exit 0 always.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import collections
import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from watchdog.follow.replay import replay_path

__all__ = ["RaiseSite", "categorize_sites", "main", "raise_sites"]

# where the sites are placed in the synthetic traceback: an engine's installed package
_SITE = "/usr/local/lib/python3.12/dist-packages"


@dataclass
class RaiseSite:
    """One `raise Name("...")`: where it is, the class and the message (f-string holes as 8), and its category."""

    path: str
    line: int
    function: str
    cls: str
    message: str
    category: str = ""


def _text(node: ast.expr) -> str | None:
    # the message a raise's first argument makes, with each f-string hole as "8"; None where it is not a string
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "8" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return left + right if left is not None and right is not None else None
    return None


class _Raises(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.functions: list[str] = []
        self.found: list[RaiseSite] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Raise(self, node: ast.Raise) -> None:
        call = node.exc
        if isinstance(call, ast.Call) and call.args:
            func = call.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else None
            )
            message = _text(call.args[0])
            if name and message:
                where = self.functions[-1] if self.functions else "<module>"
                self.found.append(RaiseSite(self.path, node.lineno, where, name, message.split("\n")[0]))


def raise_sites(root: Path, under: str = "") -> list[RaiseSite]:
    """Every `raise Name(<string>)` of the Python files under `root`/`under`, once per (class, message)."""
    sites: dict[tuple[str, str], RaiseSite] = {}
    for file in sorted((root / under).rglob("*.py")):
        try:
            tree = ast.parse(file.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        visitor = _Raises(f"{root.name}/{file.relative_to(root).as_posix()}")
        visitor.visit(tree)
        for site in visitor.found:
            sites.setdefault((site.cls, site.message), site)
    return list(sites.values())


def _launch(site: RaiseSite) -> str:
    # a builtin class prints bare; another with its module, as Python's traceback does
    cls = site.cls if hasattr(builtins, site.cls) else f"{site.path[:-3].replace('/', '.')}.{site.cls}"
    return (
        "[2026-01-20 10:02:11] server_args=ServerArgs(model_path='/models/m', tp_size=1)\n"
        "[2026-01-20 10:02:31 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{_SITE}/sglang/srt/managers/scheduler.py", line 2841, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        f'  File "{_SITE}/{site.path}", line {site.line}, in {site.function}\n'
        f"    raise {site.cls}(\n"
        f"{cls}: {site.message}\n"
        "\n"
        "[2026-01-20 10:02:31] Received sigquit from a child process. It usually means the child failed.\n"
    )


def categorize_sites(sites: list[RaiseSite], engine: str) -> list[RaiseSite]:
    """Each site's category: its raise replayed as a crash with `engine`'s profile (`none` where no crash)."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "launch.log"
        for site in sites:
            log.write_text(_launch(site), encoding="utf-8")
            error = replay_path(log, engine)[1].error
            site.category = error.category.value if error is not None else "none"
    return sites


def main(argv: list[str] | None = None) -> int:
    """Print the categories of ROOT's raise sites (or, with --json, each site); exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="an unpacked wheel's package folder (…/sglang)")
    parser.add_argument("--engine", default="sglang", help="the profile to read them with (default sglang)")
    parser.add_argument(
        "--under", default="srt/", help="only the files under this folder of ROOT (default srt/)"
    )
    parser.add_argument("--others", action="store_true", help="list the sites called other")
    parser.add_argument("--json", action="store_true", help="one JSON list of every site")
    args = parser.parse_args(argv)
    sites = categorize_sites(raise_sites(args.root, args.under), args.engine)
    if args.json:
        json.dump([asdict(s) for s in sites], sys.stdout, indent=1)
        print()
        return 0
    counts = collections.Counter(s.category for s in sites)
    print(f"{len(sites)} distinct raise messages under {args.root / args.under}")
    for category, n in counts.most_common():
        print(f"  {category:12} {n:5}  {100 * n / len(sites):5.1f}%")
    if args.others:
        for s in sites:
            if s.category == "other":
                print(f"  {s.path}:{s.line} {s.function}: {s.cls}: {s.message[:120]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
