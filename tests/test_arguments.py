"""Launch arguments (`watchdog.core.arguments` and the profiles' [[arguments]] rules): each engine's own dump of
its arguments, from real corpus logs, read as (name, flag, value), safely, credentials redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.arguments import REDACTED, Argument, from_command, merge, parse_arguments, unclosed
from watchdog.core.verdict import build_verdict
from watchdog.exceptions import ConfigError
from watchdog.profiles.loader import load_engine
from watchdog.profiles.model import parse_profile

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def _line(path: str, marker: str) -> str:
    """The first line of corpus log `path` that holds `marker`, from the marker on."""
    for line in (CORPUS / path).read_text(encoding="utf-8", errors="replace").splitlines():
        if marker in line:
            return line[line.index(marker) :]
    raise AssertionError(f"{marker!r} not in {path}")


def _values(args: tuple[Argument, ...]) -> dict[str, str]:
    return {a.name: a.value for a in args}


def test_sglang_serverargs_repr_reads_as_kebab_flags() -> None:
    """SGLang's `server_args=ServerArgs(...)` (a dataclass repr) gives each field, its flag in kebab case, its
    string values without their quotes and other values as written."""
    text = _line("sglang/ready-llama31-8b-single-gpu-docs-v041.log", "ServerArgs(")
    args = parse_arguments(text, "python-kwargs", flags="kebab")
    values = _values(args)
    assert values["model_path"] == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert values["mem_fraction_static"] == "0.88"
    assert values["tp_size"] == "1"
    assert values["api_key"] == "None"
    mem = next(a for a in args if a.name == "mem_fraction_static")
    assert mem.flag == "--mem-fraction-static"
    assert len(args) > 80


def test_a_dump_read_again_gives_the_arguments_made_the_first_time() -> None:
    """A crash loop prints the same dump at every start: it is read once, and each start's copy (another string
    of the same text) gives the very arguments the first one gave; another dump is read on its own."""
    text = _line("sglang/ready-llama31-8b-single-gpu-docs-v041.log", "ServerArgs(")
    first = parse_arguments(text, "python-kwargs", flags="kebab")
    again = parse_arguments("".join(list(text)), "python-kwargs", flags="kebab")
    assert again is first
    other = parse_arguments(text.replace("tp_size=1", "tp_size=2"), "python-kwargs", flags="kebab")
    assert _values(other)["tp_size"] == "2"
    assert _values(first)["tp_size"] == "1"


def test_sglang_server_args_dict_reads_every_key() -> None:
    """SGLang 0.5.19+'s `server_args={...}` (a dict) gives the same names; nested dicts and lists stay whole."""
    text = _line("sglang/captured-sglang-mem-fraction-over-one-cpu.log", "server_args={")
    values = _values(parse_arguments(text.removeprefix("server_args="), "python-dict", flags="kebab"))
    assert values["mem_fraction_static"] == "1.5"
    assert values["model_path"] == "/tmp/eng/tiny-llama"
    assert values["model_loader_extra_config"] == "{}"
    assert len(values) > 500


def test_vllm_non_default_args_keep_nested_values_whole() -> None:
    """vLLM's `non-default args: {...}` keeps a nested dict value as written and reads booleans as written."""
    text = _line(
        "vllm/vllm-tp4-incomplete-flashinfer-allreduce-nvcc-fail-warning-v0.19-foamstandards.log",
        "{'model_tag'",
    )
    values = _values(parse_arguments(text, "python-dict", flags="kebab"))
    assert values["default_chat_template_kwargs"] == "{'enable_thinking': False}"
    assert values["enable_auto_tool_choice"] == "True"
    assert values["tool_call_parser"] == "hermes"


def test_tgi_pretty_debug_struct_over_many_lines() -> None:
    """TGI's `Args {` pretty Debug struct is unclosed on its first line and reads whole once its brace closes:
    Rust strings unquoted, `None`, enum variants and lists as written."""
    log = (CORPUS / "tgi/tgi-ready-v3-router-python-tokenizer-error-noise-zephyr-delavande.log").read_text()
    start = log.index("Args {")
    first = log[start : log.index("\n", start)]
    whole = log[start : log.index("\n}\n", start) + 2]
    assert unclosed(first)
    assert not unclosed(whole)
    values = _values(parse_arguments(whole, "rust-debug", flags="kebab"))
    assert values["model_id"] == "HuggingFaceH4/zephyr-7b-beta"
    assert values["cuda_memory_fraction"] == "1.0"
    assert values["usage_stats"] == "On"
    assert values["cors_allow_origin"] == "[]"
    assert values["max_batch_prefill_tokens"] == "None"


def test_trtllm_pytorch_config_repr() -> None:
    """TensorRT-LLM's `PyTorchConfig(...)` reads as config fields (flags as the names)."""
    text = _line(
        "trtllm/trtllm-serve-ready-1.1.0rc3-pytorch-gptoss120b-dgx-spark-jeansblog.log", "PyTorchConfig("
    )
    args = parse_arguments(text, "python-kwargs")
    values = _values(args)
    assert values["use_cuda_graph"] == "True"
    assert values["cuda_graph_batch_sizes"].startswith("[1, 2, 4, 8")
    assert all(a.flag == a.name for a in args)


