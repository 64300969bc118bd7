"""Tests for watchdog.core.envelope: wrapper prefixes peeled into content, source, level and time."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchdog.core import envelope
from watchdog.core.envelope import Record, parse, seconds_between, unglue
from watchdog.core.framing import clean, split_line

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("line", "content", "source", "level", "at"),
    [
        pytest.param(
            "vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: x",
            "ValueError: x",
            "",
            "ERROR",
            "11-18T18:07:28",
            id="docker-compose-vllm-v0",
        ),
        pytest.param(
            "Jan 26 17:48:20 host ollama[1418]: msg", "msg", "", "", "01-26T17:48:20", id="journald"
        ),
        pytest.param(
            "7月 21 11:33:06 dar ollama[1166693]: msg",
            "msg",
            "",
            "",
            "07-21T11:33:06",
            id="journald-chinese-month",
        ),
        pytest.param(
            "juil. 21 11:33:06 dar ollama[1166693]: msg",
            "msg",
            "",
            "",
            "11:33:06",
            id="journald-french-month",
        ),
        pytest.param(
            "ERROR 2025-04-07T19:13:52.318307161Z [2025-04-07 19:13:52] Received sigquit",
            "Received sigquit",
            "",
            "ERROR",
            "2025-04-07T19:13:52",
            id="gcp-export",
        ),
        pytest.param(
            "2025-03-07 23:50:27,531 - __main__ - INFO - [2025-03-07 23:50:27 TP0] Init torch distributed begin.",
            "Init torch distributed begin.",
            "TP0",
            "INFO",
            "2025-03-07T23:50:27",
            id="python-logging-wrapper",
        ),
        pytest.param(
            "(RayWorkerWrapper pid=249, ip=172.20.249.91) WARNING 04-17 14:33:54 fused_moe.py:807] "
            "Using default MoE config.",
            "Using default MoE config.",
            "RayWorkerWrapper pid=249",
            "WARNING",
            "04-17T14:33:54",
            id="ray-worker",
        ),
        pytest.param(
            "[rank1]:[W623 15:37:01.823833318 socket.cpp:460] [c10d] waitForInput",
            "[c10d] waitForInput",
            "rank1",
            "WARNING",
            "06-23T15:37:01",
            id="torchrun-glog",
        ),
        pytest.param(
            "E0120 08:28:09.425599 2049 model_lifecycle.cc:654] \"failed to load 'tensorrt_llm' version 1: x\"",
            "\"failed to load 'tensorrt_llm' version 1: x\"",
            "",
            "ERROR",
            "01-20T08:28:09",
            id="triton-glog-unbracketed",
        ),
        pytest.param(
            '(EngineCore_DP0 pid=17374) ERROR 09-28 15:47:24 [core.py:718]   File "x", line 1',
            '  File "x", line 1',
            "EngineCore_DP0",
            "ERROR",
            "09-28T15:47:24",
            id="vllm-v1-engine-core-frame",
        ),
        pytest.param(
            "[2025-07-02 07:31:02 DP0 TP3 EP3] Load weight end.",
            "Load weight end.",
            "TP3",
            "",
            "2025-07-02T07:31:02",
            id="sglang-dp-tp-ep",
        ),
        pytest.param(
            "[17:43:23 TP6] Load weight end.",
            "Load weight end.",
            "TP6",
            "",
            "17:43:23",
            id="sglang-time-only",
        ),
        pytest.param(
            "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 file.py:222] hi",
            "hi",
            "TP3",
            "INFO",
            "2025-10-20T03:02:22",
            id="sglang-0.5.4-format",
        ),
        pytest.param(
            'time=2025-05-01T16:40:14.182+02:00 level=DEBUG source=server.go:625 msg="model load progress 0.18"',
            '"model load progress 0.18"',
            "",
            "DEBUG",
            "2025-05-01T16:40:14",
            id="ollama-slog",
        ),
        pytest.param(
            "2025-04-14T15:51:31.134585Z  INFO text_generation_launcher: Args {",
            "text_generation_launcher: Args {",
            "",
            "INFO",
            "2025-04-14T15:51:31",
            id="tgi",
        ),
        pytest.param(
            "ERROR:    Traceback (most recent call last):",
            "Traceback (most recent call last):",
            "",
            "ERROR",
            None,
            id="uvicorn",
        ),
        pytest.param("plain message", "plain message", "", "", None, id="no-envelope"),
        pytest.param(
            "gemma-vllm-server  | AssertionError", "AssertionError", "", "", None, id="compose-no-replica"
        ),
        pytest.param(
            "[pod/vllm-0/server] ERROR 05-21 20:51:38 [core.py:489] EngineCore failed to start.",
            "EngineCore failed to start.",
            "",
            "ERROR",
            "05-21T20:51:38",
            id="kubectl-prefix",
        ),
        pytest.param(
            "[12-11 17:52:54] Exit code: -9", "Exit code: -9", "", "", "12-11T17:52:54", id="sglang-mmdd"
        ),
        pytest.param("Loading | 3/4", "Loading | 3/4", "", "", None, id="not-a-compose-prefix"),
        pytest.param(
            "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500",
            "[c10d] The client socket has failed to connect to [localhost]:29500",
            "",
            "WARNING",
            None,
            id="c10-without-time",
        ),
        pytest.param(
            "[E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout",
            "[Rank 4] Watchdog caught collective operation timeout",
            "",
            "ERROR",
            None,
            id="c10-error-without-time",
        ),
        pytest.param(
            "ValueError: bad value \t  ", "ValueError: bad value", "", "", None, id="terminal-padding"
        ),
        pytest.param("[pod/llm-0/server] ", "", "", "", None, id="prefix-of-an-empty-line"),
        pytest.param(
            "2026-05-08 11:50:14.752 [Error] (Process) (EngineCore pid=3043) ERROR 05-08 11:50:14 [core.py:1136] "
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 12.94 GiB.",
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 12.94 GiB.",
            "EngineCore pid=3043",
            "ERROR",
            "05-08T11:50:14",
            id="lemonade-wrapping-vllm",
        ),
        pytest.param(
            "(VllmWorker rank=0 pid=3781015) ERROR 08-16 11:45:16 [multiproc_executor.py:511] "
            "KeyError: 'layers.1.mlp.experts.w13_weight'",
            "KeyError: 'layers.1.mlp.experts.w13_weight'",
            "VllmWorker rank=0",
            "ERROR",
            "08-16T11:45:16",
            id="vllm-0.10-worker-rank",
        ),
        pytest.param(
            "(APIServer pid=1) ERROR 10-20 03:20:50 [async_llm.py:485[] vllm.v1.engine.exceptions.EngineDeadError: x",
            "vllm.v1.engine.exceptions.EngineDeadError: x",
            "APIServer pid=1",
            "ERROR",
            "10-20T03:20:50",
            id="vllm-header-bracket-mangled-by-markdown",
        ),
        pytest.param(
            "[03/27/2024-11:09:02] [TRT] [E] 6: The engine plan file is generated on an incompatible device",
            "6: The engine plan file is generated on an incompatible device",
            "",
            "ERROR",
            "2024-03-27T11:09:02",
            id="tensorrt-own-logger",
        ),
    ],
)
def test_parse_envelopes(line: str, content: str, source: str, level: str, at: str | None) -> None:
    """parse() peels each real-world prefix form into the program's content, source tag, level and time."""
    rec = parse(line)
    assert (rec.content, rec.source, rec.level, rec.at) == (content, source, level, at)


