"""Tests for watchdog.core.tracebacks: tracebacks put back together per rank from interleaved log records."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchdog.core import tracebacks
from watchdog.core.envelope import parse, unglue
from watchdog.core.framing import split_line
from watchdog.core.tracebacks import EXCEPTION_LINE, Assembler, Traceback

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def _assemble(lines: list[str]) -> list[tuple[int | str, Traceback]]:
    """Feed lines (numbered from 1) and return (line that completed it, or "flush", traceback)."""
    assembler = Assembler()
    out: list[tuple[int | str, Traceback]] = []
    for no, text in enumerate(lines, 1):
        _, done = assembler.feed(parse(text), no)
        out += [(no, tb) for tb in done]
    out += [("flush", tb) for tb in assembler.flush()]
    return out


def test_sglang_tagged_header_untagged_frames() -> None:
    """An SGLang traceback tagged only on its header line is attributed to that rank and ends at the blank line."""
    result = _assemble(
        [
            "[2025-07-02 07:31:02 TP2] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl/scheduler.py", line 10, in run_scheduler_process',
            "    scheduler = Scheduler()",
            "ValueError: bad",
            "",
            "[2025-07-02 07:31:03 TP0] next",
        ]
    )
    assert len(result) == 1
    done_at, tb = result[0]
    assert done_at == 5
    assert (tb.source, tb.line, tb.header, tb.at) == (
        "TP2",
        1,
        "Scheduler hit an exception:",
        "2025-07-02T07:31:02",
    )
    assert tb.lines == [
        "Traceback (most recent call last):",
        '  File "/sgl/scheduler.py", line 10, in run_scheduler_process',
        "    scheduler = Scheduler()",
        "ValueError: bad",
    ]
    assert (tb.exception, tb.exc_line_no, tb.chained, tb.noise) == ("ValueError: bad", 4, False, False)


def test_torchrun_ranks_interleaved_are_separate() -> None:
    """Interleaved "[rank0]:"/"[rank1]:" tracebacks are assembled per rank, each with its own frames."""
    result = _assemble(
        [
            "[rank0]: Traceback (most recent call last):",
            "[rank1]: Traceback (most recent call last):",
            '[rank0]:   File "a.py", line 1, in f',
            '[rank1]:   File "b.py", line 2, in g',
            "[rank0]:     f()",
            "[rank1]:     g()",
            "[rank0]: RuntimeError: zero",
            "[rank1]: RuntimeError: one",
        ]
    )
    by_source = {tb.source: tb for _, tb in result}
    assert sorted(by_source) == ["rank0", "rank1"]
    assert by_source["rank0"].lines == [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "    f()",
        "RuntimeError: zero",
    ]
    assert by_source["rank1"].lines == [
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in g',
        "    g()",
        "RuntimeError: one",
    ]
    assert (by_source["rank0"].exc_line_no, by_source["rank1"].exc_line_no) == (7, 8)


_CAUSE = [
    "Traceback (most recent call last):",
    '  File "a.py", line 1, in f',
    "    x()",
    "KeyError: 1",
]
_EFFECT = [
    "Traceback (most recent call last):",
    '  File "b.py", line 1, in g',
    "    y()",
    "RuntimeError: wrapped",
    "",
]


def test_chained_exception_without_blank_line_is_chained() -> None:
    """A chain marker right after the exception line marks the next traceback of the stream `chained`."""
    lines = [*_CAUSE, "The above exception was the direct cause of the following exception:", "", *_EFFECT]
    result = [tb for _, tb in _assemble(lines)]
    assert [(tb.exception, tb.chained) for tb in result] == [
        ("KeyError: 1", False),
        ("RuntimeError: wrapped", True),
    ]


@pytest.mark.parametrize(
    "marker",
    [
        pytest.param(
            "The above exception was the direct cause of the following exception:", id="direct-cause"
        ),
        pytest.param(
            "During handling of the above exception, another exception occurred:", id="during-handling"
        ),
    ],
)
def test_chained_exception_as_python_prints_it(marker: str) -> None:
    """Python's own chain layout (blank line, marker, blank line) marks the second traceback `chained`."""
    lines = [*_CAUSE, "", marker, "", *_EFFECT]
    result = [tb for _, tb in _assemble(lines)]
    assert [(tb.exception, tb.chained) for tb in result] == [
        ("KeyError: 1", False),
        ("RuntimeError: wrapped", True),
    ]


