"""The accelerator stacks' native fatal lines (no Python traceback): each is the root cause of its crash, with
its category, on real excerpts (issue 30: "a native fatal line is a root cause of its own")."""

from __future__ import annotations

from pathlib import Path

from watchdog.core.lifecycle import State
from watchdog.follow.replay import replay_path

# ROCm/ROCm#3015 (2024-04, llama.cpp on an integrated gfx1036): rocBLAS has no Tensile library for the GPU and
# aborts.
ROCBLAS = """\
rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory for GPU arch : gfx1036
 List of available TensileLibrary Files :
"/opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx1030.dat"
"/opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx1100.dat"
"/opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx1101.dat"
"/opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx942.dat"
Aborted (core dumped)
"""

# ROCm/hip#2166 (a HIP binary without code for the GPU): the runtime's guarantee, then abort.
HIP = """\
LoadLib(libhsa-amd-aqlprofile64.so) failed: libhsa-amd-aqlprofile64.so: cannot open shared object file: No such file or directory
/work/HIP/rocclr/hip_code_object.cpp:92: guarantee(false && "hipErrorNoBinaryForGpu: Coudn't find binary for current devices!")
Aborted (core dumped)
"""

# ggml-org/llama.cpp as quoted in mozilla-ai/llamafile#881 (2026-02): the Metal backend out of memory at the
# warm-up; GGML_ABORT's "fatal error" comes before the message it is about.
METAL = """\
llama_kv_cache:      Metal KV buffer size = 11440.00 MiB
llama_kv_cache: size = 11440.00 MiB ( 28160 cells, 104 layers,  4/1 seqs), K (f16): 5720.00 MiB, V (f16): 5720.00 MiB
llama_context: Flash Attention was auto, set to enabled
llama_context:      Metal compute buffer size =   307.00 MiB
llama_context:        CPU compute buffer size =    65.01 MiB
llama_context: graph nodes  = 3543
llama_context: graph splits = 2
common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)
ggml_metal_synchronize: error: command buffer 0 failed with status 5
/Users/mala/workspace/llama.cpp/ggml/src/ggml-metal/ggml-metal-context.m:235: fatal error
error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)
WARNING: Using native backtrace. Set GGML_BACKTRACE_LLDB for more info.
0   libggml-base.0.9.5.dylib            0x000000010579936c ggml_print_backtrace + 276
1   libggml-base.0.9.5.dylib            0x0000000105799558 ggml_abort + 156
2   libggml-metal.0.9.5.dylib           0x00000001053f61b8 ggml_metal_synchronize + 208
"""

# ollama/ollama#11555 (0.9.6, RX 9070): hipBLASLt's lazy library missing is logged, and the server serves on.
ROCBLASLT = """\
Jul 28 15:11:48 ubuntu24 ollama[307422]: rocblaslt error: Cannot read /usr/local/lib/ollama/rocm/hipblaslt/library/TensileLibrary_lazy_gfx1201.dat: No such file or directory
Jul 28 15:11:48 ubuntu24 ollama[307422]: rocblaslt error: Could not load /usr/local/lib/ollama/rocm/hipblaslt/library/TensileLibrary_lazy_gfx1201.dat
Jul 28 15:11:48 ubuntu24 ollama[307422]: hipBLASLt error: Heuristic Fetch Failed
"""


def _replay(tmp_path: Path, text: str, engine: str | None = None) -> dict[str, object]:
    log = tmp_path / "server.log"
    log.write_text(text)
    _, verdict = replay_path(log, engine)
    return {
        "state": verdict.state,
        "category": verdict.error.category if verdict.error else None,
        "summary": verdict.error.summary if verdict.error else "",
        "hint": (verdict.error.hint or "") if verdict.error else "",
    }


def test_rocblas_without_kernels_for_the_gpu_is_the_cause_not_the_abort(tmp_path: Path) -> None:
    got = _replay(tmp_path, ROCBLAS, "llamacpp")
    assert got["state"] == State.CRASHED
    assert got["category"] == "cuda"
    assert str(got["summary"]).startswith(
        "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary"
    )
    assert "HSA_OVERRIDE_GFX_VERSION" in str(got["hint"])


def test_a_hip_binary_without_code_for_the_gpu_is_the_cause(tmp_path: Path) -> None:
    got = _replay(tmp_path, HIP)
    assert got["state"] == State.CRASHED
    assert got["category"] == "cuda"
    assert "hipErrorNoBinaryForGpu: Coudn't find binary for current devices!" in str(got["summary"])


def test_metal_out_of_memory_is_the_cause_of_ggmls_fatal_error(tmp_path: Path) -> None:
    got = _replay(tmp_path, METAL, "llamacpp")
    assert got["state"] == State.CRASHED
    assert got["category"] == "oom"
    assert (
        got["summary"] == "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"
    )


def test_hipblaslt_missing_its_lazy_library_is_no_crash(tmp_path: Path) -> None:
    # rocBLAS aborts without its library; hipBLASLt logs the same words in lower case and goes on
    assert _replay(tmp_path, ROCBLASLT, "ollama")["state"] != State.CRASHED


