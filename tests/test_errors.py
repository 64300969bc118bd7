"""Tests for watchdog.core.rootcause and watchdog.core.categories: root cause, merged ranks, categories and hints."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import cast

import pytest

from watchdog.core.categories import categorize, hint_for, phase_from_error, phase_from_frames
from watchdog.core.envelope import parse
from watchdog.core.rootcause import Candidate, Rank, _innermost_step, from_traceback, rank, root_cause
from watchdog.core.tracebacks import Assembler, Traceback
from watchdog.profiles.loader import catalogue, load_profile
from watchdog.profiles.model import Profile
from watchdog.vocabulary import ENGINES, STARTUP_PHASES, Category

_RULES = load_profile("generic").categories  # common.toml's [[category]] tables


def _categorize(summary: str, traceback: str = "") -> Category:
    return categorize(summary, traceback, rules=_RULES)


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
    err = root_cause(order, {}, "starting", load_profile("vllm"))
    assert err is not None
    assert (err.summary, err.category, err.line) == (_CAUSE.summary, "config", 10)
    assert (
        err.hint
        == "a launch option or the model's config is invalid or unsupported: fix the option the message names"
    )


def test_root_cause_wrapper_alone_says_cause_is_elsewhere() -> None:
    """With only a wrapper, it is the root cause and the hint says the decisive error is not in the log."""
    err = root_cause([_WRAPPER], {}, "starting", load_profile("vllm"))
    assert err is not None
    assert err.summary == _WRAPPER.summary
    assert err.hint.endswith("the decisive error was printed by another process and is not in this log")


def test_root_cause_of_nothing_is_none() -> None:
    """No candidates, no root cause."""
    assert root_cause([], {}, "starting", load_profile("sglang")) is None


def test_identical_errors_merge_ranks() -> None:
    """The same error from TP3 and TP1 is one error with ranks in rank order, hinted with the facts."""
    items = [Candidate(_OOM, 31, "TP3", "RuntimeError"), Candidate(_OOM, 30, "TP1", "RuntimeError")]
    err = root_cause(
        items, {"avail_mem_after_weights_gb": 16.3}, "allocating_kv_cache", load_profile("sglang")
    )
    assert err is not None
    assert err.ranks == ("TP1", "TP3")
    assert err.to_json()["ranks"] == ["TP1", "TP3"]
    assert (err.category, err.summary) == ("oom", _OOM)
    assert "16.3 GB" in err.hint


def test_ranks_sort_numerically() -> None:
    """Ranks sort by number, so TP10 comes after TP2."""
    items = [Candidate("ValueError: x", i, f"TP{r}", "ValueError") for i, r in enumerate((10, 2, 0))]
    err = root_cause(items, {}, "starting", load_profile("sglang"))
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
    cand = from_traceback(tb, load_profile("generic"))
    assert cand is not None
    assert cand.summary == "AssertionError: assert expert_location_metadata is not None"
    assert (cand.exception, cand.source, cand.line, cand.phase_hint) == (
        "AssertionError",
        "TP0",
        4,
        "loading_weights",
    )
    assert _categorize(cand.summary) == "assertion"


def test_fragment_without_exception_is_noise_with_phase() -> None:
    """A cut-off fragment without an exception line is a noise candidate that still tells the phase."""
    tb = _traceback(
        [
            '  File "/vllm/worker.py", line 236, in _warm_up_model',
            "    self.model_runner.capture_model(self.gpu_cache)",
        ]
    )
    cand = from_traceback(tb, load_profile("vllm"))
    assert cand is not None
    assert (cand.noise, cand.kind, cand.phase_hint) == (True, "fragment", "capturing_graphs")


@pytest.mark.parametrize(
    ("summary", "category"),
    [
        pytest.param(_OOM, "oom", id="sglang-oom"),
        pytest.param("torch.OutOfMemoryError: CUDA error: out of memory", "oom", id="cuda-oom-is-oom"),
        pytest.param(
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "cuda",
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
    """_categorize() maps a decisive error line to its category (a `Category`), most specific first."""
    assert _categorize(summary) is Category(category)


def test_categorize_keyerror_by_frames() -> None:
    """A KeyError is a model_load error only when the traceback shows weight loading."""
    assert _categorize("KeyError: 'foo'", '  File "m.py", line 1, in load_weights') == "model_load"
    assert _categorize("KeyError: 'foo'", '  File "m.py", line 1, in main') == "other"


def test_phase_from_frames_innermost_wins() -> None:
    """The innermost recognizable frame names the phase."""
    frames = '  File "a.py", line 1, in load_model\n  File "b.py", line 2, in profile_run\n'
    assert phase_from_frames(frames, load_profile("vllm")) == "allocating_kv_cache"
    assert phase_from_frames('  File "c.py", line 3, in main', load_profile("vllm")) is None


@pytest.mark.parametrize(
    ("frame", "engine", "phase"),
    [
        pytest.param("init_memory_pool", "sglang", "allocating_kv_cache", id="sglang-own"),
        pytest.param("init_memory_pool", "vllm", None, id="not-vllm-s"),
        pytest.param("determine_available_memory", "vllm", "allocating_kv_cache", id="vllm-own"),
        pytest.param("determine_available_memory", "sglang", None, id="not-sglang-s"),
        pytest.param("determine_available_memory", "generic", None, id="not-an-unknown-engine-s"),
        pytest.param("load_single_module", "trtllm", "loading_weights", id="trtllm-own"),
        pytest.param("load_weights", "generic", "loading_weights", id="shared-for-every-engine"),
        pytest.param("capture_end", "tgi", "capturing_graphs", id="pytorch-for-every-engine"),
        pytest.param(
            "load_all_fp4_weight_scales_and_alphas", "trtllm", "loading_weights", id="load-star-weight"
        ),
        pytest.param("load_weights_and_postprocess", "sglang", "loading_weights", id="load-weights-and-more"),
        pytest.param("_load_weights_impl", "generic", "loading_weights", id="private-weight-loader"),
        pytest.param("load_lora", "vllm", None, id="a-load-of-no-weights"),
    ],
)
def test_frame_names_are_their_engine_s(frame: str, engine: str, phase: str | None) -> None:
    """An engine's own frame names tell the phase in its logs only; the shared ones (common.toml) in every
    engine's, the generic one's included."""
    assert phase_from_frames(f'  File "x.py", line 1, in {frame}', load_profile(engine)) == phase


def test_oom_hint_names_knob_and_free_memory() -> None:
    """The SGLang KV-cache OOM hint names --mem-fraction-static and the memory free after weights."""
    hint = hint_for(
        "oom", _OOM, "allocating_kv_cache", {"avail_mem_after_weights_gb": 16.3}, load_profile("sglang")
    )
    assert "--mem-fraction-static" in hint
    assert "16.3 GB" in hint


def test_port_hint_names_port() -> None:
    """The port-in-use hint names the port from the summary."""
    hint = hint_for(
        "port_in_use",
        "OSError: [Errno 98] error while attempting to bind on address: port 30000",
        "starting",
        {},
        load_profile("generic"),
    )
    assert hint.startswith("port 30000 is already taken")


def test_port_hint_falls_back_to_fact() -> None:
    """Without a port in the summary, the port fact is named."""
    hint = hint_for(
        "port_in_use",
        "OSError: [Errno 98] Address already in use",
        "starting",
        {"port": 8000},
        load_profile("vllm"),
    )
    assert hint.startswith("port 8000 is already taken")


def test_unsupported_hint_names_compute_capability() -> None:
    """The unsupported hint names the compute capability from the summary."""
    hint = hint_for(
        "unsupported",
        "ValueError: Unsupported compute capability: 12.0",
        "starting",
        {},
        load_profile("sglang"),
    )
    assert "compute capability 12.0" in hint


def test_argparse_hint_names_the_rejected_option() -> None:
    """An argparse usage error's hint names the option the engine did not accept."""
    hint = hint_for(
        "config",
        "launch_server.py: error: unrecognized arguments: --enable-reasoning",
        "starting",
        {},
        load_profile("sglang"),
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
    assert _categorize(summary) == category


def test_shape_assert_in_a_weight_loader_is_model_load() -> None:
    """A bare AssertionError whose innermost frames are a weight loader: the checkpoint does not fit."""
    tb = (
        'Traceback (most recent call last):\n  File "m.py", line 9, in load_weights\n    w(p, x)\n'
        '  File "l.py", line 3, in weight_loader\n    assert param_data.shape == loaded_weight.shape\n'
        "AssertionError"
    )
    assert _categorize("AssertionError", tb) == "model_load"
    assert _categorize("AssertionError") == "assertion"


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


def test_torch_compile_exception_classes_prove_the_capture_phase() -> None:
    """Only torch.compile raises torch._dynamo.exc.* and torch._inductor.exc.*: the model was being compiled
    (capturing_graphs per the corpus SCHEMA), whatever engine step ran the compile; other classes prove nothing."""
    for line in (
        "torch._inductor.exc.InductorError: AssertionError: auto_functionalized was not removed",
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
        "Scheduler hit an exception: torch._dynamo.exc.Unsupported: Logger not supported for non-export cases.",
    ):
        assert phase_from_error(line) == "capturing_graphs", line
    assert phase_from_error("RuntimeError: torch._inductor is not installed") is None
    assert phase_from_error("AssertionError: auto_functionalized was not removed") is None


def test_cuda_stream_capture_errors_prove_the_capture_phase() -> None:
    """The CUDA runtime's stream-capture errors (their messages, or their names as PyTorch cites them) come only
    from an operation inside a stream capture: a CUDA graph was being captured. Other CUDA errors prove nothing."""
    for line in (
        "RuntimeError: CUDA error: operation failed due to a previous error during capture",
        "RuntimeError: CUDA error: operation not permitted when stream is capturing",
        "Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/ for more",
    ):
        assert phase_from_error(line) == "capturing_graphs", line
    assert phase_from_error("RuntimeError: CUDA error: an illegal memory access was encountered") is None
    assert phase_from_error("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB") is None


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
    error = root_cause(cands, {}, "ready", load_profile("sglang"))
    assert error is not None
    assert error.summary == clean


# -- the ranking of candidates, one feature at a time -----------------------------------------------------

_PLAIN = Candidate("RuntimeError: something broke", 10, exception="RuntimeError")


@pytest.mark.parametrize(
    ("worse", "category", "feature"),
    [
        pytest.param(Candidate("TypeError: x", 10, noise=True), "other", "noise", id="noise"),
        pytest.param(
            Candidate("RuntimeError: see above", 10, role="wrapper"), "other", "wrapper", id="wrapper"
        ),
        pytest.param(Candidate("EOFError", 10, exception="EOFError"), "other", "consequence", id="eoferror"),
        pytest.param(Candidate("RuntimeError: cancelled", 10), "other", "consequence", id="cancelled"),
        pytest.param(
            Candidate("BrokenPipeError: [Errno 32] Broken pipe", 10), "other", "consequence", id="broken-pipe"
        ),
        pytest.param(Candidate("process exited: killed", 10, kind="rule"), "killed", "generic", id="a-kill"),
        pytest.param(Candidate("ERROR something failed", 10, kind="log"), "other", "logged", id="log-line"),
        pytest.param(
            Candidate("RuntimeError: something broke", 10, chained=True), "other", "chained", id="chained"
        ),
    ],
)
def test_each_ranking_feature_alone_puts_a_candidate_behind_a_plain_cause(
    worse: Candidate, category: str, feature: str
) -> None:
    """Each feature of the ranking puts a candidate behind a plain cause of the same place, by that feature."""
    plain = rank(_PLAIN, "other", 0, load_profile("vllm"))
    other = rank(worse, category, 0, load_profile("vllm"))
    differing = [f for f in Rank._fields if getattr(plain, f) != getattr(other, f)]
    assert differing[0] == feature  # the first field that differs decides
    assert plain < other


def test_a_known_category_ranks_before_a_generic_one() -> None:
    """A cause whose category is known (oom) ranks before one that says nothing known, wherever it is."""
    assert rank(Candidate(_OOM, 20), "oom", 5, load_profile("vllm")) < rank(
        _PLAIN, "other", 0, load_profile("vllm")
    )


def _chain_candidates(lines: list[str]) -> list[Candidate]:
    """The candidates of the tracebacks in `lines`, assembled as the scanner assembles them."""
    assembler = Assembler()
    done: list[Traceback] = []
    for no, text in enumerate(lines, 1):
        done += assembler.feed(parse(text), no)[1]
    done += assembler.flush()
    return [c for c in (from_traceback(tb, load_profile("generic")) for tb in done) if c is not None]


def test_a_handled_exception_ranks_behind_the_one_raised_while_handling_it() -> None:
    """In "During handling of the above exception", the exception that ended the process is the root cause,
    not the one its code was handling (a StopIteration)."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/v/engine.py", line 3, in step',
        "StopIteration",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 8, in <module>',
        "RuntimeError: the real problem",
    ]
    err = root_cause(_chain_candidates(lines), {}, "starting", load_profile("vllm"))
    assert err is not None
    assert err.summary == "RuntimeError: the real problem"


def test_a_direct_cause_ranks_before_the_exception_it_caused() -> None:
    """In "The above exception was the direct cause of the following exception", the cause is the root cause."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/v/loader.py", line 3, in load',
        "FileNotFoundError: [Errno 2] No such file or directory: '/m/config.json'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 8, in <module>',
        "RuntimeError: loading failed",
    ]
    err = root_cause(_chain_candidates(lines), {}, "starting", load_profile("vllm"))
    assert err is not None
    assert err.summary.startswith("FileNotFoundError")