def test_logging_error_block_is_noise() -> None:
    """The traceback inside a "--- Logging error ---" block is noise, and the block ends at "Arguments:"."""
    assembler = Assembler()
    lines = [
        "--- Logging error ---",
        "Traceback (most recent call last):",
        '  File "l.py", line 1, in emit',
        "    msg = self.format(record)",
        "TypeError: not all arguments converted during string formatting",
        "Call stack:",
        '  File "x.py", line 3, in main',
        "Message: 'hi %s'",
        "Arguments: (1, 2)",
    ]
    done: list[Traceback] = []
    for no, text in enumerate(lines, 1):
        consumed, finished = assembler.feed(parse(text), no)
        assert consumed, text
        done += finished
    assert assembler.busy is False
    assert [(tb.exception, tb.noise) for tb in done] == [
        ("TypeError: not all arguments converted during string formatting", True),
        (None, True),
    ]
    # after the block, a real traceback is not noise
    _, _ = assembler.feed(parse("Traceback (most recent call last):"), 10)
    assembler.feed(parse("ValueError: real"), 11)
    assert [(tb.exception, tb.noise) for tb in assembler.flush()] == [("ValueError: real", False)]


def test_traceback_under_cpythons_unraisable_header_is_noise() -> None:
    """A traceback right under CPython's unraisable-exception header (Python/errors.c PyErr_WriteUnraisable:
    'Exception ignored on calling ctypes callback function: <fn>', 'Exception ignored in: <obj>') was printed and
    ignored, the program went on: noise; a traceback that does not follow one at once is not."""
    frames = [
        '  File "llama_cpp/llama.py", line 1332, in logit_bias_processor',
        "IndexError: index 9 is out of bounds",
    ]
    out = _assemble(
        [
            "Exception ignored on calling ctypes callback function: <function apply_wrapper at 0x7f91a051a480>",
            "Traceback (most recent call last):",
            *frames,
            "Exception ignored in: <function Llama.__del__ at 0x7f00>",
            "Traceback (most recent call last):",
            *frames,
            "Exception ignored in: <function Llama.__del__ at 0x7f00>",
            'INFO:     127.0.0.1:55416 - "POST /v1/completions HTTP/1.1" 200 OK',
            "Traceback (most recent call last):",
            *frames,
        ]
    )
    assert [(tb.line, tb.noise) for _, tb in out] == [(2, True), (6, True), (11, False)]


def test_last_statement_of_bare_assertion() -> None:
    """last_statement() returns the innermost frame's source line, skipping caret markers."""
    result = _assemble(
        [
            "Traceback (most recent call last):",
            '  File "/sgl/server.py", line 3, in main',
            "    run()",
            '  File "/sgl/ep.py", line 5, in init',
            "    assert expert_location_metadata is not None",
            "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            "AssertionError",
            "",
        ]
    )
    assert len(result) == 1
    tb = result[0][1]
    assert tb.exception == "AssertionError"
    assert tb.last_statement() == "assert expert_location_metadata is not None"


def test_fragment_starting_at_frame_is_assembled() -> None:
    """A log cut inside a traceback still assembles from its first '  File "' line to the exception."""
    result = _assemble(
        [
            '  File "/vllm/worker.py", line 236, in _warm_up_model',
            "    self.model_runner.capture_model(self.gpu_cache)",
            "torch.OutOfMemoryError: CUDA out of memory.",
            "",
        ]
    )
    assert len(result) == 1
    done_at, tb = result[0]
    assert done_at == 4
    assert tb.lines[0] == '  File "/vllm/worker.py", line 236, in _warm_up_model'
    assert (tb.line, tb.exception, tb.exc_line_no) == (1, "torch.OutOfMemoryError: CUDA out of memory.", 3)
    assert tb.last_statement() == "self.model_runner.capture_model(self.gpu_cache)"


def test_unrelated_line_is_not_consumed() -> None:
    """A line outside any traceback is not consumed and completes nothing."""
    assembler = Assembler()
    assert assembler.feed(parse("[2025-07-02 07:31:02 TP0] Load weight end."), 1) == (False, [])
    assert assembler.busy is False