# open-mpi/ompi#10641 (Open MPI 5, PRRTE's help text): mpirun refuses before any rank starts.
MPI_SLOTS = """\
--------------------------------------------------------------------------
There are not enough slots available in the system to satisfy the 144
slots that were requested by the application:

  /home/ec2-user/mtt-scratch/installs/wogy/tests/ibm/ibm/collective/alltoallv_somezeros

Either request fewer slots for your application, or make more slots
available for use.
"""


def test_mpirun_without_enough_slots_is_a_configuration_crash(tmp_path: Path) -> None:
    got = _replay(tmp_path, MPI_SLOTS, "trtllm")
    assert got["state"] == State.CRASHED
    assert got["category"] == "config"
    assert str(got["summary"]).startswith("There are not enough slots available in the system")
    assert "--oversubscribe" in str(got["hint"])


# run-llama/llama_index#12318 (TensorRT-LLM 0.8): TensorRT's own logger says why the engine cannot load, then the
# Python runtime's assert finds no engine.
TRT_DEVICE = """\
[03/27/2024-11:09:02] [TRT] [E] 6: The engine plan file is generated on an incompatible device, expecting compute 8.0 got compute 8.9, please rebuild.
[03/27/2024-11:09:02] [TRT] [E] 2: [engine.cpp::deserializeEngine::1148] Error Code 2: Internal Error (Assertion engine->deserialize(start, size, allocator, runtime) failed. )
Traceback (most recent call last):
  File "/opt/tritonserver/ai.py", line 76, in <module>
    llm = LocalTensorRTLLM(
  File "/usr/local/lib/python3.10/dist-packages/llama_index/llms/nvidia_tensorrt/base.py", line 175, in __init__
    decoder = tensorrt_llm.runtime.GenerationSession(
  File "/usr/local/lib/python3.10/dist-packages/tensorrt_llm/runtime/generation.py", line 492, in __init__
    self.runtime = _Runtime(engine_buffer, mapping)
  File "/usr/local/lib/python3.10/dist-packages/tensorrt_llm/runtime/generation.py", line 155, in __init__
    self.__prepare(mapping, engine_buffer)
  File "/usr/local/lib/python3.10/dist-packages/tensorrt_llm/runtime/generation.py", line 176, in __prepare
    assert self.engine is not None
AssertionError
"""

# triton-inference-server/triton_cli#59 (TensorRT-LLM 0.9 in Triton): the C++ runtime's copy of the same.
TRT_VERSION = """\
[TensorRT-LLM][ERROR] 6: The engine plan file is not compatible with this version of TensorRT, expecting library version 9.2.0.5 got 9.3.0.1, please rebuild.
[TensorRT-LLM][ERROR] 2: [engine.cpp::deserializeEngine::1148] Error Code 2: Internal Error (Assertion engine->deserialize(start, size, allocator, runtime) failed. )
"""


def test_an_engine_plan_of_another_gpu_is_the_cause_not_the_assert_after_it(tmp_path: Path) -> None:
    got = _replay(tmp_path, TRT_DEVICE)
    assert got["state"] == State.CRASHED
    assert got["category"] == "model_load"
    assert str(got["summary"]).startswith("6: The engine plan file is generated on an incompatible device")
    assert "trtllm-build" in str(got["hint"])


def test_an_engine_plan_of_another_tensorrt_is_model_load_not_config(tmp_path: Path) -> None:
    # "is not compatible with" alone is a configuration phrase: TensorRT's wording says what failed
    got = _replay(tmp_path, TRT_VERSION, "trtllm")
    assert got["state"] == State.CRASHED
    assert got["category"] == "model_load"
    assert "not compatible with this version of TensorRT" in str(got["summary"])


# llama.cpp's SYCL backend out of device memory, in the words its docs (docs/backend/SYCL.md) quote: the device
# allocation, then the buffer's wrapper, then llama.cpp giving up on the model.
SYCL = """\
ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate 3503030272 Bytes of memory on device
alloc_tensor_range: failed to allocate SYCL0 buffer of size 3503030272
llama_model_load: error loading model: unable to allocate SYCL0 buffer
llama_model_load_from_file_impl: failed to load model
"""


def test_a_sycl_device_allocation_that_fails_is_the_oom_cause(tmp_path: Path) -> None:
    got = _replay(tmp_path, SYCL, "llamacpp")
    assert got["state"] == State.CRASHED
    assert got["category"] == "oom"
    assert str(got["summary"]).endswith("can't allocate 3503030272 Bytes of memory on device")


# NVIDIA/TensorRT#2195 (TensorRT 8.4): the serialization header of an engine built by another TensorRT.
TRT_ARCHIVE = """\
[08/01/2022-15:41:44] [TRT] [E] 1: [stdArchiveReader.cpp::StdArchiveReader::35] Error Code 1: Serialization (Serialization assertion safeVersionRead == safeSerializationVersion failed.Version tag does not match. Note: Current Version: 0, Serialized Engine Version: 96)
[08/01/2022-15:41:44] [TRT] [E] 4: [runtime.cpp::deserializeCudaEngine::50] Error Code 4: Internal Error (Engine deserialization failed.)
"""


def test_an_engine_whose_serialization_version_does_not_match_is_model_load(tmp_path: Path) -> None:
    got = _replay(tmp_path, TRT_ARCHIVE, "trtllm")
    assert got["state"] == State.CRASHED
    assert got["category"] == "model_load"
    assert "Version tag does not match" in str(got["summary"])
    assert "trtllm-build" in str(got["hint"])