def test_a_console_script_entry_frame_makes_a_traceback_fatal() -> None:
    """A traceback whose outermost frame is a console script's `<module>` (`vllm serve`) ended its process."""
    tb = _traceback(
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/vllm", line 8, in <module>',
            "    sys.exit(main())",
            "ValueError: bad",
        ]
    )
    cand = from_traceback(tb, load_profile("generic"))
    assert cand is not None
    assert cand.fatal


@pytest.mark.parametrize(
    ("frame", "engine", "step"),
    [
        pytest.param("check_enough_kv_cache_memory", "vllm", True, id="vllm-kv-check"),
        pytest.param("load_model", "generic", True, id="load-model"),
        pytest.param("init_memory_pool", "sglang", True, id="sglang-memory-pool"),
        pytest.param("init_memory_pool", "vllm", False, id="another-engine-s-step"),
        pytest.param("run_autotune", "vllm", False, id="autotune-may-fall-back"),
        pytest.param("handle_request", "sglang", False, id="a-request"),
    ],
)
def test_an_exception_out_of_a_startup_step_is_marked(frame: str, engine: str, step: bool) -> None:
    """An exception whose innermost engine frame is a startup step no engine survives is marked as such
    (fatal while starting); one from an autotuner, a request or another engine's step is not."""
    tb = _traceback(
        [
            "Traceback (most recent call last):",
            f'  File "/x/engine.py", line 10, in {frame}',
            '  File "/x/torch/lib.py", line 20, in call',
            "RuntimeError: failed",
        ]
    )
    cand = from_traceback(tb, load_profile(engine))
    assert cand is not None
    assert cand.startup_step is step


