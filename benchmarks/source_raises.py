"""What category an engine's own checks get: every `raise Class("message")` of its source, read as a crash.

    python benchmarks/source_raises.py ROOT [--engine sglang|trtllm|tgi|vllm] [--under DIR/] [--others] [--json]

ROOT is an engine's Python package folder: an unpacked wheel's (`pip download sglang==0.5.9 --no-deps -d /tmp/w && cd
/tmp/w && unzip -q sglang-*.whl 'sglang/*'`, then ROOT=/tmp/w/sglang; TensorRT-LLM's `tensorrt_llm/**/*.py`, ROOT
=.../tensorrt_llm), or a source tree's (TGI's shard is not on PyPI: `server/text_generation_server` of a checkout at
a release tag, ROOT=.../text_generation_server). Each `raise Name(<literal or f-string>)` under ROOT/UNDER (default:
`srt/` for sglang, the whole package otherwise) is taken once per (class, message): its message with each f-string
hole filled with `8`, raised in its own file and function under the frames of a launch of ENGINE that fails at
startup (SGLang's scheduler, TensorRT-LLM's executor worker, a TGI shard's serve_inner, vLLM's engine core or, for its
arguments and configs, its API server; each with the lines its
launch prints before), and replayed with ENGINE's profile. The table counts the categories; `--others` lists those
called `other` (file, function, message), the checks no rule reads yet: what to read when adding a `[[category]]`
rule (docs/categories.md). The messages are the source's, not a log's: a figure of coverage, not of accuracy.
Exit 0 always.
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


def _exception_line(site: RaiseSite) -> str:
    # a builtin class prints bare; another with its module, as Python's traceback does
    cls = site.cls if hasattr(builtins, site.cls) else f"{site.path[:-3].replace('/', '.')}.{site.cls}"
    return f"{cls}: {site.message}\n"


def _raise_frame(site: RaiseSite, where: str) -> str:
    return f'  File "{where}/{site.path}", line {site.line}, in {site.function}\n    raise {site.cls}(\n'


def _sglang_launch(site: RaiseSite) -> str:
    # the scheduler process's fatal traceback, after the launch's server_args line; its parent's sigquit line
    site_packages = "/usr/local/lib/python3.12/dist-packages"
    return (
        "[2026-01-20 10:02:11] server_args=ServerArgs(model_path='/models/m', tp_size=1)\n"
        "[2026-01-20 10:02:31 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{site_packages}/sglang/srt/managers/scheduler.py", line 2841, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        f"{_raise_frame(site, site_packages)}"
        f"{_exception_line(site)}"
        "\n"
        "[2026-01-20 10:02:31] Received sigquit from a child process. It usually means the child failed.\n"
    )


def _trtllm_launch(site: RaiseSite) -> str:
    # trtllm-serve (PyTorch backend, 1.1-1.3): the MPI worker's executor creation fails; worker_main logs the error,
    # then its traceback (executor/worker.py: logger.error(f"Failed to initialize executor on rank {mpi_rank()}:
    # {e}"), logger.error(traceback.format_exc()))
    site_packages = "/usr/local/lib/python3.12/dist-packages"
    return (
        "[TensorRT-LLM] TensorRT LLM version: 1.2.1\n"
        "[01/20/2026-10:02:11] [TRT-LLM] [I] Using LLM with PyTorch backend\n"
        f"[01/20/2026-10:02:31] [TRT-LLM] [RANK 0] [E] Failed to initialize executor on rank 0: {site.message}\n"
        "[01/20/2026-10:02:31] [TRT-LLM] [RANK 0] [E] Traceback (most recent call last):\n"
        f'  File "{site_packages}/tensorrt_llm/executor/worker.py", line 753, in worker_main\n'
        "    worker: GenerationExecutorWorker = worker_cls(\n"
        f"{_raise_frame(site, site_packages)}"
        f"{_exception_line(site)}"
    )


def _tgi_launch(site: RaiseSite) -> str:
    # text-generation-launcher 3.x: a shard's serve_inner fails (server.py logs 'Error when initializing model' and
    # the traceback, which the launcher re-emits), then the launcher's 'Shard 0 failed to start' and its exit
    stamp = "2026-01-20T10:02:"
    return (
        f'{stamp}11.000000Z  INFO text_generation_launcher: Args {{ model_id: "/models/m", num_shard: None }}\n'
        f"{stamp}12.000000Z  INFO text_generation_launcher: Starting shard rank=0\n"
        f"{stamp}22.000000Z  INFO text_generation_launcher: Waiting for shard to be ready... rank=0\n"
        f"{stamp}31.000000Z ERROR text_generation_launcher: Error when initializing model\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/src/server/text_generation_server/server.py", line 268, in serve_inner\n'
        "    model = get_model_with_lora_adapters(\n"
        f"{_raise_frame(site, '/usr/src/server')}"
        f"{_exception_line(site)}"
        f"{stamp}32.000000Z ERROR text_generation_launcher: Shard 0 failed to start\n"
        f"{stamp}32.000000Z  INFO text_generation_launcher: Shutting down shards\n"
        "Error: ShardCannotStart\n"
    )


# vLLM's modules that run in the API server before any engine process starts: the arguments and configs
# (engine/arg_utils.py create_engine_config, config/ and config.py) and the entrypoints
_VLLM_FRONT = ("vllm/config", "vllm/engine/arg_utils.py", "vllm/entrypoints/")


def _vllm_launch(site: RaiseSite) -> str:
    # vllm serve (V1, 0.10-0.34): a check of the arguments raises in the API server's create_engine_config (a plain
    # traceback, no process prefix); any other in the engine core process, which logs 'EngineCore failed to start.'
    # and its traceback line by line (v1/engine/core.py run_engine_core), then the API server's 'Engine core
    # initialization failed. See root cause above.' (v1/engine/utils.py wait_for_engine_startup)
    site_packages = "/usr/local/lib/python3.12/dist-packages"
    head = (
        "(APIServer pid=1) INFO 01-20 10:02:11 [api_server.py:1896] vLLM API server version 0.11.2\n"
        "(APIServer pid=1) INFO 01-20 10:02:11 [utils.py:233] non-default args: {'model': '/models/m'}\n"
    )
    if site.path.startswith(_VLLM_FRONT):
        # a config's check under create_engine_config; an entrypoint's in the server's own set-up
        create = (
            f'  File "{site_packages}/vllm/engine/arg_utils.py", line 1240, in create_engine_config\n'
            "    model_config = self.create_model_config()\n"
            if not site.path.startswith("vllm/entrypoints/")
            else ""
        )
        return (
            f"{head}Traceback (most recent call last):\n"
            f'  File "{site_packages}/vllm/entrypoints/openai/api_server.py", line 1953, in run_server_worker\n'
            "    async with build_async_engine_client(\n"
            f"{create}"
            f"{_raise_frame(site, site_packages)}"
            f"{_exception_line(site)}"
        )
    core = "(EngineCore_DP0 pid=2) ERROR 01-20 10:02:31 [core.py:708] "
    frames = (
        "Traceback (most recent call last):\n"
        f'  File "{site_packages}/vllm/v1/engine/core.py", line 699, in run_engine_core\n'
        "    engine_core = EngineCoreProc(*args, **kwargs)\n"
        f'  File "{site_packages}/vllm/v1/engine/core.py", line 83, in __init__\n'
        "    self.model_executor = executor_class(vllm_config)\n"
        f"{_raise_frame(site, site_packages)}"
        f"{_exception_line(site)}"
    )
    return (
        f"{head}"
        "(EngineCore_DP0 pid=2) INFO 01-20 10:02:14 [core.py:77] Initializing a V1 LLM engine (v0.11.2) with config\n"
        f"{core}EngineCore failed to start.\n"
        + "".join(f"{core}{line}\n" for line in frames.splitlines())
        + "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}\n"
    )


# each engine's launch around a raise, and the folder of its package read by default
_LAUNCHES = {"sglang": _sglang_launch, "trtllm": _trtllm_launch, "tgi": _tgi_launch, "vllm": _vllm_launch}
_UNDER = {"sglang": "srt/"}


def categorize_sites(sites: list[RaiseSite], engine: str) -> list[RaiseSite]:
    """Each site's category: its raise replayed as a crash with `engine`'s profile (`none` where no crash)."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "launch.log"
        for site in sites:
            log.write_text(_LAUNCHES[engine](site), encoding="utf-8")
            error = replay_path(log, engine)[1].error
            site.category = error.category.value if error is not None else "none"
    return sites


