"""benchmarks/real_engines/engine_diff.py on a tiny fake engine: what it extracts, what it calls stale and new."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from benchscripts import load_script

engine_diff = load_script("real_engines/engine_diff.py")

API_SERVER = """
import logging
logger = logging.getLogger(__name__)

def run_server(args):
    logger.info("vLLM server version %s, serving model %s", VERSION, args.model)
    logger.info(f"Starting vLLM server on {addr}")
    if args.port < 0:
        raise ValueError(f"Invalid port {args.port}: " + "must be positive")
    logger.error("Engine core initialization failed. See root cause above.")
    logger.error("Frobnicator exploded while warming %s", "x")
    raise RuntimeError("Widget %d is broken" % 3)
"""

WORKER = """
def determine_available_memory(self):
    logger.info("Available KV cache memory: %.2f GiB", 1.0)
    logger.info("Loading sharded quux weights took %.2f s", 2.0)
"""

PROFILE = """
name = "vllm"

[[start]]
match = "vLLM server version"
versions = "0.15-0.33"

[[phase]]
match = "Available KV cache memory"
state = "allocating_kv_cache"

[[phase]]
match = "Capturing the model for CUDA graphs"
state = "capturing_graphs"
versions = "0.6 (V0)"

[[ready]]
match = "Application startup complete"
versions = "all (Uvicorn)"