@pytest.mark.parametrize(
    ("lines", "summary"),
    [
        pytest.param(
            [
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
                "  Value error, Unknown quantization method: foo. [type=value_error, input_value=1, input_type=str]",
                "    For further information visit https://errors.pydantic.dev/2.14/v/value_error",
            ],
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig: "
            "Value error, Unknown quantization method: foo.",
            id="pydantic-model-error",
        ),
        pytest.param(
            [
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
                "max_model_len",
                "  Input should be a valid integer [type=int_parsing, input_value='x', input_type=str]",
            ],
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig: "
            "max_model_len: Input should be a valid integer",
            id="pydantic-field-error",
        ),
        pytest.param(
            [
                "RuntimeError: Error(s) in loading state_dict for Linear:",
                "\tsize mismatch for weight: copying a param with shape [2, 2], the current model has [3, 3].",
            ],
            "RuntimeError: Error(s) in loading state_dict for Linear: size mismatch for weight: copying a param "
            "with shape [2, 2], the current model has [3, 3].",
            id="torch-state-dict",
        ),
    ],
)
def test_a_header_only_message_takes_its_detail(lines: list[str], summary: str) -> None:
    """An exception whose message is only a header (pydantic's "1 validation error for X") is summarised
    with the lines that say what is wrong."""
    tb = _traceback(["Traceback (most recent call last):", '  File "/x/a.py", line 1, in f', *lines])
    cand = from_traceback(tb, load_profile("generic"))
    assert cand is not None
    assert cand.summary == summary