@pytest.mark.parametrize(
    ("line", "tagged"),
    [
        pytest.param("[rank0]:Traceback (most recent call last):", True, id="torchrun"),
        pytest.param(
            "(VllmWorkerProcess pid=67) INFO 08-19 07:51:03 model_runner.py:732] hi", True, id="vllm-worker"
        ),
        pytest.param("[2025-07-02 07:31:02 TP2] Scheduler hit an exception:", False, id="sglang"),
    ],
)
def test_tagged_marks_per_line_source(line: str, tagged: bool) -> None:
    """`tagged` is True only for prefixes printed on every line of a process (torchrun, vLLM workers)."""
    assert parse(line).tagged is tagged


def test_vllm_worker_without_digits_keeps_pid() -> None:
    """A process name without digits keeps its pid in the source, so two workers stay distinct."""
    assert parse("(VllmWorkerProcess pid=67) INFO 08-19 07:51:03 model_runner.py:732] hi").source == (
        "VllmWorkerProcess pid=67"
    )


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        pytest.param(
            "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:01<00:00,  1.5it/s]"
            "[2025-07-02 07:31:05 TP0] Load weight end.",
            [
                "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:01<00:00,  1.5it/s]",
                "[2025-07-02 07:31:05 TP0] Load weight end.",
            ],
            id="tqdm-glued-to-sglang",
        ),
        pytest.param(
            "Capturing batches: 100%|##########| 4/4 [00:02<00:00]INFO 08-19 07:51:03 model_runner.py:732] x",
            [
                "Capturing batches: 100%|##########| 4/4 [00:02<00:00]",
                "INFO 08-19 07:51:03 model_runner.py:732] x",
            ],
            id="tqdm-glued-to-vllm",
        ),
        pytest.param(
            "[2025-07-02 07:31:05 TP0] Load weight end.",
            ["[2025-07-02 07:31:05 TP0] Load weight end."],
            id="record-at-start-not-cut",
        ),
        pytest.param("nothing_glued_here", ["nothing_glued_here"], id="no-space"),
        pytest.param(
            "Loading weights concurrently:  47%| 667/1417 [00:03<00:05, 139.82it/s][07/23/2025-06:37:06] [TRT-LLM] [E] x",
            [
                "Loading weights concurrently:  47%| 667/1417 [00:03<00:05, 139.82it/s]",
                "[07/23/2025-06:37:06] [TRT-LLM] [E] x",
            ],
            id="trtllm-after-tqdm",
        ),
    ],
)
def test_unglue(text: str, parts: list[str]) -> None:
    """unglue() cuts a line where a new record starts in its middle, and only there."""
    assert unglue(text) == parts