[[error]]
match = "Engine core initialization failed"
role = "wrapper"
"""


def _tree(root: Path, *, with_v0: bool = False) -> Path:
    (root / "vllm" / "entrypoints" / "openai").mkdir(parents=True)
    (root / "vllm" / "v1" / "worker").mkdir(parents=True)
    (root / "vllm" / "entrypoints" / "openai" / "api_server.py").write_text(API_SERVER)
    (root / "vllm" / "v1" / "worker" / "gpu_worker.py").write_text(WORKER)
    (root / "vllm" / "tests").mkdir()
    (root / "vllm" / "tests" / "test_x.py").write_text('x = "Capturing the model for CUDA graphs"\n')
    if with_v0:
        (root / "vllm" / "worker").mkdir()
        (root / "vllm" / "worker" / "model_runner.py").write_text(
            'logger.info("Capturing the model for CUDA graphs. This may lead to OOM")\n'
        )
    return root


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    p = tmp_path / "vllm.toml"
    p.write_text(PROFILE)
    return p


def test_python_messages_render_fstrings_concatenation_and_percent() -> None:
    msgs = engine_diff.extract_messages("vllm/entrypoints/openai/api_server.py", API_SERVER)
    texts = {(m.level, m.exc, m.text) for m in msgs}
    assert ("info", "", "vLLM server version %s, serving model %s") in texts
    assert ("info", "", "Starting vLLM server on {}") in texts
    assert ("raise", "ValueError", "Invalid port {}: must be positive") in texts
    assert ("raise", "RuntimeError", "Widget %d is broken") in texts


def test_cpp_go_rust_messages() -> None:
    cpp = 'SRV_INF("%s", "model loaded\\n");\nLOG_ERR("%s: failed to load model" " %s\\n", __func__, p);\n'
    go = 'slog.Info("starting llama-server", "cmd", cmd)\nreturn fmt.Errorf("llama-server process has terminated: %s", msg)\n'
    rs = '#[error("Shard cannot start")]\nShardCannotStart,\ntracing::info!("Connected");\n'
    got = {
        (m.level, m.text)
        for path, text in (("s/server.cpp", cpp), ("llm/x.go", go), ("router/src/main.rs", rs))
        for m in engine_diff.extract_messages(path, text)
    }
    assert ("info", "%s") in got  # SRV_INF's format string; the literal is its argument
    assert ("error", "%s: failed to load model %s") in got  # adjacent literals joined
    assert ("info", "starting llama-server") in got
    assert ("raise", "llama-server process has terminated: %s") in got
    assert ("raise", "Shard cannot start") in got
    assert ("info", "Connected") in got


def test_stale_external_and_new_candidates(tmp_path: Path, profile: Path) -> None:
    release = engine_diff.read_release(_tree(tmp_path / "rel"), "vllm", "9.9")
    assert "vllm/tests/test_x.py" not in release.files  # tests are not the engine's source
    rules = engine_diff.load_rules("vllm", profile)
    d = engine_diff.diff_release(release, rules)
    assert [s["match"] for s in d.stale] == ["Capturing the model for CUDA graphs"]
    assert [s["match"] for s in d.external] == ["Application startup complete"]
    fatal = [str(r["printed"]) for r in d.new_fatal]
    # covered by a rule: not new; the analyzer's own categories are imported when the package is there
    assert not any("Engine core initialization failed" in f for f in fatal)
    assert "Frobnicator exploded while warming %s" in fatal
    assert "RuntimeError: Widget %d is broken" in fatal
    phase = [str(r["printed"]) for r in d.new_phase]
    assert "Loading sharded quux weights took %.2f s" in phase
    assert not any("Available KV cache memory" in p for p in phase)
    assert all(str(r["where"]).count(":") == 1 for r in d.new_fatal + d.new_phase)


def test_presence_across_releases_and_archives(tmp_path: Path, profile: Path) -> None:
    old = _tree(tmp_path / "old", with_v0=True)
    new = _tree(tmp_path / "new")
    wheel = tmp_path / "vllm-9.9.0-cp38-abi3-manylinux1_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for f in new.rglob("*.py"):
            z.write(f, f.relative_to(new).as_posix())
    assert engine_diff.release_label(wheel) == "9.9.0"
    releases = [
        engine_diff.read_release(old, "vllm", "0.6.3"),
        engine_diff.read_release(wheel, "vllm"),
    ]
    rows = {r["match"]: r for r in engine_diff.presence(releases, engine_diff.load_rules("vllm", profile))}
    assert rows["Capturing the model for CUDA graphs"]["in"] == ["0.6.3"]
    assert rows["Capturing the model for CUDA graphs"]["file"] == "vllm/worker/model_runner.py"
    assert rows["vLLM server version"]["in"] == ["0.6.3", "9.9.0"]
    assert engine_diff._span(["0.6.3", "9.9.0"], ["0.6.3", "7.0", "9.9.0"]) == "0.6.3, 9.9.0"
    assert engine_diff._span(["0.6.3", "7.0"], ["0.6.3", "7.0", "9.9.0"]) == "0.6.3-7.0"


def test_template_can_print_a_literal_that_spans_a_placeholder() -> None:
    # f"{server_args=}" prints "server_args=ServerArgs(model_path=...)"
    assert engine_diff.template_can_print("server_args={}", "server_args=ServerArgs(")
    assert engine_diff.template_can_print("Capture cuda graph end. Time elapsed: {} s", "graph end")
    assert not engine_diff.template_can_print("Capture {} begin", "Capture cuda graph begin")


def test_main_prints_a_report(tmp_path: Path, profile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rel = _tree(tmp_path / "rel")
    assert engine_diff.main(["vllm", str(rel), "--label", "9.9", "--profile", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "== vllm 9.9:" in out
    assert "stale (1)" in out
    assert "'Capturing the model for CUDA graphs'" in out


def test_a_literal_that_outlived_its_line_is_named(tmp_path: Path, profile: Path) -> None:
    """vLLM 0.34 raises "vLLM's model runner requires Triton." where 0.33 raised "Model Runner V2 requires
    Triton.": the literal of 0.33's rule is still in the source, its regex is not; the span says so, for the
    release where the regex no longer holds only."""
    rules = profile.read_text() + (
        '\n[[error]]\nmatch = "requires Triton."\nregex = "Model Runner V2 requires Triton\\\\."\n'
        'category = "config"\n'
    )
    profile.write_text(rules)
    releases = []
    for label, line in (
        ("0.33.0", "Model Runner V2 requires Triton."),
        ("0.34.0", "vLLM's model runner requires Triton."),
    ):
        root = _tree(tmp_path / label)
        with (root / "vllm" / "v1" / "worker" / "gpu_worker.py").open("a") as f:
            f.write(f"\ndef check():\n    raise ValueError({line!r})\n")
        releases.append(engine_diff.read_release(root, "vllm", label))
    matrix = engine_diff.presence(releases, engine_diff.load_rules("vllm", profile))
    rows = {r["match"]: r for r in matrix}
    assert rows["requires Triton."]["in"] == ["0.33.0", "0.34.0"]
    assert rows["requires Triton."]["literal_only"] == ["0.34.0"]
    assert rows["vLLM server version"]["literal_only"] == []  # no regex: nothing to check
    text = engine_diff.report("vllm", [], matrix, ["0.33.0", "0.34.0"], 40)
    assert "'requires Triton.': 0.33.0-0.34.0 (regex caught by no template in: 0.34.0)" in text


def test_logs_lines_the_new_release_cannot_print(tmp_path: Path) -> None:
    """--logs: a captured line that the old release's source prints and the new one's does not (V1's 'Starting to
    load model', gone in vLLM 0.34) is named; one both print is not; one neither prints is not counted."""
    runner = 'logger.info("Starting to load model %s...", m)\nlogger.info("Model loading took %s GiB", x)\n'
    old, new = tmp_path / "old" / "vllm", tmp_path / "new" / "vllm"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    (old / "runner.py").write_text(runner)
    (new / "runner.py").write_text(runner.replace("Starting to load model", "Loading model from scratch"))
    log = tmp_path / "captured-x.log"
    log.write_text(
        "(Worker pid=2) INFO 12-02 01:17:57 [cpu_model_runner.py:68] Starting to load model /tmp/eng/tiny...\n"
        "(Worker pid=2) INFO 12-02 01:17:58 [cpu_model_runner.py:90] Model loading took 0.1 GiB\n"
        "(Worker pid=2) INFO 12-02 01:17:58 [core.py:9] a message built before its call\n"
        "plain output without a tag\n"
    )
    releases = [engine_diff.read_release(t, "vllm", t.parent.name) for t in (old.parent, new.parent)]
    total, printed, rows = engine_diff.unprintable(releases, [log])
    assert (total, printed) == (3, 2)
    assert [(r["message"], r["tag"], r["was"]) for r in rows] == [
        ("Starting to load model /tmp/eng/tiny...", "cpu_model_runner.py", "vllm/runner.py:1")
    ]