@pytest.mark.parametrize(
    ("line", "exc"),
    [
        pytest.param("RuntimeError: boom", "RuntimeError", id="plain"),
        pytest.param("torch.OutOfMemoryError: CUDA out of memory", "torch.OutOfMemoryError", id="dotted"),
        pytest.param(
            "triton.runtime.errors.OutOfResources: x", "triton.runtime.errors.OutOfResources", id="triton"
        ),
        pytest.param("KeyboardInterrupt", "KeyboardInterrupt", id="bare"),
        pytest.param("Loading weights took 3s", None, id="not-an-exception"),
    ],
)
def test_exception_line(line: str, exc: str | None) -> None:
    """EXCEPTION_LINE recognizes dotted and bare exception names and nothing else."""
    m = EXCEPTION_LINE.match(line)
    assert (m.group("exc") if m else None) == exc


def test_traceback_pasted_flush_left_still_ends_in_its_exception_line() -> None:
    """Frames and source lines with their indentation lost: the exception line is still the last line."""
    lines = [
        'File "/usr/lib/vllm/config.py", line 130, in init',
        "self._verify_quantization()",
        'File "/usr/lib/vllm/config.py", line 204, in _verify_quantization',
        "raise ValueError(",
        "ValueError: Quantization method specified in the model config (marlin) does not match",
        "",
    ]
    [(_, tb)] = _assemble(lines)
    assert (
        tb.exception
        == "ValueError: Quantization method specified in the model config (marlin) does not match"
    )
    assert tb.last_statement() == "raise ValueError("