def test_seconds_between_across_midnight() -> None:
    """Time-only SGLang logs crossing midnight give the forward gap, not a negative one."""
    before = parse("[23:59:58 TP0] a").seconds
    after = parse("[00:00:03 TP0] b").seconds
    assert (before, after) == (86398.0, 3.0)
    assert seconds_between(before, after) == 5.0
    assert seconds_between(after, before) == 86395.0


@pytest.mark.parametrize(
    ("start", "end", "gap"),
    [
        pytest.param(None, 3.0, None, id="no-start"),
        pytest.param(3.0, None, None, id="no-end"),
        pytest.param(1_700_000_010.0, 1_700_000_000.0, None, id="dated-backwards"),
        pytest.param(1_700_000_000.0, 1_700_000_042.0, 42.0, id="dated-forward"),
    ],
)
def test_seconds_between(start: float | None, end: float | None, gap: float | None) -> None:
    """A gap is None without both ends, and a dated backwards gap is not read as a midnight crossing."""
    assert seconds_between(start, end) == gap


def test_seconds_on_common_scale_for_dated_lines() -> None:
    """Two dated SGLang lines a minute apart are 60 seconds apart."""
    a = parse("[2025-07-02 23:59:30 TP0] a").seconds
    b = parse("[2025-07-03 00:00:30 TP0] b").seconds
    assert seconds_between(a, b) == 60.0


FORMATS = Path(__file__).parent / "fixtures" / "formats"


def _first_line(name: str, containing: str) -> str:
    return next(line for line in (FORMATS / name).read_text().splitlines() if containing in line)


