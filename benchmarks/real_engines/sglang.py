"""Capture SGLang's CPU startup scenarios of the corpus again, for a new release.

    python benchmarks/real_engines/sglang.py --python /tmp/eng/sglang-venv/bin/python [--only NAME ...] [--list]

`--python` is the interpreter of a venv with SGLang from PyPI. On a machine without a GPU, SGLang 0.5.23 does not
get to serving from PyPI wheels: `--device cpu` needs SGLANG_USE_CPU_ENGINE=1 and then sgl_kernel's CPU build,
which is only built from source (PyPI's sglang-kernel is a CUDA build). What these launches print on the way is
real and is what is captured here, to tests/fixtures/corpus/sglang/captured-sglang-SCENARIO-cpu.{log,timing,json}
(a label already there keeps its hand-written fields). The tiny model comes from tiny_hf_model.py (made with
--python if it is not in --work yet).

The venv used for the corpus (docs/real-engines.md): sglang 0.5.23 with --no-deps plus its pure-Python
dependencies, torch 2.14.1 and torchvision 0.29.1 (what sglang pins), triton 3.8.0, apache-tvm-ffi and
sglang-kernel 0.4.10, without the nvidia-*/flashinfer/flash-attn CUDA wheels.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/corpus/sglang"
PORT = 30000
READY = r"The server is fired up and ready to roll"
CPU_ENGINE = {"SGLANG_USE_CPU_ENGINE": "1"}


@dataclass
class Scenario:
    """One launch of `python -m sglang.launch_server`."""

    name: str
    what: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    model: str = "tiny-llama"
    hold_port: bool = False
    term_at: list[str] = field(default_factory=list)
    timeout: float = 300.0


SCENARIOS = [
    Scenario(
        "cpu-engine-env-missing",
        "--device cpu without SGLANG_USE_CPU_ENGINE=1: the scheduler builds the model with GPU code paths",
    ),
    Scenario(
        "sgl-kernel-cuda-wheel",
        "--device cpu with SGLANG_USE_CPU_ENGINE=1: PyPI's sglang-kernel is a CUDA build (libcuda.so.1)",
        env=CPU_ENGINE,
    ),
    # port-in-use is not here: with the port held, 0.5.23 on a CPU fails in the scheduler (as in
    # cpu-engine-env-missing) before it ever binds the HTTP port; add it back once SGLang serves on a CPU:
    # Scenario("port-in-use", "another program listens on the port", hold_port=True),
    Scenario("model-missing", "a model folder that does not exist", model="/tmp/eng/no-such-model"),
    Scenario("bad-dtype", "--dtype float7", args=["--dtype", "float7"]),
    Scenario(
        "context-length-too-long",
        "--context-length 8192 above the model's max_position_embeddings (2048)",
        args=["--context-length", "8192"],
    ),
    Scenario(
        "unsupported-architecture",
        "config.json names an architecture SGLang does not have",
        model="madeup-arch",
    ),
    Scenario(
        "sigterm-startup",
        "SIGTERM to the group at the scheduler's 'Init parallel begin.' (no SGLANG_USE_CPU_ENGINE)",
        term_at=[r"Init parallel begin"],
    ),
    # launches not seen before the unseen-launch measurement (docs/real-engines.md, "Unseen launches")
    Scenario(
        "hub-id-offline",
        "a hub repo id that is not in the cache, with HF_HUB_OFFLINE=1",
        model="hub:meta-llama/Llama-3.1-8B-Instruct",
    ),
    Scenario(
        "tokenizer-path-missing",
        "--tokenizer-path names a folder that does not exist",
        args=["--tokenizer-path", "/tmp/eng/no-such-tokenizer"],
    ),
    Scenario(
        "mem-fraction-over-one",
        "--mem-fraction-static 1.5",
        args=["--mem-fraction-static", "1.5"],
    ),
    Scenario(
        "chat-template-missing",
        "--chat-template names a file that does not exist",
        args=["--chat-template", "/tmp/eng/no-such-template.jinja"],
    ),
    Scenario(
        "json-override-invalid",
        "--json-model-override-args that is not JSON",
        args=["--json-model-override-args", "{rope_theta: 5}"],
    ),
    Scenario("context-length-zero", "--context-length 0", args=["--context-length", "0"]),
    Scenario("load-format-bogus", "--load-format bogus (argparse)", args=["--load-format", "bogus"]),
]


@contextlib.contextmanager
def _holding(port: int, hold: bool) -> Iterator[None]:
    if not hold:
        yield
        return
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen()
        yield


def _versions(python: str) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json\n"
        "v = {}\n"
        "for p in ('sglang', 'torch', 'transformers', 'sglang-kernel'):\n"
        "    try: v[p] = m.version(p)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(v))"
    )
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


def run(sc: Scenario, python: str, work: Path, out: Path, versions: dict[str, str]) -> dict[str, object]:
    """Capture one scenario (bounded by --timeout; a launch that becomes ready is stopped 3 s later)."""
    model = sc.model if sc.model.startswith("/") else str(work / sc.model)
    if sc.model.startswith("hub:"):  # a hub repo id, as given on the command line
        model = sc.model.removeprefix("hub:")
    command = [
        python,
        "-m",
        "sglang.launch_server",
        "--model-path",
        model,
        "--device",
        "cpu",
        "--port",
        str(PORT),
    ]
    command += sc.args
    actions = [capture._action("stop", signal.SIGTERM, READY + "+3")]
    actions += [capture._action("term", signal.SIGTERM, spec) for spec in sc.term_at]
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **sc.env}
    with _holding(PORT, sc.hold_port):
        return capture.capture(
            f"captured-sglang-{sc.name}-cpu",
            command,
            out,
            engine="sglang",
            actions=actions,
            timeout=sc.timeout,
            env=env,
            versions=versions,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, make the model if needed, capture the scenarios asked for."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", required=True, help="the python of a venv with sglang")
    ap.add_argument("--work", type=Path, default=Path("/tmp/eng"))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        for sc in SCENARIOS:
            print(f"{sc.name:28} {sc.what}")
        return 0
    with contextlib.suppress(OSError):
        os.nice(10)
    versions = _versions(args.python)
    if not (args.work / "tiny-llama" / "model.safetensors").exists():
        maker = Path(__file__).resolve().parent / "tiny_hf_model.py"
        subprocess.run([args.python, str(maker), str(args.work / "tiny-llama")], check=True)
    arch = args.work / "madeup-arch"  # the same variant vllm.py makes
    if not (arch / "model.safetensors").exists():
        shutil.copytree(args.work / "tiny-llama", arch, dirs_exist_ok=True)
        cfg = json.loads((arch / "config.json").read_text())
        cfg["architectures"] = ["TinyMadeUpForCausalLM"]
        (arch / "config.json").write_text(json.dumps(cfg, indent=2))
    for sc in SCENARIOS:
        if args.only and sc.name not in args.only:
            continue
        rec = run(sc, args.python, args.work, args.out, versions)
        keys = ("exit", "signal", "actions", "seconds", "lines")
        print(sc.name, json.dumps({k: rec[k] for k in keys}), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
