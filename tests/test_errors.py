"""Tests for watchdog.core.rootcause and watchdog.core.categories: root cause, merged ranks, categories and hints."""

from __future__ import annotations

import pytest

from watchdog.core.categories import categorize, hint_for, phase_from_error, phase_from_frames
from watchdog.core.envelope import parse
from watchdog.core.rootcause import Candidate, from_traceback, root_cause
from watchdog.core.tracebacks import Assembler, Traceback

_WRAPPER = Candidate(
    "RuntimeError: Engine core initialization failed. See root cause above",
    20,
    "EngineCore_DP0",
    "RuntimeError",
    role="wrapper",
)
_NOISE = Candidate("TypeError: not all arguments converted", 5, exception="TypeError", noise=True)
_CAUSE = Candidate(
    "ValueError: `num_heads` must be divisible by `num_shards`", 10, "EngineCore_DP0", "ValueError"
)
_OOM = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static"


def _traceback(lines: list[str]) -> Traceback:
    assembler = Assembler()
    for no, text in enumerate(lines, 1):
        assembler.feed(parse(text), no)
    (tb,) = assembler.flush()
    return tb


@pytest.mark.parametrize(
    "order",
    [
        pytest.param((_NOISE, _WRAPPER, _CAUSE), id="cause-last"),
        pytest.param((_CAUSE, _WRAPPER, _NOISE), id="cause-first"),
        pytest.param((_WRAPPER, _CAUSE, _NOISE), id="cause-middle"),
    ],
)
def test_root_cause_prefers_real_cause(order: tuple[Candidate, ...]) -> None:
    """root_cause() picks the real cause over a wrapper and over logging noise, in any log order."""
    err = root_cause(order, {}, "starting", "vllm")
    assert err is not None
    assert (err.summary, err.category, err.line) == (_CAUSE.summary, "config", 10)
    assert (
        err.hint
        == "a launch option or the model's config is invalid or unsupported: fix the option the message names"
    )


def test_root_cause_wrapper_alone_says_cause_is_elsewhere() -> None:
    """With only a wrapper, it is the root cause and the hint says the decisive error is not in the log."""
    err = root_cause([_WRAPPER], {}, "starting", "vllm")
    assert err is not None
    assert err.summary == _WRAPPER.summary
    assert err.hint.endswith("the decisive error was printed by another process and is not in this log")


def test_root_cause_of_nothing_is_none() -> None:
    """No candidates, no root cause."""
    assert root_cause([], {}, "starting", "sglang") is None


def test_identical_errors_merge_ranks() -> None:
    """The same error from TP3 and TP1 is one error with ranks in rank order, hinted with the facts."""
    items = [Candidate(_OOM, 31, "TP3", "RuntimeError"), Candidate(_OOM, 30, "TP1", "RuntimeError")]
    err = root_cause(items, {"avail_mem_after_weights_gb": 16.3}, "allocating_kv_cache", "sglang")
    assert err is not None
    assert err.ranks == ("TP1", "TP3")
    assert err.to_json()["ranks"] == ["TP1", "TP3"]
    assert (err.category, err.summary) == ("oom", _OOM)
    assert "16.3 GB" in err.hint


def test_ranks_sort_numerically() -> None:
    """Ranks sort by number, so TP10 comes after TP2."""
    items = [Candidate("ValueError: x", i, f"TP{r}", "ValueError") for i, r in enumerate((10, 2, 0))]
    err = root_cause(items, {}, "starting", "sglang")
    assert err is not None
    assert err.ranks == ("TP0", "TP2", "TP10")


def test_bare_assertion_summary_carries_statement() -> None:
    """from_traceback() turns a bare AssertionError into a summary naming the failing assert."""
    tb = _traceback(
        [
            "[2025-07-02 07:31:02 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl/model_runner.py", line 5, in load_model',
            "    assert expert_location_metadata is not None",
            "AssertionError",
        ]
    )
    cand = from_traceback(tb)
    assert cand is not None
    assert cand.summary == "AssertionError: assert expert_location_metadata is not None"
    assert (cand.exception, cand.source, cand.line, cand.phase_hint) == (
        "AssertionError",
        "TP0",
        4,
        "loading_weights",
    )
    assert categorize(cand.summary) == "assertion"


def test_fragment_without_exception_is_noise_with_phase() -> None:
    """A cut-off fragment without an exception line is a noise candidate that still tells the phase."""
    tb = _traceback(
        [
            '  File "/vllm/worker.py", line 236, in _warm_up_model',
            "    self.model_runner.capture_model(self.gpu_cache)",
        ]
    )
    cand = from_traceback(tb)
    assert cand is not None
    assert (cand.noise, cand.kind, cand.phase_hint) == (True, "fragment", "capturing_graphs")


@pytest.mark.parametrize(
    ("summary", "category"),
    [
        pytest.param(_OOM, "oom", id="sglang-oom"),
        pytest.param("torch.OutOfMemoryError: CUDA error: out of memory", "oom", id="cuda-oom-is-oom"),
        pytest.param(
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "unsupported",
            id="no-kernel-image",
        ),
        pytest.param("OSError: [Errno 98] Address already in use", "port_in_use", id="port"),
        pytest.param("ImportError: libcudart.so.12: cannot open shared object file", "import", id="import"),
        pytest.param("torch.AcceleratorError: CUDA error: operation not permitted", "cuda", id="cuda"),
        pytest.param("AssertionError: x", "assertion", id="assertion"),
        pytest.param("ValueError: `num_heads` must be divisible by `num_shards`", "config", id="config"),
        pytest.param(
            "ValueError: Unsupported compute capability: 12.0", "unsupported", id="compute-capability"
        ),
        pytest.param("RuntimeError: something odd", "other", id="other"),
    ],
)
def test_categorize(summary: str, category: str) -> None:
    """categorize() maps a decisive error line to its category, most specific first."""
    assert categorize(summary) == category


