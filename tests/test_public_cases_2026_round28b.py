"""What the twenty-eighth round's public logs of the llama.cpp family (ik_llama.cpp, Lemonade, GPUStack's llama-box)
and of Python servers the profiles do not know (LMDeploy) showed (issue 30, helper i30-cases28b), read from the
engines' and libraries' own source and pinned on the real log that showed it (tests/fixtures/corpus/llamacpp and
other)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict

# ik_llama.cpp#1204 (2026-01): the prompt cache saved after a request, then GGML_ASSERT and gdb's thread list
_IK_CACHE = "llamacpp-2026-ik-llama-prompt-cache-save-ggml-assert-total-size-new-lwp-ikllama1204"
# gpustack#1646 (2025-04): llama-box's 'srv                      main: loading model', cut there
_BOX_LOADING = "llamacpp-2025-gpustack-llama-box-metal-listening-then-main-loading-model-cut-gpustack1646"
# lemonade#1761 (2026-04): slots created behind Lemonade's '(Process)' prefix, a crop after 'initializing slots'
_SLOTS = "llamacpp-2026-lemonade-vulkan-slots-prompt-cache-chat-template-example-cut-lemonade1761"
# lemonade#726 (2025-12): a dynamic-backend build without its CPU backend library
_NO_CPU = "llamacpp-2025-lemonade-9.1-vulkan-no-cpu-backend-found-then-failed-to-load-model-lemonade726"
# lmdeploy#4051 (2025-10): LMDeploy's TorchChecker on a MetaX MACA image
_LMD_CHECK = "other-2025-lmdeploy-maca-docker-cuda-driver-init-failed-pytorch-check-failed-issue4051"


def test_a_prompt_saved_into_the_prompt_cache_is_a_serving_server() -> None:
    """llama-server's prompt cache saves a slot's prompt (' - saving prompt with length N, total state size = ...',
    tools/server/server-context.cpp prompt_save, b6700+; ik_llama.cpp prints it without the 'srv' column) only when
    a request takes the slot: the server serves. ik_llama.cpp#1204's GGML_ASSERT right after it was a crash while
    starting."""
    out = _verdict("llamacpp", _IK_CACHE)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "assertion"
    assert "GGML_ASSERT(total_size == size) failed" in str(found["summary"])


def test_main_loading_model_behind_the_srv_column_is_loading_weights() -> None:
    """2026 llama-server and GPUStack's llama-box log main()'s 'loading model' through the server's SRV_INF, with its
    right-aligned function column ('srv          main: loading model'): the model load has begun. gpustack#1646,
    cut at that line, stayed at starting."""
    out = _verdict("llamacpp", _BOX_LOADING)
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")


def test_a_slot_created_is_past_the_warm_up() -> None:
    """llama-server creates its slots after common_init_from_params's warm-up ('slot   load_model: id  1 | task -1 |
    new slot, n_ctx = 4096', tools/server/server-context.cpp load_model): a crop that starts after 'initializing
    slots' (lemonade#1761, Lemonade's '(Process)' prefix) is past the warm-up, not starting."""
    out = _verdict("llamacpp", _SLOTS)
    assert (out["state"], out["phase"]) == ("capturing_graphs", "capturing_graphs")


def test_no_cpu_backend_found_is_an_installation_problem() -> None:
    """make_cpu_buft_list throws 'no CPU backend found' (src/llama-model.cpp) when a build that loads its backends as
    libraries has no CPU one installed: import (a missing library), not model_load, whatever the loader's generic
    'error loading model' around it. lemonade#726 (Lemonade 9.1's Vulkan build)."""
    out = _verdict("llamacpp", _NO_CPU)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "import"
    assert "make_cpu_buft_list: no CPU backend found" in str(found["summary"])


def test_lmdeploy_environment_check_failure_is_fatal_with_its_exception_as_cause() -> None:
    """LMDeploy's check_env log_and_exit (lmdeploy/pytorch/check_env/base.py) logs 'Type: message' of the exception a
    checker caught, then '<Checker> check failed!', then exit(1); torch's 'CUDA driver initialization failed, you
    might not have a CUDA gpu.' (c10/cuda/CUDAFunctions.cpp) is the accelerator's failure. lmdeploy#4051 was read as
    no verdict."""
    out = _verdict("other", _LMD_CHECK)
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "cuda"
    assert "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu." in str(
        found["summary"]
    )