def main(argv: list[str] | None = None) -> int:
    """Print the categories of ROOT's raise sites (or, with --json, each site); exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="an unpacked wheel's package folder (…/sglang)")
    parser.add_argument(
        "--engine",
        default="sglang",
        choices=sorted(_LAUNCHES),
        help="the engine's launch and profile (default sglang)",
    )
    parser.add_argument(
        "--under",
        help="only the files under this folder of ROOT (default srt/ for sglang, all of ROOT otherwise)",
    )
    parser.add_argument("--others", action="store_true", help="list the sites called other")
    parser.add_argument("--json", action="store_true", help="one JSON list of every site")
    args = parser.parse_args(argv)
    under = args.under if args.under is not None else _UNDER.get(args.engine, "")
    sites = categorize_sites(raise_sites(args.root, under), args.engine)
    if args.json:
        json.dump([asdict(s) for s in sites], sys.stdout, indent=1)
        print()
        return 0
    counts = collections.Counter(s.category for s in sites)
    print(f"{len(sites)} distinct raise messages under {args.root / under}")
    for category, n in counts.most_common():
        print(f"  {category:12} {n:5}  {100 * n / len(sites):5.1f}%")
    if args.others:
        for s in sites:
            if s.category == "other":
                print(f"  {s.path}:{s.line} {s.function}: {s.cls}: {s.message[:120]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