@pytest.mark.parametrize(
    ("summary", "category"),
    [
        pytest.param(
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for X: y",
            "config",
            id="pydantic",
        ),
        pytest.param(
            "huggingface_hub.errors.HFValidationError: Repo id must use alphanumeric",
            "model_load",
            id="hf-repo",
        ),
        pytest.param(
            "ValueError: Invalid repository ID or local directory specified: '/nope'",
            "model_load",
            id="vllm-path",
        ),
        pytest.param(
            "ValueError: Available memory on node 0 (1.0/2.0 GiB) on startup is less than desired CPU memory "
            "utilization (0.9, 1.8 GiB).",
            "oom",
            id="vllm-cpu-memory",
        ),
        pytest.param("torch.OutOfMemoryError: x", "oom", id="torch-oom-class"),
        pytest.param("MemoryError", "oom", id="memoryerror"),
        pytest.param("std::bad_alloc", "oom", id="bad-alloc"),
        pytest.param(
            "importlib.metadata.PackageNotFoundError: No package metadata was found for vllm",
            "import",
            id="no-metadata",
        ),
        pytest.param(
            "RuntimeError: Unsupported CPU attention configuration: head_dim=16",
            "unsupported",
            id="unsupported",
        ),
        pytest.param(
            "ValueError: User-specified context_length (8192) is greater than the derived context_length (2048). "
            "This may lead to incorrect model outputs or CUDA errors.",
            "config",
            id="what-may-follow-is-no-part-of-it",
        ),
        pytest.param("RuntimeError: something", "other", id="nothing-known"),
    ],
)
def test_category_from_what_raised_and_what_it_says(summary: str, category: str) -> None:
    """A category comes from the message's wording and, where it says nothing known, from the exception's class."""
    assert _categorize(summary) == category


