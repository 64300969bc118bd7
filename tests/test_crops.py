"""Verdicts on crops of real corpus logs, cut as public excerpts are (benchmarks/crop_score.py; issue 30)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from benchscripts import load_script

crop_score = load_script("crop_score.py")
CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"


def _case(case: str, crop: str) -> tuple[dict[str, Any], list[bytes], tuple[int, int]]:
    # the label, the lines and one crop's span (crop_score's names: "last K", "middle") of corpus case ENGINE/NAME
    label = json.loads((CORPUS / f"{case}.json").read_text(encoding="utf-8"))
    lines = crop_score.log_lines(CORPUS / f"{case}.log")
    return label, lines, crop_score.crops(lines, label["root_cause"])[crop]


def _crop(case: str, crop: str) -> dict[str, Any]:
    # the verdict on one crop of the corpus case ENGINE/NAME
    _, lines, (start, end) = _case(case, crop)
    verdict: dict[str, Any] = crop_score.replay_bytes(b"".join(lines[start:end]))
    return verdict


@pytest.mark.parametrize(
    ("case", "crop", "want"),
    [
        pytest.param(
            "sglang/sglang-2026-npu-glm52-oom-during-request-scheduler-exception-after-ready-issue29838",
            "middle",
            {"state": "crashed", "phase": "ready"},
            id="sglang-run-event-loop-frames-are-serving",
        ),
        pytest.param(
            "sglang/captured-sglang-context-length-zero-cpu",
            "last 15",
            {"state": "crashed", "phase": "loading_weights"},
            id="sglang-model-constructor-frames-are-loading",
        ),
        pytest.param(
            "llamacpp/captured-llamacpp-python-host-unresolvable-cpu",
            "last 15",
            {"engine": "llamacpp", "phase": "allocating_kv_cache"},
            id="llamacpp-sched-reserve-lines-name-engine-and-phase",
        ),
        pytest.param(
            "llamacpp/llamacpp-2025-docker-gpt-oss-slot-processing-then-ggml-abort-backtrace-no-message-issue17060",
            "last 15",
            {"engine": "llamacpp"},
            id="llamacpp-ggml-abort-backtrace-names-engine",
        ),
        pytest.param(
            "tgi/tgi-3.1-local-cli-args-block-cut-issue3090",
            "last 15",
            {"engine": "tgi"},
            id="tgi-args-field-names-name-engine",
        ),
        pytest.param(
            "llamacpp/captured-llamacpp-chat-template-file-missing-cpu",
            "last 15",
            {"state": "crashed", "phase": "starting", "category": "config"},
            id="llamacpp-usage-tail-is-a-refused-argument",
        ),
        pytest.param(
            "llamacpp/captured-llamacpp-chat-template-file-missing-cpu",
            "middle",
            {"state": "crashed", "engine": "llamacpp"},
            id="llamacpp-argument-error-head-names-engine",
        ),
        pytest.param(
            "ollama/ollama-2025-gemma3-runner-started-truncating-prompt-ggml-alloc-assert-sigabrt-issue9863",
            "last 15",
            {"state": "crashed", "phase": "ready", "category": "assertion"},
            id="ollama-truncated-prompt-is-a-request-served",
        ),
        pytest.param(
            "llamacpp/captured-llamacpp-gpu-full-context-oom-cuda",
            "last 15",
            {"state": "crashed", "phase": "loading_weights", "engine": "llamacpp"},
            id="llamacpp-fit-dry-run-backtrace-frames-are-loading",
        ),
        pytest.param(
            "sglang/multirank-same-traceback-other-rank-failed-loading-ktransformers1666",
            "middle",
            {"state": "crashed", "phase": "loading_weights", "category": "model_load"},
            id="sglang-load-model-barrier-message-is-loading",
        ),
        pytest.param(
            "vllm/captured-vllm-other-torch-ready-cpu",
            "last 15",
            {"state": "stopped", "phase": "ready", "engine": "vllm"},
            id="vllm-api-server-http-shutdown-is-of-a-ready-server",
        ),
        pytest.param(
            "vllm/captured-vllm-ready-cpu",
            "last 60",
            {"state": "stopped", "phase": "ready", "engine": "vllm"},
            id="vllm-api-server-http-shutdown-after-the-engine-core-stop-is-ready",
        ),
        pytest.param(
            "vllm/captured-vllm-ready-cpu",
            "last 30",
            {"state": "starting", "phase": "starting", "category": None},
            id="vllm-exit-noise-alone-is-no-crash",
        ),
        pytest.param(
            "vllm/captured-vllm-worker-killed-cpu",
            "last 15",
            {"state": "starting", "phase": "starting", "category": None},
            id="vllm-exit-noise-alone-after-a-crash-is-no-verdict-either",
        ),
    ],
)
def test_crop_keeps_the_verdict(case: str, crop: str, want: dict[str, str | None]) -> None:
    """A crop that lost the start banner and the phase markers still gets the phase, engine and outcome its own
    lines carry (a frame only one step runs, an engine's own function names, an error's last line)."""
    verdict = _crop(case, crop)
    got = {**verdict, "category": (verdict["error"] or {}).get("category")}
    assert {k: got[k] for k in want} == want


def _judged(case: str, crop: str) -> dict[str, bool | None]:
    # crop_score's judgement of each field of one crop of the corpus case ENGINE/NAME (None: not judged)
    fields: dict[str, bool | None] = crop_score.score_crop(*_case(case, crop), True)[0]
    return fields


@pytest.mark.parametrize(
    ("case", "crop", "want"),
    [
        pytest.param(
            "vllm/captured-vllm-ready-cpu",
            "last 15",
            {"outcome": None, "phase": None, "engine": None},
            id="exit-noise-alone-tells-no-field",
        ),
        pytest.param(
            "vllm/captured-vllm-kv-cache-too-small-cpu",
            "last 30",
            {"outcome": True, "phase": None},
            id="api-server-wrapper-frames-tell-no-phase",
        ),
        pytest.param(
            "sglang/multirank-same-traceback-other-rank-failed-loading-ktransformers1666",
            "middle",
            {"outcome": True, "phase": True},
            id="a-line-with-its-own-state-tells-the-phase",
        ),
        pytest.param(
            "vllm/captured-vllm-other-torch-ready-cpu",
            "last 15",
            {"outcome": True, "phase": True, "engine": True},
            id="a-ready-line-tells-the-phase",
        ),
    ],
)
def test_crop_score_judges_only_what_the_crop_tells(
    case: str, crop: str, want: dict[str, bool | None]
) -> None:
    """crop_score judges a crop's phase only where one of its lines is one a rule reads a phase from (a wrapper
    whose frames span every startup step is none), and no field of a crop of the interpreter's exit noise alone;
    what it judges it still counts, right or wrong."""
    fields = _judged(case, crop)
    assert {k: fields[k] for k in want} == want


def test_crop_score_floor_at_30_lines() -> None:
    """The share of judged fields right on the last 30 lines of a fixed set of tuning logs stays at its floor."""
    started = time.process_time()
    scores = crop_score.score_dirs([CORPUS], last=(30,), names=SUBSET_30, middle=False)
    assert sorted({s.name for s in scores}) == sorted(SUBSET_30)
    assert crop_score.overall(scores, "last 30") >= FLOOR_30
    assert time.process_time() - started < 20


# The cases with more than 30 lines when the figure was set (issue 30, crops): 84.2 % of their 404 judged fields
# right on their last 30 lines (82.4 % before the crop rules); 98.1 % of 313 once a crop is judged only on what
# it can tell (a phase where a line tells one, nothing on exit noise alone: crops2); the floor leaves two
# fields' slack.
FLOOR_30 = 97.4
SUBSET_30 = frozenset(
    {
        "captured-llamacpp-assert-bad-heads-cpu",
        "captured-llamacpp-ctx-one-cpu",
        "captured-llamacpp-early2025-killed-after-ready-cpu",
        "captured-llamacpp-early2025-model-unknown-arch-cpu",
        "captured-llamacpp-early2025-ready-cpu",
        "captured-llamacpp-early2025-sigint-after-ready-cpu",
        "captured-llamacpp-early2025-sigint-twice-busy-cpu",
        "captured-llamacpp-early2025-sigterm-after-ready-cpu",
        "captured-llamacpp-killed-warmup-cpu",
        "captured-llamacpp-killed-warmup-cuda",
        "captured-llamacpp-oom-kv-cache-verbose-cuda",
        "captured-llamacpp-python-host-unresolvable-cpu",
        "captured-llamacpp-python-logit-bias-request-error-served-on-cpu",
        "captured-llamacpp-ready-trace-cpu",
        "captured-llamacpp-ready-trace-cuda",
        "captured-llamacpp-ready-verbose-cpu",
        "captured-llamacpp-ready-verbose-cuda",
        "captured-llamacpp-sigint-twice-after-ready-cpu",
        "captured-llamacpp-sigterm-warmup-cpu",
        "captured-sglang-bad-dtype-cpu",
        "captured-sglang-chat-template-missing-cpu",
        "captured-sglang-context-length-too-long-cpu",
        "captured-sglang-context-length-zero-cpu",
        "captured-sglang-cpu-engine-env-missing-cpu",
        "captured-sglang-hub-id-offline-cpu",
        "captured-sglang-json-override-invalid-cpu",
        "captured-sglang-load-format-bogus-cpu",
        "captured-sglang-mem-fraction-over-one-cpu",
        "captured-sglang-model-missing-cpu",
        "captured-sglang-sgl-kernel-cuda-wheel-cpu",
        "captured-sglang-tokenizer-path-missing-cpu",
        "captured-sglang-unsupported-architecture-cpu",
        "captured-vllm-apiserver-killed-after-ready-cpu",
        "captured-vllm-bad-quantization-cpu",
        "captured-vllm-block-size-odd-cpu",
        "captured-vllm-chat-template-request-fails-cpu",
        "captured-vllm-config-json-corrupt-cpu",
        "captured-vllm-enginecore-killed-cpu",
        "captured-vllm-enginecore-killed-startup-cpu",
        "captured-vllm-first-request-head-dim-16-cpu",
        "captured-vllm-host-unresolvable-cpu",
        "captured-vllm-hub-id-offline-cpu",
        "captured-vllm-import-torchaudio-cuda-lib-cpu",
        "captured-vllm-import-torchvision-nms-cpu",
        "captured-vllm-kv-cache-no-blocks-cpu",
        "captured-vllm-kv-cache-too-large-cpu",
        "captured-vllm-kv-cache-too-small-cpu",
        "captured-vllm-kvcache-space-not-int-cpu",
        "captured-vllm-load-format-dummy-cpu",
        "captured-vllm-lora-modules-missing-cpu",
        "captured-vllm-max-model-len-too-long-cpu",
        "captured-vllm-max-model-len-zero-cpu",
        "captured-vllm-max-num-seqs-zero-cpu",
        "captured-vllm-mem-util-default-cpu",
        "captured-vllm-model-missing-cpu",
        "captured-vllm-omp-bind-invalid-cpu",
        "captured-vllm-omp-bind-missing-core-cpu",
        "captured-vllm-oom-cgroup-cpu",
        "captured-vllm-oom-ulimit-v-cpu",
        "captured-vllm-other-torch-ready-cpu",
        "captured-vllm-port-in-use-cpu",
        "captured-vllm-quantization-fp8-cpu",
        "captured-vllm-read-only-home-cpu",
        "captured-vllm-ready-api-server-cpu",
        "captured-vllm-ready-cpu",
        "captured-vllm-ready-debug-cpu",
        "captured-vllm-ready-enforce-eager-cpu",
        "captured-vllm-ready-idle-cpu",
        "captured-vllm-ready-warning-cpu",
        "captured-vllm-request-too-long-then-ok-cpu",
        "captured-vllm-shard-missing-cpu",
        "captured-vllm-sigint-startup-cpu",
        "captured-vllm-sigkill-after-ready-cpu",
        "captured-vllm-sigkill-loading-cpu",
        "captured-vllm-sigkill-warmup-cpu",
        "captured-vllm-sigterm-in-flight-cpu",
        "captured-vllm-sigterm-startup-cpu",
        "captured-vllm-tokenizer-missing-cpu",
        "captured-vllm-tokenizer-mode-mistral-cpu",
        "captured-vllm-tp2-two-cores-cpu",
        "captured-vllm-truncated-safetensors-cpu",
        "captured-vllm-unsupported-architecture-cpu",
        "captured-vllm-worker-frozen-warmup-cpu",
        "captured-vllm-worker-killed-cpu",
        "config-unknown-model-type-glm5-rocm-serverargs",
        "import-undefined-symbol-cutensormap-old-driver-tke",
        "llamacpp-2026-router-pid-prefix-sm-tensor-ggml-assert-tensor-axis-gdb-lwp-issue24309",
        "ollama-0.16.1-ready-cpu-rpi5-runner-started-then-500-request-timeouts-josheeg",
        "ollama-0.18.1-runner-died-at-chat-register-dump-post-predict-eof-macos-issue14983",
        "ollama-kubectl-prefix-model-request-too-large-load-failed-ka0s",
        "ready-docker-desktop-double-timestamp-qwen7b-3090",
        "ready-qwen25-vl-multimodal-then-traffic-notebook-docs",
        "sglang-ready-awq-cuda-graph-disabled-new-format-agentivium",
        "tgi-2025-podman-webserverfailed-then-relaunch-args-block-cut-issue2421",
        "tgi-3.2-pretty-printed-args-block-cut-gemma3-issue3115",
        "tgi-ready-v3-router-python-tokenizer-error-noise-zephyr-delavande",
        "trtllm-serve-1.2.0rc5-autodeploy-ready-elided-middle-dgx-spark-nemotron3nano-jeansblog",
        "trtllm-serve-ready-1.1.0rc3-pytorch-gptoss120b-dgx-spark-jeansblog",
        "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid",
        "vllm-ready-v0.11-embedding-t4-fa2-error-noise-zjpzhao",
        "vllm-tp4-incomplete-flashinfer-allreduce-nvcc-fail-warning-v0.19-foamstandards",
        "vllm-v0.33-synth-cpu-default-mem-util-fails-at-kv-allocation",
        "vllm-v0.33-synth-cpu-fp8-kv-cache-dtype-not-supported-on-host",
        "vllm-v0.33-synth-cpu-leaving-none-for-kv-cache-low-mem-util",
        "vllm-v0.33-synth-cpu-v2-model-runner-requires-triton",
        "vllm-v0.34-synth-cpu-x86-requires-triton-cpu",
        "vllm-v0.34-synth-v2-model-runner-env-zero-removed",
        "vllm-v1-0.10.0-ascend-310p-incomplete-waiting-for-core-engine-start-debug-issue2416",
        "vllm-v1-0.10.1-ready-tail-ray-tp4-multinode-split-tqdm-gptoss120b-dennislee22",
        "vllm-v1-0.10.1-ready-terminal-hard-wrapped-lines-a100-dennislee22",
        "vllm-v1-cpu-arm-offline-ready-warming-up-markers-armlp",
    }
)