def test_categorize_keyerror_by_frames() -> None:
    """A KeyError is a model_load error only when the traceback shows weight loading."""
    assert categorize("KeyError: 'foo'", '  File "m.py", line 1, in load_weights') == "model_load"
    assert categorize("KeyError: 'foo'", '  File "m.py", line 1, in main') == "other"


def test_phase_from_frames_innermost_wins() -> None:
    """The innermost recognizable frame names the phase."""
    frames = '  File "a.py", line 1, in load_model\n  File "b.py", line 2, in profile_run\n'
    assert phase_from_frames(frames) == "allocating_kv_cache"
    assert phase_from_frames('  File "c.py", line 3, in main') is None


def test_oom_hint_names_knob_and_free_memory() -> None:
    """The SGLang KV-cache OOM hint names --mem-fraction-static and the memory free after weights."""
    hint = hint_for("oom", _OOM, "allocating_kv_cache", {"avail_mem_after_weights_gb": 16.3}, "sglang")
    assert "--mem-fraction-static" in hint
    assert "16.3 GB" in hint


def test_port_hint_names_port() -> None:
    """The port-in-use hint names the port from the summary."""
    hint = hint_for(
        "port_in_use",
        "OSError: [Errno 98] error while attempting to bind on address: port 30000",
        "starting",
        {},
        "x",
    )
    assert hint.startswith("port 30000 is already taken")


def test_port_hint_falls_back_to_fact() -> None:
    """Without a port in the summary, the port fact is named."""
    hint = hint_for(
        "port_in_use", "OSError: [Errno 98] Address already in use", "starting", {"port": 8000}, "vllm"
    )
    assert hint.startswith("port 8000 is already taken")


def test_unsupported_hint_names_compute_capability() -> None:
    """The unsupported hint names the compute capability from the summary."""
    hint = hint_for(
        "unsupported", "ValueError: Unsupported compute capability: 12.0", "starting", {}, "sglang"
    )
    assert "compute capability 12.0" in hint


def test_argparse_hint_names_the_rejected_option() -> None:
    """An argparse usage error's hint names the option the engine did not accept."""
    hint = hint_for(
        "config",
        "launch_server.py: error: unrecognized arguments: --enable-reasoning",
        "starting",
        {},
        "sglang",
    )
    assert "--enable-reasoning" in hint


@pytest.mark.parametrize(
    ("summary", "category"),
    [
        ("ValueError: metrics_port at 40290 is not available in 30 seconds.", "port_in_use"),
        (
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address.",
            "port_in_use",
        ),
        (
            "ValueError: Loading /m requires you to execute the configuration file in that repo on your local machine.",
            "config",
        ),
        (
            "ValueError: Quantization method specified in the model config (marlin) does not match the quantization method specified in the quantization argument (gptq).",
            "config",
        ),
        ("AssertionError: One of GPU archs of ['gfx1201'] is invalid or not supported", "unsupported"),
        ("NotImplementedError: FP8 block quant is not supported yet", "unsupported"),
        ("/usr/bin/ld: cannot find -lcuda: No such file or directory", "import"),
        (
            "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp (allreduce.cpp:79)",
            "assertion",
        ),
        (
            "IndexKernel.cu:92: operator(): block: [0,0,0], thread: [1,0,0] Assertion `idx < n` failed.",
            "cuda",
        ),
        (
            "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016",
            "cuda",
        ),
        ("Exit code: -9", "killed"),
    ],
)
def test_plain_lines_get_their_category(summary: str, category: str) -> None:
    """A line that says plainly what it is gets that category, not `other`."""
    assert categorize(summary) == category


def test_shape_assert_in_a_weight_loader_is_model_load() -> None:
    """A bare AssertionError whose innermost frames are a weight loader: the checkpoint does not fit."""
    tb = (
        'Traceback (most recent call last):\n  File "m.py", line 9, in load_weights\n    w(p, x)\n'
        '  File "l.py", line 3, in weight_loader\n    assert param_data.shape == loaded_weight.shape\n'
        "AssertionError"
    )
    assert categorize("AssertionError", tb) == "model_load"
    assert categorize("AssertionError") == "assertion"


def test_nccl_timeout_with_a_high_sequence_number_was_serving() -> None:
    """SeqNum in the tens of thousands: the collective ran while serving, whatever markers surround it."""
    assert (
        phase_from_error(
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=20518, OpType=ALLREDUCE"
        )
        == "ready"
    )
    assert (
        phase_from_error("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=BROADCAST")
        is None
    )


def test_copies_of_one_message_garbled_by_threads_give_the_clean_one() -> None:
    """Many threads print one device assert at once: the shortest copy (interleaving only adds) is chosen."""
    clean = 'Assertion `idx < n && "index out of bounds"` failed.'
    garbled = 'Assertion `idx < n && "index out of bounds": operator()` failed.'
    cands = [
        Candidate(garbled, 3, "", category="cuda", kind="rule"),
        Candidate(clean, 5, "", category="cuda", kind="rule"),
        Candidate(
            'Assertion `idx < n && "index out of bounds",0` failed.', 7, "", category="cuda", kind="rule"
        ),
    ]
    error = root_cause(cands, {}, "ready", "sglang")
    assert error is not None
    assert error.summary == clean