def test_ollama_server_config_go_map() -> None:
    """Ollama's `server config env="map[...]"` reads each OLLAMA_* setting; an empty value stays empty and a
    bracketed list with spaces stays one value."""
    text = _line("ollama/ollama-ready-listening-windows-0.2.7-issue5816.log", "map[")
    values = _values(parse_arguments(text, "go-map"))
    assert values["CUDA_VISIBLE_DEVICES"] == ""
    assert values["OLLAMA_HOST"].startswith("http://")
    assert values["OLLAMA_ORIGINS"].startswith("[http://localhost https://localhost")
    assert values["OLLAMA_ORIGINS"].endswith("]")


@pytest.mark.parametrize(
    ("path", "engine", "name", "value"),
    [
        pytest.param("sglang/ready-llama31-8b-single-gpu-docs-v041.log", "sglang", "mem_fraction_static", "0.88", id="sglang-repr"),
        pytest.param("sglang/captured-sglang-mem-fraction-over-one-cpu.log", "sglang", "mem_fraction_static", "1.5", id="sglang-dict"),
        pytest.param("vllm/vllm-v1-incomplete-starting-qwen3vl-issue27466.log", "vllm", "port", "8080", id="vllm"),
        pytest.param("tgi/tgi-ready-v3-router-python-tokenizer-error-noise-zephyr-delavande.log", "tgi", "model_id", "HuggingFaceH4/zephyr-7b-beta", id="tgi"),
        pytest.param("trtllm/trtllm-serve-ready-1.1.0rc3-pytorch-gptoss120b-dgx-spark-jeansblog.log", "trtllm", "use_cuda_graph", "True", id="trtllm"),
        pytest.param("ollama/ollama-ready-listening-windows-0.2.7-issue5816.log", "ollama", "OLLAMA_MAX_QUEUE", "512", id="ollama"),
        pytest.param("llamacpp/captured-llamacpp-killed-warmup-cpu.log", "llamacpp", "n_ctx", "4096", id="llamacpp-context"),
        pytest.param("llamacpp/captured-llamacpp-killed-warmup-cpu.log", "llamacpp", "n_threads", "2", id="llamacpp-system-info"),
    ],
)  # fmt: skip
def test_replay_finds_each_engines_argument_dump(path: str, engine: str, name: str, value: str) -> None:
    """A replay of a real log (engine detected) gives the verdict the arguments its engine's dump said."""
    analyzer = Analyzer(load_engine(None))
    analyzer.feed((CORPUS / path).read_bytes(), 0.0)
    analyzer.finish(0.0)
    verdict = build_verdict(analyzer)
    assert verdict.engine == engine
    assert _values(verdict.arguments)[name] == value


def test_credentials_are_redacted_at_parse() -> None:
    """An API key or token in a dump never leaves the core: its value is `<redacted>` (a None key stays None)."""
    text = (
        "ServerArgs(model_path='m', api_key='s3cret-value', hf_token=None, admin_api_key='abc', x='hf_"
        + "a" * 30
        + "')"
    )
    values = _values(parse_arguments(text, "python-kwargs"))
    assert values == {
        "model_path": "m",
        "api_key": REDACTED,
        "hf_token": "None",
        "admin_api_key": REDACTED,
        "x": REDACTED,
    }
    argv = _values(from_command(["python3", "-m", "sglang.launch_server", "--api-key", "k3y", "--tp", "8"]))
    assert argv == {"-m": "sglang.launch_server", "--api-key": REDACTED, "--tp": "8"}


@pytest.mark.parametrize(
    ("text", "syntax", "expected"),
    [
        pytest.param("Namespace(a=1, b='x, y', c=[1, 2], d={'k': (1, 2)})", "python-kwargs", {"a": "1", "b": "x, y", "c": "[1, 2]", "d": "{'k': (1, 2)}"}, id="brackets-and-quotes"),
        pytest.param("ServerArgs(load_format=<LoadFormat.AUTO: 'auto'>, n=2)", "python-kwargs", {"load_format": "<LoadFormat.AUTO: 'auto'>", "n": "2"}, id="enum-repr"),
        pytest.param("{'a': 'it\\'s', \"b\": None}", "python-dict", {"a": "it's", "b": "None"}, id="escaped-quote"),
        pytest.param("Args { a: Some(\"x\"), b: [1, 2] }", "rust-debug", {"a": "Some(\"x\")", "b": "[1, 2]"}, id="rust-one-line"),
        pytest.param("ServerArgs(a=1, b='x", "python-kwargs", {"a": "1", "b": "'x"}, id="cut-short"),
        pytest.param("__import__('os').system('true')", "python-kwargs", {}, id="code-is-not-evaluated"),
        pytest.param("no dump here", "python-dict", {}, id="nothing"),
        pytest.param("llama-server -m /m.gguf -c 4096 --flash-attn --port=8080", "argv", {"-m": "/m.gguf", "-c": "4096", "--flash-attn": "true", "--port": "8080"}, id="argv"),
    ],
)  # fmt: skip
def test_syntaxes_read_safely(text: str, syntax: str, expected: dict[str, str]) -> None:
    """Each syntax cuts at commas outside brackets and quotes, keeps values as written, evaluates nothing."""
    assert _values(parse_arguments(text, syntax)) == expected