def test_frame_wrapped_by_a_terminal_keeps_its_function_name() -> None:
    """A frame line a terminal wrapped inside its function name is joined again, and the rest goes on."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/opt/vllm/v1/engine/core.py", line 305, in _initialize_k',
        "v_caches",
        "    kv_cache_configs = get_kv_cache_configs(",
        "ValueError: To serve at least one request",
        "",
    ]
    [(_, tb)] = _assemble(lines)
    assert tb.lines[1].endswith("in _initialize_kv_caches")
    assert tb.exception == "ValueError: To serve at least one request"


def test_frame_quotes_escaped_as_in_json_is_a_frame() -> None:
    """'File \\"x\\"' (a traceback pasted from a JSON string) opens a traceback like 'File "x"'."""
    lines = [
        'File \\"sglang/srt/utils/cuda_ipc_transport_utils.py\\", line 488, in reconstruct_on_target_device',
        "    storage = torch.UntypedStorage._new_shared_cuda(",
        "torch.AcceleratorError: HIP error: invalid device pointer",
        "",
    ]
    [(_, tb)] = _assemble(lines)
    assert tb.exception == "torch.AcceleratorError: HIP error: invalid device pointer"


def test_a_record_between_a_bare_header_and_its_first_frame_is_another_process() -> None:
    """Python writes a traceback's header and frames as one block: a log record (a level, a time) right after a bare
    header is another process's, and the frames that follow it are that traceback's, whole again (round 10's
    TensorRT-LLM 6513 crop with a vLLM INFO record put after its header)."""
    result = _assemble(
        [
            "Traceback (most recent call last):",
            "INFO 12-02 10:00:01 [loader.py:12] Still waiting for rank 3.",
            '  File "/usr/lib/python3.12/dist-packages/tensorrt_llm/executor/worker.py", line 753, in worker_main',
            "    worker: GenerationExecutorWorker = worker_cls(",
            "RuntimeError: boom",
        ]
    )
    # the header alone is reported cut when the record comes, then the frames make it whole again: the same first
    # line, which replaces the part reported cut
    (cut_at, cut), (_, whole) = result
    assert (cut_at, cut.line, cut.exception) == (2, 1, None)
    assert whole.line == 1
    assert whole.exception == "RuntimeError: boom"
    assert whole.lines[0].startswith("Traceback")
    assert any("worker_main" in line for line in whole.lines)
    assert not any("Still waiting" in line for line in whole.lines)


def test_a_record_between_a_tagged_header_and_its_first_frame_is_another_process() -> None:
    """vLLM prefixes every line a process writes (`(APIServer pid=N) ERROR ... [file.py:N]`): a record without that
    prefix and of another level right after such a header is another process's (a c10d warning), not the
    traceback's exception line; the frames that follow are that traceback's, whole (vllm-ascend issue 4406's crop
    with a c10d warning put after its header, tests/test_metamorphic.py)."""
    tag = "(APIServer pid=145) ERROR 11-24 07:53:49 [async_llm.py:480]"
    result = _assemble(
        [
            f"{tag} Traceback (most recent call last):",
            "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 97).",
            f'{tag}   File "/vllm-workspace/vllm/vllm/v1/engine/async_llm.py", line 439, in output_handler',
            f"{tag}     outputs = await engine_core.get_output_async()",
            f"{tag} vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        ]
    )
    whole = result[-1][1]
    assert whole.line == 1
    assert whole.lines[0].startswith("Traceback")
    assert any("output_handler" in line for line in whole.lines)
    assert whole.exception == "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    assert not any("c10d" in line for line in whole.lines)


def test_what_opens_a_traceback_holds_a_word_the_quick_look_looks_for() -> None:
    """`Assembler.feed` passes over a line that nothing open can take unless it holds "File ", the header, 'py",
    line ', "Logging error", "above exception" or CPython's "Exception ignored ": each way a line opens something holds one of them."""
    assert all("File " in frame for frame in tracebacks._FRAME)
    assert 'py", line ' in tracebacks._CUT_FRAME.pattern.replace("\\.", ".")
    assert all("above exception" in marker for marker in tracebacks._CHAIN)
    assert "Logging error" in "--- Logging error ---"
    assert tracebacks._IGNORED in "Exception ignored in: <function Llama.__del__ at 0x7f00>"


def test_the_quick_look_says_what_the_whole_look_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """On every corpus log, line by line, the quick pass over a line that nothing open can take gives what the
    whole look gives: the same answer, the same tracebacks completed, the same exception and code marks."""
    logs = sorted(CORPUS.rglob("*.log"))
    assert len(logs) > 100

    def assembled(quick: bool) -> list[object]:
        monkeypatch.setattr(tracebacks, "_QUICK_LOOK", quick)
        out: list[object] = []
        for log in logs:
            assembler = Assembler()
            for no, raw in enumerate(log.read_bytes().split(b"\n"), 1):
                for segment in split_line(0, raw):
                    for piece in unglue(segment.text):
                        consumed, done = assembler.feed(parse(piece), no)
                        out.append((consumed, done, assembler.excepted, assembler.code))
            out.append(assembler.flush())
        return out

    assert assembled(True) == assembled(False)


def test_faulthandler_dump_is_no_traceback_and_none_of_its_lines_is_an_exception() -> None:
    """CPython's faulthandler (Python/traceback.c) dumps each thread as a header 'Thread 0x... (most recent call
    first):' and frames '  File "f", line N in fn' (no comma before 'in'): read as a traceback, the second thread's
    header became the first one's exception line. A dump makes no traceback, and a real traceback after it is read
    whole."""
    result = _assemble(
        [
            "Fatal Python error: Aborted",
            "",
            "Thread 0x00007f71b9fff640 (most recent call first):",
            '  File "/sgl/scheduler.py", line 2377 in watchdog_thread',
            '  File "/usr/lib/python3.12/threading.py", line 1012 in run',
            "",
            "Current thread 0x00007f7687fff640 (most recent call first):",
            '  File "/usr/lib/python3.12/threading.py", line 359 in wait',
            "",
            "Traceback (most recent call last):",
            '  File "/app/main.py", line 3, in <module>',
            "    run()",
            "RuntimeError: after the dump",
            "",
        ]
    )
    assert [tb.exception for _, tb in result] == ["RuntimeError: after the dump"]


def test_faulthandler_frames_before_their_header_are_read_as_a_dump() -> None:
    """A log that starts inside a dump shows its frames before any header: worded as faulthandler words them ('line
    N in fn', no comma), they are a dump's, not a traceback cut before its exception."""
    result = _assemble(
        [
            '  File "/usr/lib/python3.12/threading.py", line 1012 in run',
            '  File "/usr/lib/python3.12/threading.py", line 1032 in _bootstrap',
            "",
            "Thread 0x00007f7687fff640 (most recent call first):",
            '  File "/usr/lib/python3.12/threading.py", line 359 in wait',
        ]
    )
    assert result == []