def test_an_error_raised_while_importing_is_an_import_problem() -> None:
    """An exception that says nothing known, raised while a module was being imported (an extension's
    set-up failing), is an import problem; the same exception raised by a call is not. (A dispatcher's
    'operator torchvision::nms does not exist' says what it is wherever it is raised: import.)"""
    importing = '  File "/v/torchvision/__init__.py", line 8, in <module>\n    from torchvision import (\n'
    calling = '  File "/v/engine.py", line 8, in step\n    self.run(batch)\n'
    summary = "RuntimeError: registration of the extension failed"
    assert _categorize(summary, "Traceback (most recent call last):\n" + importing + summary) == "import"
    assert _categorize(summary, "Traceback (most recent call last):\n" + calling + summary) == "other"


def test_a_process_seen_gone_is_not_said_to_be_oom_killed() -> None:
    """A process that a probe found gone (how is unknown) gets a hint that says so, not a claim of SIGKILL;
    a log that names the kill gets the kill's hint; a death told without its signal gets the hint that its
    cause is not in the log (issue 30)."""
    vllm = load_profile("vllm")
    gone = hint_for("killed", "process exited: no such process", "starting", {}, vllm)
    assert gone.startswith("the process is gone and its log does not say why")
    named = hint_for(
        "killed", "./run.sh: line 48: 27 Killed python3 -m vllm.entrypoints", "starting", {}, vllm
    )
    assert named.startswith("the process was killed (SIGKILL)")
    told = hint_for("killed", "Worker proc VllmWorker-0 died unexpectedly", "starting", {}, vllm)
    assert told.startswith("the process died and this log does not say why")
    assert "dmesg -T" in told
    assert "exit status" in told


# -- hints are the engine's own -----------------------------------------------------------------------------

_CUDA_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
_FLAG = re.compile(r"(?<![\w-])--?[a-z][\w-]*")


@pytest.mark.parametrize(
    ("engine", "phase", "summary", "says", "never"),
    [
        pytest.param(
            "tgi",
            "capturing_graphs",
            _CUDA_OOM,
            "--cuda-graphs",
            ("--max-num-seqs", "--gpu-memory-utilization"),
            id="tgi-graph-warmup",
        ),
        pytest.param(
            "ollama",
            "loading_weights",
            "cudaMalloc failed: out of memory",
            "num_ctx",
            ("tensor parallel", "--"),
            id="ollama-weights",
        ),
        pytest.param(
            "ollama", "ready", _CUDA_OOM, "OLLAMA_NUM_PARALLEL", ("tensor parallel",), id="ollama-serving"
        ),
        pytest.param(
            "vllm",
            "capturing_graphs",
            _CUDA_OOM,
            "--max-num-seqs",
            ("--cuda-graph-max-bs",),
            id="vllm-graphs",
        ),
        pytest.param(
            "vllm", "allocating_kv_cache", _CUDA_OOM, "--max-model-len", ("--mem-fraction",), id="vllm-kv"
        ),
        pytest.param(
            "sglang",
            "capturing_graphs",
            _CUDA_OOM,
            "--cuda-graph-max-bs",
            ("--max-num-seqs",),
            id="sglang-graphs",
        ),
        pytest.param(
            "sglang", "ready", _CUDA_OOM, "--mem-fraction-static", ("--gpu-memory",), id="sglang-serving"
        ),
        pytest.param(
            "llamacpp",
            "allocating_kv_cache",
            "cudaMalloc failed: out of memory",
            "--ctx-size",
            ("tensor parallel",),
            id="llamacpp-kv",
        ),
        pytest.param(
            "llamacpp",
            "loading_weights",
            "cudaMalloc failed: out of memory",
            "-ngl",
            ("tensor parallel",),
            id="llamacpp-weights",
        ),
        pytest.param(
            "generic", "capturing_graphs", _CUDA_OOM, "disable CUDA graphs", ("--",), id="generic-graphs"
        ),
    ],
)
def test_an_oom_hint_names_the_engines_own_flags(
    engine: str, phase: str, summary: str, says: str, never: tuple[str, ...]
) -> None:
    """An out-of-memory hint names what the engine itself offers, never another engine's flags or features."""
    hint = hint_for("oom", summary, phase, {}, load_profile(engine))
    assert says in hint
    assert [word for word in never if word in hint] == []


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("phase", [*(s.value for s in STARTUP_PHASES), "ready"])
def test_every_hint_flag_is_the_engines_or_common(engine: str, phase: str) -> None:
    """Whatever the phase and category, a hint names only flags that the engine's own profile or the common one
    names: an engine without a hint of its own gets the generic one."""
    own = load_profile(engine).hints
    allowed = {flag for h in own for flag in _FLAG.findall(h.text)}
    for category in Category:
        hint = hint_for(category, _CUDA_OOM, phase, {}, load_profile(engine))
        assert set(_FLAG.findall(hint)) <= allowed, (category, hint)