def test_merge_replaces_in_place_and_appends() -> None:
    """Arguments found one a line (llama.cpp) merge: a name seen again takes its new value in place."""
    a, b = Argument("n_ctx", "n_ctx", "512"), Argument("n_batch", "n_batch", "2048")
    assert merge((a, b), (Argument("n_ctx", "n_ctx", "4096"), Argument("x", "x", "1"))) == (
        Argument("n_ctx", "n_ctx", "4096"),
        b,
        Argument("x", "x", "1"),
    )


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        pytest.param({"match": "args", "regex": "args (?P<args>.*)", "syntax": "yaml"}, "syntax", id="unknown-syntax"),
        pytest.param({"match": "args", "regex": "args (?P<x>.*)", "syntax": "python-dict"}, "regex", id="no-args-group"),
        pytest.param({"match": "a", "regex": "a (?P<name>\\w+)", "syntax": "line"}, "regex", id="line-without-value"),
        pytest.param({"match": "args", "regex": "args (?P<args>.*)", "syntax": "argv", "flags": "snake"}, "flags", id="unknown-flags"),
    ],
)  # fmt: skip
def test_profile_arguments_rules_are_checked(rule: dict[str, str], error: str) -> None:
    """An [[arguments]] rule names a known syntax and flag style and the regex groups its syntax reads."""
    with pytest.raises(ConfigError, match=error):
        parse_profile({"name": "mine", "arguments": [rule]}, "mine.toml")


def test_syntax_only_on_arguments_rules_and_volatile_is_a_list() -> None:
    """`syntax` belongs to [[arguments]] rules only; `volatile_arguments` is a list of names."""
    with pytest.raises(ConfigError, match="only on an"):
        parse_profile({"name": "mine", "phase": [{"match": "x", "state": "starting", "syntax": "argv"}]}, "p")
    with pytest.raises(ConfigError, match="volatile_arguments"):
        parse_profile({"name": "mine", "volatile_arguments": "random_seed"}, "p")
    assert parse_profile({"name": "mine", "volatile_arguments": ["seed"]}, "p").volatile_arguments == (
        "seed",
    )


def _tgi_replay(data: bytes) -> Analyzer:
    analyzer = Analyzer(load_engine("tgi"))
    analyzer.feed(data, 0.0)
    analyzer.finish(0.0)
    return analyzer


TGI = CORPUS / "tgi" / "tgi-ready-v3-router-python-tokenizer-error-noise-zephyr-delavande.log"


def test_a_pretty_dump_under_a_transports_timestamps_reads_whole() -> None:
    """TGI's `Args {` dump with a transport's time on every line (`docker logs -t`) reads whole, as without."""
    plain = build_verdict(_tgi_replay(TGI.read_bytes())).arguments
    stamped = b"".join(
        b"2025-04-14T15:51:31.100000000Z " + line for line in TGI.read_bytes().splitlines(keepends=True)
    )
    assert build_verdict(_tgi_replay(stamped)).arguments == plain
    assert len(plain) == 53


def test_a_dump_cut_short_keeps_its_arguments_and_reads_the_next_record() -> None:
    """A dump whose closing brace never comes (the log cut it) ends at the next record: its arguments so far
    are kept, and that record is read as any other (here, the error that ends the launch)."""
    lines = TGI.read_bytes().splitlines(keepends=True)
    data = (
        b"".join(lines[:4])
        + b"2025-04-14T15:51:32.000000Z ERROR text_generation_launcher: Shard 0 failed to start\n"
    )
    verdict = build_verdict(_tgi_replay(data))
    assert _values(verdict.arguments) == {
        "model_id": "HuggingFaceH4/zephyr-7b-beta",
        "revision": "None",
        "validation_workers": "2",
    }
    assert verdict.state.value == "crashed"


def test_the_same_argument_text_is_one_shared_argument() -> None:
    """A relaunch's dump (or another launch's) with the same arguments gives the very same Argument objects,
    held once in memory; a credential is redacted in the shared one too, and a long value is not shared."""
    dump = "ServerArgs(model_path='/m/llama', tp_size=2, api_key='sk-secret-123', chat_template='{}')"
    first, second = parse_arguments(dump, "python-kwargs"), parse_arguments(dump, "python-kwargs")
    assert first == second
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert {a.name: a.value for a in first}["api_key"] == REDACTED
    long = "ServerArgs(chat_template='" + "x" * 300 + "'"
    one, two = (
        parse_arguments(long + ", a=1)", "python-kwargs"),
        parse_arguments(long + ", a=2)", "python-kwargs"),
    )
    assert one[0] == two[0]
    assert one[0] is not two[0]  # two dumps that share a long value: not held among the shared arguments