@pytest.mark.parametrize(
    ("name", "at", "seconds"),
    [
        pytest.param("cri-oom.log", "2025-07-02T07:34:18", 1796405641.0, id="cri"),
        pytest.param("journald-short-iso-oom.log", "2025-07-02T07:34:18", 1796405649.0, id="short-iso"),
        pytest.param("journald-short-iso-precise-oom.log", "2025-07-02T07:34:18", 1796405649.0, id="precise"),
        pytest.param("docker-logs-timestamps-oom.log", "2025-07-02T07:34:18", 1796405641.0, id="docker-t"),
    ],
)
def test_a_platforms_prefix_on_a_real_line_is_peeled(name: str, at: str, seconds: float) -> None:
    """A real CRI record, journalctl short-iso(-precise) or `docker logs -t` line of the example's OOM reads as the
    plain line: the program's content, rank and time shown, and the platform's time (the outermost) for durations."""
    line = _first_line(name, "DP1 TP1 EP1] Scheduler hit an exception")
    rec = parse(line)
    assert (rec.content, rec.source, rec.at) == (
        "Scheduler hit an exception: Traceback (most recent call last):",
        "TP1",
        at,
    )
    assert rec.seconds == seconds


@pytest.mark.parametrize(
    ("line", "content", "at"),
    [
        pytest.param(
            "2026-12-04T17:34:01.1237076Z stdout F RuntimeError: Not enough memory.",
            "RuntimeError: Not enough memory.",
            "2026-12-04T17:34:01",
            id="containerd",
        ),
        pytest.param(
            "2026-12-04T09:54:17.831019227+01:00 stderr F RuntimeError: x", "RuntimeError: x", "2026-12-04T09:54:17",
            id="cri-o-offset",
        ),
        pytest.param("2026-12-04T17:34:01Z stdout P part of a line", "part of a line", "2026-12-04T17:34:01", id="partial"),
        pytest.param("2026-12-04T17:34:01Z stdout F:x y", "y", "2026-12-04T17:34:01", id="more-tags"),
        pytest.param("2026-12-04T17:34:01Z stderr F ", "", "2026-12-04T17:34:01", id="empty-record"),
        pytest.param(
            "[pod/llm-0/server] 2026-12-04T17:34:01.1Z RuntimeError: x", "RuntimeError: x", "2026-12-04T17:34:01",
            id="kubectl-prefix-timestamps",
        ),
        pytest.param(
            "2026-12-04T17:34:09.582626+0000 gpu-7 python3[4242]: Loading model: x",
            "Loading model: x",
            "2026-12-04T17:34:09",
            id="short-iso-precise-keeps-a-colon-message",
        ),
        pytest.param(
            "2026-12-04T17:34:09Z Loading model: x", "Loading model: x", "2026-12-04T17:34:09",
            id="a-transport-timestamp-is-no-journald-line",
        ),
    ],
)  # fmt: skip
def test_cri_and_short_iso_prefixes(line: str, content: str, at: str) -> None:
    """CRI prefixes (containerd's "Z", CRI-O's offset, P and F tags, more tags after ":") and journalctl's short-iso
    prefix are peeled; a "Z" timestamp in front of a "word word: " message is no journald line."""
    rec = parse(line)
    assert (rec.content, rec.at) == (content, at)