def test_a_user_engine_without_hints_gets_the_common_ones() -> None:
    """A user's engine with no [[hint]] of its own gets the common hints, which name no engine's flag."""
    mine = catalogue([Profile("myengine", ("MyEngine v",))]).profile("myengine")
    hint = hint_for("oom", _CUDA_OOM, "capturing_graphs", {"avail_mem_after_weights_gb": 3.5}, mine)
    assert hint.startswith("graph capture ran out of memory (3.5 GB free after weights)")
    assert _FLAG.findall(hint) == []


class _Counted:
    """A profile's regex that counts the texts it reads (a `re.Pattern` for what the profile asks of it)."""

    def __init__(self, pattern: str) -> None:
        self.regex, self.read = re.compile(pattern), 0

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        self.read += 1
        return self.regex.finditer(text)

    def search(self, text: str) -> re.Match[str] | None:
        self.read += 1
        return self.regex.search(text)


def test_a_traceback_s_frames_are_read_once_for_its_phase_and_its_step() -> None:
    """A traceback's text is read once by a profile's [[frame]] and [[step]] regexes, however often its phase and
    startup step are asked (at its exception line, at its close, at each error the root cause weighs after it);
    a profile with other regexes reads the same text with its own."""
    text = (
        '  File "a.py", line 1, in main\n  File "b.py", line 2, in load_model\n  File "c.py", line 3, in run'
    )
    frame, step = _Counted(r"in load_model\b"), _Counted(r"in load_model\b")
    profile = Profile(
        "x",
        frames=(("loading_weights", cast("re.Pattern[str]", frame)),),
        steps=(cast("re.Pattern[str]", step),),
    )
    for _ in range(3):
        assert phase_from_frames(text, profile) == "loading_weights"
        assert _innermost_step(text, profile) == 'File "b.py", line 2, in load_model'
    assert frame.read == 1
    assert step.read == 2  # the innermost frame, then the one it names, once each
    other = Profile("y", frames=(("capturing_graphs", re.compile(r"in run\b")),))
    assert phase_from_frames(text, other) == "capturing_graphs"
    assert _innermost_step(text, other) == ""


def test_a_candidate_is_weighed_as_a_consequence_once_however_often_the_root_cause_is_chosen() -> None:
    """Whether an error is the news of another part's end (the profile's [[consequence]]) is read once per error,
    at however many later errors the root cause weighs it again; another profile reads it by its own rules."""
    gone = _Counted(r"Connection reset by peer")
    profile = Profile("x", consequences=(cast("re.Pattern[str]", gone),))
    news = Candidate("RuntimeError: Connection reset by peer", 3, "TP1", "RuntimeError")
    cause = Candidate(
        "RuntimeError: CUDA error: an illegal memory access was encountered", 5, "TP0", "RuntimeError"
    )
    for _ in range(3):
        error = root_cause([news, cause], {}, "ready", profile)
        assert error is not None
        assert error.summary.startswith("RuntimeError: CUDA error")
    assert (
        gone.read == 2 + 3
    )  # each error once, and at each choice the copy made of the chosen one (its phase)
    error = root_cause([news, cause], {}, "ready", Profile("y"))
    assert error is not None
    assert error.summary.startswith("RuntimeError: Connection reset")  # no consequence there: the first error