def _parse_layer_by_layer(text: str) -> Record:
    # the reference: each layer tried in turn at each step, what it tells read from its groups every time
    source, level, tagged, at, seconds, content = "", "", False, None, None, text
    for _ in range(8):
        for index, layer in enumerate(map(envelope._layer, range(len(envelope._LAYER_PATTERNS)))):
            m = layer.match(content)
            if m is None or m.end() == 0:
                continue
            end = m.end()
            if index == envelope._BARE_LEVEL and content[m.end("level") : m.end("level") + 1] == ":":
                # Uvicorn's level is padded to column 10: the blanks past it are the message's own
                end = min(end, m.end("level") + 1 + max(1, 9 - len(m.group("level"))))
            groups = m.groupdict()
            if (groups.get("source") and groups.get("pid")) or "relay" in groups:
                level = ""  # the program's own line starts here: a level before it was its relay's
            if groups.get("level"):
                raw = groups["level"].upper()
                level = envelope._LEVELS.get(raw, raw)
            found = envelope._time_of(groups)
            if found is not None:
                at, seconds = found[0], found[1] if seconds is None else seconds
            rank = (groups.get("rank") or "").strip()
            if rank:
                source = envelope._short_rank(rank)
            elif groups.get("source"):
                name, pid = groups["source"], groups.get("pid")
                source = name if (pid is None or any(c.isdigit() for c in name)) else f"{name} pid={pid}"
                tagged = True
            content = content[end:]
            break
        else:
            break
    return Record(content.rstrip(), source, level, at, seconds, tagged)


def _unglue_by_regex(text: str) -> list[str]:
    cuts = [0, *(m.start() for m in envelope._GLUE.finditer(text)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(cuts)]


_GLUE_PIECES = [
    "[2025-07-02 07:31:02] ",
    "[2025-07-02 07:31:02 TP0] ",
    "[07/23/2025-06:37:06] [TRT-LLM] ",
    "[00:01<00:02,  1.08it/s]",
    "[2025-",
    "[12/",
    "['*.safetensors']",
    "(EngineCore_DP0 pid=17374) ",
    "(VllmWorker rank=0 pid=3781015) ",
    "INFO 07-02 07:31:02 ",
    "ERROR 05-21 20:51:38.5 ",
    "WARNING 12-02 ",  # a level and a date's "MM-" with no time: the quick look's words, no record's start
    " 07-02 07:",  # a date and an hour with no level word before it
    "100%|##########| 4/4 ",
    "x",
    " ",
]


@given(st.lists(st.sampled_from(_GLUE_PIECES), max_size=8).map("".join))
def test_unglue_cuts_where_the_glue_regex_does(text: str) -> None:
    """unglue()'s quick looks (a date after a bracket, a process tag, a vLLM level) pass over no cut the glue
    regex makes: a tqdm bar's "[00:01<" or a list's "['" is no record's start, a bracketed date is."""
    assert unglue(text) == _unglue_by_regex(text)


def test_every_fixture_line_peels_as_layer_by_layer() -> None:
    """On every fixture line, one match of all the layers (and what their prefixes told before) peels the
    record the layers tried one by one give, the first time and the next (remembered), and so does the layer
    after the first remembered by the text left; a line is cut where the glue regex cuts it."""
    lines = 0
    for log in sorted(FIXTURES.rglob("*.log")):
        for raw in log.read_bytes().split(b"\n"):
            for seg in split_line(0, raw):
                pieces = unglue(seg.text)
                assert pieces == _unglue_by_regex(seg.text)
                for piece in pieces:
                    expected = _parse_layer_by_layer(piece)
                    assert parse(piece) == expected
                    assert parse(piece) == expected
                    # the layers after the first, remembered by the text left (`remember`): found, then taken
                    assert parse(piece, remember=True) == expected
                    assert parse(piece, remember=True) == expected
                    lines += 1
    assert lines > 20000
    # an SGR tail whose ESC was lost is still an escape to strip
    assert clean(b"[36m(RayWorkerWrapper pid=1) x") == "(RayWorkerWrapper pid=1) x"


@pytest.mark.parametrize(
    ("line", "content", "at"),
    [
        pytest.param(
            "> [2025-11-06T02:10:00.702Z] KeyError: 'lm_head.weight'", "KeyError: 'lm_head.weight'",
            "2025-11-06T02:10:00", id="quoted-jenkins-timestamp",
        ),
        pytest.param(">", "", None, id="empty-quoted-line"),
        pytest.param(
            "[2025-11-06T02:10:00.703Z] [2025-11-06 02:10:00] Received sigquit",
            "Received sigquit", "2025-11-06T02:10:00", id="ci-time-around-sglang-time",
        ),
        pytest.param(
            "[41303] 0.01.289.827 E alloc_tensor_range: failed to allocate RPC0[10.0.69.2:50052] buffer",
            "alloc_tensor_range: failed to allocate RPC0[10.0.69.2:50052] buffer", None, id="llamacpp-pid-common-log",
        ),
        # llama-server's router relays every line of a child with its port, LOG("[%5d] %s", port, line)
        # (tools/server/server-models.cpp, 2025-12+): what the child writes to stderr itself has no time behind it
        pytest.param(
            "[57663] /src/llama-model.cpp:410: GGML_ASSERT(tensor_axis_0 != nullptr) failed",
            "/src/llama-model.cpp:410: GGML_ASSERT(tensor_axis_0 != nullptr) failed", None, id="llamacpp-router-port",
        ),
        pytest.param("[ 8081] [New LWP 397021]", "[New LWP 397021]", None, id="llamacpp-router-port-padded"),
        pytest.param("[413035] no port of 16 bits", "[413035] no port of 16 bits", None, id="bare-number-kept"),
        pytest.param(
            "[2025-05-29 12:00:35.235796] E ROCm error: out of memory", "ROCm error: out of memory",
            "2025-05-29T12:00:35", id="llama-box-bracketed-datetime-level",
        ),
    ],
)  # fmt: skip
def test_pasted_and_ci_prefixes(line: str, content: str, at: str | None) -> None:
    """A markdown blockquote, a CI runner's bracketed ISO time, the pid llama.cpp's 2026 common log puts in front and
    llama-box's bracketed date-time before its level letter are peeled; a bracketed number before anything else is
    kept."""
    rec = parse(line)
    assert (rec.content, rec.at) == (content, at)


@pytest.mark.parametrize(
    ("line", "content", "source", "level"),
    [
        pytest.param(
            "6: [05/12/2026-05:01:16] [TRT-LLM] [I] [_torch  ] [RANK 6] Run warmup with 128 tokens, include 0 generation tokens",
            "Run warmup with 128 tokens, include 0 generation tokens", "RANK 6", "INFO", id="srun-label-2026-logger",
        ),
        pytest.param(
            "[09/17/2025-21:24:19] [TRT-LLM] [RANK 2] [E] Error executing load_single_module",
            "Error executing load_single_module", "RANK 2", "ERROR", id="rank-before-level-2025",
        ),
        pytest.param("[TensorRT-LLM][INFO] Loaded engine size: 3 MiB", "Loaded engine size: 3 MiB", "", "INFO", id="cpp"),
        # the 2026 logger's module glued to the rank (TensorRT-LLM#15179, #15022; PR 18373's paste without the tags)
        pytest.param(
            "[06/09/2026-22:34:07] [TRT-LLM] [E] [executor][RANK 0] Failed to deliver error message to proxy",
            "Failed to deliver error message to proxy", "RANK 0", "ERROR", id="module-glued-to-rank-2026",
        ),
        pytest.param(
            "[TRT-LLM] [I] [batchmgr][RANK 0] Number of tokens per block: 32.",
            "Number of tokens per block: 32.", "RANK 0", "INFO", id="cpp-batch-manager-module-glued-to-rank-2026",
        ),
        pytest.param(
            "[_torch][RANK 0] BindingsNixlTransferAgent init: ... UCX_TLS=tcp UCX_LOG_LEVEL=",
            "BindingsNixlTransferAgent init: ... UCX_TLS=tcp UCX_LOG_LEVEL=", "RANK 0", "", id="module-and-rank-alone",
        ),
    ],
)  # fmt: skip
def test_trtllm_rank_tags(line: str, content: str, source: str, level: str) -> None:
    """TensorRT-LLM's rank tag before or after its level, the 2026 logger's module tag (apart from the rank or glued to
    it, "[executor][RANK 1] ") and a launcher's task label in front are peeled, the rank kept as the line's source."""
    rec = parse(line)
    assert (rec.content, rec.source, rec.level) == (content, source, level)
