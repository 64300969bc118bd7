"""The category of real error lines (most from threads of 2025-2026), each replayed as a tiny log (issue 30).

Each line is an inference server's error as a public thread shows it (the thread is named above it; a few, where no
thread was found, are the library's own wording, named as such), with the frames that decide where it was raised.
The category is the one an expert gives from what failed, written down before the tool was run on it; `[other on
arrival]` marks the lines the tool categorised otherwise before the rules that came with this table (63 of 97).
"""

from __future__ import annotations

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import build_verdict
from watchdog.profiles.loader import load_engine

_SP = "/usr/local/lib/python3.12/dist-packages/"  # where the libraries of a frame live


def _log(frames: tuple[str, ...] | None, line: str) -> str:
    # a Python traceback ending in `line`, its frames (path:function) innermost last, from a process's main; or,
    # for a native library's line (frames None), the line alone
    if frames is None:
        return line + "\n"
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/runpy.py", line 198, in _run_module_as_main',
        "    return _run_code(code, main_globals, None,",
    ]
    for frame in frames:
        path, fn = frame.rsplit(":", 1)
        lines += [f'  File "{path}", line 1, in {fn}', "    call()"]
    return "\n".join([*lines, line]) + "\n"


@pytest.mark.parametrize(
    ("engine", "frames", "line", "category"),
    [
        # -- torch: the CUDA, HIP, XPU and NPU runtimes, cuBLAS, its own checks, its extensions
        # verl-project/verl#1691 (2025)
        pytest.param(
            "vllm",
            (),
            "RuntimeError: CUDA error: unspecified launch failure",
            "cuda",
            id="cuda-unspecified-launch-failure",
        ),
        # verl-project/verl#3579 (2025, SGLang rollout), vllm-project/vllm#50934 (2026)
        pytest.param(
            "sglang", (), "RuntimeError: CUDA error: misaligned address", "cuda", id="cuda-misaligned-address"
        ),
        # wording of cudaErrorDevicesUnavailable (exclusive-process GPU) (no thread found)
        pytest.param(
            "vllm",
            (),
            "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
            "cuda",
            id="cuda-device-busy",
        ),
        # gpustack/gpustack#1540 (2025, vLLM) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW",
            "cuda",
            id="cudagetdevicecount-804",
        ),
        # gpustack/gpustack#1254 (2025)
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized",
            "cuda",
            id="cudagetdevicecount-802",
        ),
        # lllyasviel/Fooocus#1313 (aten/src/ATen/cuda/detail/CUDAHooks.cpp) [other on arrival]
        pytest.param(
            "tgi",
            (),
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.",
            "cuda",
            id="driver-too-old",
        ),
        # vllm-project/vllm#8893 (2025 comments), #12189 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method",
            "cuda",
            id="cannot-reinit-cuda-forked",
        ),
        # zai-org/CogVideo#665 (2025), vllm-project/vllm#8180 [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "torch/nn/modules/linear.py:forward",),
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "oom",
            id="cublas-alloc-failed",
        ),
        # vllm-project/vllm#4599; c10/util/Exception TORCH_INTERNAL_ASSERT [other on arrival]
        pytest.param(
            "vllm",
            (),
            'RuntimeError: t == DeviceType::CUDA INTERNAL ASSERT FAILED at "/opt/hostedtoolcache/Python/3.10.14/x64/lib/python3.10/site-packages/torch/include/c10/cuda/impl/CUDAGuardImpl.h":25, please report a bug to PyTorch. ',
            "assertion",
            id="internal-assert-cudaguard",
        ),
        # junjie18/CMT#95 (flash-attn's TORCH_CHECK(is_sm8x || is_sm75)) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Expected is_sm8x || is_sm75 to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)",
            "unsupported",
            id="torch-check-is-sm",
        ),
        # Zhanxin-Gao/CPrompt#7 (2025; torch.load of a file that is no torch archive) [other on arrival]
        pytest.param(
            "vllm",
            (
                _SP + "vllm/model_executor/model_loader/weight_utils.py:pt_weights_iterator",
                _SP + "torch/serialization.py:load",
                _SP + "torch/serialization.py:_load",
            ),
            'RuntimeError: Expected hasRecord("version") to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)',
            "model_load",
            id="torch-check-hasrecord",
        ),
        # hanyangyu1021/LMGaussian#13 (2025) [other on arrival]
        pytest.param(
            "tgi",
            (_SP + "torch/serialization.py:load", _SP + "torch/serialization.py:__init__"),
            "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
            "model_load",
            id="torch-load-zip",
        ),
        # intel/intel-extension-for-pytorch#863 (2025)
        pytest.param(
            "vllm",
            (),
            "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 15.11 GiB.",
            "oom",
            id="xpu-oom",
        ),
        # vllm-project/vllm-ascend#1987 (2025)
        pytest.param(
            "vllm",
            (),
            "RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 0; 60.97 GiB total capacity; 58.92 GiB already allocated; 58.92 GiB current active; 1.66 GiB free; 58.95 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
            "oom",
            id="npu-oom",
        ),
        # intel/intel-extension-for-pytorch#780 (2025); intel/llm-scaler#424 (2026) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
            "cuda",
            id="xpu-ur-device-lost",
        ),
        # vllm-project/vllm#11173 (2025, XPU) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "intel_extension_for_pytorch/nn/utils/_quantize_convert.py:apply_order",),
            "RuntimeError: UR error",
            "cuda",
            id="xpu-ur-error",
        ),
        # wording of HIP hipErrorInvalidDeviceFunction (no code object for this gfx) (no thread found)
        pytest.param(
            "vllm",
            (),
            "RuntimeError: HIP error: invalid device function",
            "cuda",
            id="hip-invalid-device-function",
        ),
        # vllm-project/vllm-ascend#780, #516 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "torch/cuda/__init__.py:_lazy_init",),
            "AssertionError: Torch not compiled with CUDA enabled",
            "import",
            id="torch-not-compiled-cuda",
        ),
        # vllm-project/vllm-metal#102 (2026), vllm-project/vllm-ascend#477 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: operator torchvision::nms does not exist",
            "import",
            id="torchvision-nms-missing",
        ),
        # wording of torch/_classes.py (no thread found): vLLM's _core_C extension not loaded [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Tried to instantiate class '_core_C.ScalarType', but it does not exist! Ensure that it is registered via torch::class_",
            "import",
            id="vllm-core-c-class-missing",
        ),
        # -- torch.distributed: NCCL, gloo, the rendezvous store
        # vllm-project/vllm#20226 (2025)
        pytest.param(
            "vllm",
            (_SP + "vllm/distributed/device_communicators/pynccl_wrapper.py:NCCL_CHECK",),
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
            "nccl",
            id="pynccl-unhandled-cuda",
        ),
        # wording of vllm pynccl_wrapper.NCCL_CHECK (no thread found)
        pytest.param(
            "vllm",
            (_SP + "vllm/distributed/device_communicators/pynccl_wrapper.py:NCCL_CHECK",),
            "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)",
            "nccl",
            id="pynccl-invalid-usage",
        ),
        # wording of torch/distributed/elastic/utils/store.py (a rank that never joined the rendezvous) (no thread found)
        pytest.param(
            "sglang",
            (),
            "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.",
            "nccl",
            id="diststore-timeout-clients",
        ),
        # wording of torch c10d socket.cpp (no thread found)
        pytest.param(
            "vllm",
            (),
            "torch.distributed.DistNetworkError: The client socket has failed to connect to [10.0.0.1]:29500 (errno: 110 - Connection timed out).",
            "nccl",
            id="distnetwork-connect",
        ),
        # meta-llama/llama#436 (2024), meta-llama/codellama#125 [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
            "cuda",
            id="pg-nccl-no-gpus",
        ),
        # verl-project/verl#967 (2025, vLLM), sgl-project/sglang#3226 (2025), gpustack/gpustack#2125 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
            "nccl",
            id="gloo-fullmesh",
        ),
        # -- torch.compile, Triton and the kernels built at run time (torch cpp_extension, FlashInfer JIT)
        # vllm-project/vllm#28982 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "torch/_inductor/scheduler.py:_codegen",),
            "torch._inductor.exc.InductorError: AssertionError: type(self)=<class 'torch._inductor.scheduler.Scheduler'>",
            "assertion",
            id="inductor-assertion",
        ),
        # vllm-project/vllm#41106 (2026) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "torch/_inductor/pattern_matcher.py:replace_by_example",),
            "torch._inductor.exc.InductorError: AssertionError: ",
            "assertion",
            id="inductor-assertion-bare",
        ),
        # vllm-project/vllm#25604 (2025); BoltzmannEntropy/vLLM-5090#1 [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "torch/_dynamo/exc.py:unimplemented",),
            "torch._dynamo.exc.Unsupported: non-function or method super: <built-in function _disabled_torch_function_impl>",
            "unsupported",
            id="dynamo-unsupported",
        ),
        # vllm-project/vllm#41257 (2026)
        pytest.param(
            "vllm",
            (_SP + "torch/_dynamo/convert_frame.py:_compile",),
            "torch._dynamo.exc.InternalTorchDynamoError: AcceleratorError: CUDA error: misaligned address",
            "cuda",
            id="dynamo-internal-accel",
        ),
        # vllm-project/vllm#15329 (2025); triton/runtime/build.py [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "triton/runtime/build.py:_build",),
            "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
            "import",
            id="triton-no-c-compiler",
        ),
        # unslothai/unsloth#218 (2025), vllm-project/vllm#15013 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (
                _SP + "triton/backends/nvidia/driver.py:compile_module_from_src",
                _SP + "triton/runtime/build.py:_build",
                "/usr/lib/python3.12/subprocess.py:check_call",
            ),
            "subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpgnfpi10g/main.c', '-O3', '-shared', '-fPIC', '-Wno-psabi', '-o', '/tmp/tmpgnfpi10g/cuda_utils.cpython-311-x86_64-linux-gnu.so', '-lcuda', '-I/usr/include/python3.11']' returned non-zero exit status 1.",
            "import",
            id="triton-gcc-failed",
        ),
        # hustvl/Vim#130 (2025), vllm-project/vllm#3808 (2025 comments) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "triton/common/build.py:libcuda_dirs",),
            "AssertionError: libcuda.so cannot found!",
            "import",
            id="triton-libcuda-not-found",
        ),
        # vllm-project/vllm#29178, #24289 (2025), zai-org/GLM-V#122 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "triton_kernels/numerics_details/flexpoint.py:<module>",),
            "AttributeError: module 'triton.language' has no attribute 'constexpr_function'",
            "import",
            id="triton-constexpr-function",
        ),
        # wording of torch inductor with another triton (no thread found)
        pytest.param(
            "sglang",
            (),
            "ImportError: cannot import name 'triton_key' from 'triton.compiler.compiler' (/usr/local/lib/python3.10/dist-packages/triton/compiler/compiler.py)",
            "import",
            id="triton-importerror-name",
        ),
        # wording of triton/runtime/errors.py (no thread found)
        pytest.param(
            "sglang",
            (),
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 106496, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
            "unsupported",
            id="triton-oor-shared-mem",
        ),
        # sgl-project/sglang#6801 (2025) [other on arrival]
        pytest.param(
            "sglang",
            (_SP + "torch/utils/cpp_extension.py:_run_ninja_build",),
            "RuntimeError: Error building extension 'batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_qk_128_head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_f16qk_False'",
            "import",
            id="cpp-ext-build",
        ),
        # sgl-project/sglang#3553 (2025), ROCm/DeepEP#1 (2025) [other on arrival]
        pytest.param(
            "sglang",
            (_SP + "torch/utils/cpp_extension.py:_join_cuda_home",),
            "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.",
            "import",
            id="cuda-home-unset",
        ),
        # THUDM/slime#1314 (2026, SGLang), modelscope/ms-swift#7100 (2025, vLLM) [other on arrival]
        pytest.param(
            "sglang",
            (_SP + "flashinfer/jit/cpp_ext.py:run_ninja",),
            "RuntimeError: Ninja build failed. Ninja output:",
            "import",
            id="ninja-build-failed",
        ),
        # flashinfer-ai/flashinfer#1781 (2025, vLLM 0.11.0rc2) [other on arrival]
        pytest.param(
            "vllm",
            (
                _SP + "flashinfer/jit/cpp_ext.py:get_cuda_version",
                "/usr/lib/python3.10/subprocess.py:_execute_child",
            ),
            "FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'",
            "import",
            id="nvcc-filenotfound",
        ),
        # flashinfer-ai/flashinfer#1919 (2025, vLLM with FlashInfer 0.4.0) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Worker failed with error 'Could not find nvcc', please check the stack trace above for the root cause",
            "import",
            id="flashinfer-no-nvcc",
        ),
        # -- attention and expert-parallel kernels: flash-attn, xformers, FlashInfer, DeepEP, DeepGEMM
        # Dao-AILab/flash-attention#1645 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: CK only supports head dimension at most 256",
            "unsupported",
            id="fa-ck-head-dim",
        ),
        # wording of flash-attention csrc/flash_attn/flash_api.cpp (no thread found) [other on arrival]
        pytest.param(
            "tgi",
            (),
            "RuntimeError: FlashAttention forward only supports head dimension at most 256",
            "unsupported",
            id="fa-fwd-head-dim",
        ),
        # facebookresearch/xformers#1191 (2025, vLLM 0.6.6)
        pytest.param(
            "vllm",
            (),
            "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:",
            "unsupported",
            id="xformers-no-operator",
        ),
        # sgl-project/sglang#24714 (2026) [other on arrival]
        pytest.param(
            "sglang",
            (_SP + "sglang/srt/model_executor/cuda_graph_runner.py:__init__",),
            "Exception: Capture cuda graph failed: Error in function 'VariableLengthMergeStates' at /home/jlj/dev/inferno/.venv/lib/python3.12/site-packages/flashinfer/data/include/flashinfer/attention/cascade.cuh:697: Unsupported head_dim: 106",
            "unsupported",
            id="sglang-capture-flashinfer-headdim",
        ),
        # sgl-project/sglang#6701, #15598 (2025) [other on arrival]
        pytest.param(
            "sglang",
            (_SP + "deep_ep/buffer.py:dispatch",),
            "RuntimeError: DeepEP error: CPU recv timeout",
            "nccl",
            id="deepep-cpu-recv-timeout",
        ),
        # deepseek-ai/DeepEP#424 (2025) [other on arrival]
        pytest.param(
            "sglang",
            (_SP + "deep_ep/buffer.py:dispatch",),
            "RuntimeError: DeepEP error: timeout (dispatch CPU)",
            "nccl",
            id="deepep-timeout-dispatch",
        ),
        # deepseek-ai/DeepGEMM#140 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "vllm/utils/deep_gemm.py:fp8_gemm_nt",),
            "RuntimeError: Failed: Assertion error csrc/jit_kernels/impls/smxx_layout.hpp:136 'mn % 4 == 0 and num_groups == 1'",
            "assertion",
            id="deepgemm-failed-assertion",
        ),
        # llm-d/llm-d#1269 (2026) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "vllm/utils/deep_gemm.py:fp8_gemm_nt",),
            "RuntimeError: Assertion error (csrc/apis/../jit_kernels/impls/../../jit/kernel_runtime.hpp:45): exit_code == 0",
            "assertion",
            id="deepgemm-assertion-paren",
        ),
        # vllm-project/vllm#41094 (2026) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Assertion error (/workspace/.deps/deepgemm-src/csrc/apis/attention.hpp:201): context_lens.is_contiguous()",
            "assertion",
            id="deepgemm-assertion-ctx",
        ),
        # -- the model's files: safetensors, transformers, tokenizers, sentencepiece, the Hugging Face hub
        # wording of safetensors (a truncated shard) (no thread found)
        pytest.param(
            "vllm",
            (),
            "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
            "model_load",
            id="safetensors-incomplete",
        ),
        # agentscope-ai/QwenPaw#3084 (2026, vLLM 0.19), ml-explore/mlx-lm#683 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "transformers/models/auto/tokenization_auto.py:from_pretrained",),
            "ValueError: Tokenizer class TokenizersBackend does not exist or is not currently imported.",
            "model_load",
            id="transformers-tokenizersbackend",
        ),
        # allenai/open-instruct#738 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "transformers/tokenization_utils_fast.py:__init__",),
            "Exception: data did not match any variant of untagged enum ModelWrapper at line 1251012 column 3",
            "model_load",
            id="tokenizers-untagged-modelwrapper",
        ),
        # Vision-CAIR/ChatCaptioner#8; tokenizers serde [other on arrival]
        pytest.param(
            "tgi",
            (_SP + "transformers/tokenization_utils_fast.py:__init__",),
            "Exception: data did not match any variant of untagged enum PyPreTokenizerTypeWrapper at line 964 column 3",
            "model_load",
            id="tokenizers-untagged-pretok",
        ),
        # OpenGVLab/InternVL#298; chatchat-space/Langchain-Chatchat#3103 (2025 comment) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "sentencepiece/__init__.py:LoadFromFile",),
            "RuntimeError: Internal: could not parse ModelProto from /root/app/CustomLLM/InternVL-Chat-V1-5/tokenizer.model",
            "model_load",
            id="sentencepiece-modelproto",
        ),
        # opea-project/GenAIExamples#2237 (2025, vLLM 0.10.0) [other on arrival]
        pytest.param(
            "tgi",
            (_SP + "requests/models.py:raise_for_status",),
            "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/meta-llama/Meta-Llama-3-8B-Instruct/resolve/main/config.json",
            "model_load",
            id="hf-401-requests",
        ),
        # Avarok-Cybersecurity/dgx-vllm#16 (2026, vLLM), AUTOMATIC1111/stable-diffusion-webui#17165 (huggingface_hub over requests: the hub unreachable) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "requests.exceptions.ConnectionError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: /api/models/Qwen/Qwen3-8B (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno 101] Network is unreachable'))\"), '(Request ID: 1a2b)')",
            "model_load",
            id="hf-maxretry",
        ),
        # wording of huggingface_hub/utils/_http.py hf_raise_for_status (no thread found)
        pytest.param(
            "vllm",
            (),
            "huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: https://huggingface.co/api/models/Qwen/Qwen3-8B/revision/main",
            "model_load",
            id="hf-hub-429",
        ),
        # -- addresses, clusters and files: ZeroMQ, sockets, Uvicorn, Ray, a cache folder
        # vllm-project/vllm#31884 (2026), sgl-project/sglang#4877 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "zmq/sugar/socket.py:bind",),
            "zmq.error.ZMQError: Cannot assign requested address (addr='tcp://10.27.91.102:13345')",
            "config",
            id="zmq-cannot-assign",
        ),
        # gpustack/gpustack#3658 (2025, vLLM 0.11.2) [other on arrival]
        pytest.param(
            "vllm", (), "OSError: [Errno 99] Cannot assign requested address", "config", id="oserror-99-bind"
        ),
        # hummingbot/condor#67 (2026, Uvicorn) [other on arrival]
        pytest.param(
            "vllm",
            None,
            "ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): [errno 13] permission denied",
            "config",
            id="uvicorn-errno13",
        ),
        # vllm-project/vllm#29265 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "vllm/v1/executor/ray_utils.py:initialize_ray_cluster",),
            "ValueError: Current node has no GPU available. current_node_resource={'CPU': 32.0, 'memory': 1.2e11}. vLLM engine cannot start without GPU. Make sure you have at least 1 GPU available in a node current_node_id='abc' current_ip='10.0.0.5'.",
            "cuda",
            id="ray-no-gpu-node",
        ),
        # ray-project/ray#51242 (2025, vLLM under Ray Serve) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "vllm/executor/ray_utils.py:initialize_ray_cluster",),
            "ValueError: Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement group or running the driver on a GPU node.",
            "cuda",
            id="ray-driver-no-gpu",
        ),
        # vllm-project/vllm#26028 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "vllm/v1/executor/ray_utils.py:initialize_ray_cluster",),
            "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.",
            "config",
            id="ray-placement-gpus",
        ),
        # vllm-project/vllm#20127 (2025, vLLM 0.9.1 on OpenShift) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "PermissionError: [Errno 13] Permission denied: '/.cache'",
            "config",
            id="permission-denied-cache",
        ),
        # -- the engines' own raises
        # wording of vllm model_executor/layers/quantization (get_min_capability check) (no thread found)
        pytest.param(
            "vllm",
            (_SP + "vllm/config/__init__.py:_verify_quantization",),
            "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. Current capability: 80.",
            "unsupported",
            id="vllm-fp8-capability",
        ),
        # wording of vllm platforms/cuda.py check_if_supports_dtype (no thread found)
        pytest.param(
            "vllm",
            (),
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
            "unsupported",
            id="vllm-bf16-capability",
        ),
        # vllm-project/vllm#31480 (2025), #32732 (2026)
        pytest.param(
            "vllm",
            (_SP + "vllm/platforms/cuda.py:get_attn_backend_cls",),
            "ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16, kv_cache_dtype=auto, block_size=None, use_mla=True, has_sink=False, use_sparse=True, use_mm_prefix=False, attn_type=decoder). Reasons: {FLASH_ATTN_MLA: [sparse not supported, compute capability not supported, FlashAttention MLA not supported on this device], FLASHMLA: [sparse not supported, compute capability not supported, FlashMLA Sparse is only supported on Hopper and Blackwell devices.], FLASHINFER_MLA: [sparse not supported, compute capability not supported], TRITON_MLA: [sparse not supported], FLASHMLA_SPARSE: [compute capability not supported]}.",
            "unsupported",
            id="vllm-no-valid-backend",
        ),
        # vllm-project/vllm#30214 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "vllm/platforms/cuda.py:get_attn_backend_cls",),
            "ValueError: Selected backend AttentionBackendEnum.CUTLASS_MLA is not valid for this configuration. Reason: ['sparse not supported']",
            "unsupported",
            id="vllm-backend-not-valid",
        ),
        # wording of vllm config verify_with_parallel_config (no thread found)
        pytest.param(
            "vllm",
            (),
            "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
            "config",
            id="vllm-heads-divisible",
        ),
        # wording of vllm SchedulerConfig._verify_args (no thread found) [other on arrival]
        pytest.param(
            "vllm",
            (),
            "ValueError: max_num_batched_tokens (2048) is smaller than max_model_len (32768). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.",
            "config",
            id="vllm-max-num-batched",
        ),
        # wording of vllm default_loader._prepare_weights (no thread found)
        pytest.param(
            "vllm",
            (),
            "RuntimeError: Cannot find any model weights with `/models/qwen`",
            "model_load",
            id="vllm-no-weights",
        ),
        # vllm-project/vllm#28517 (2025) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "vllm/model_executor/models/utils.py:_load_module",),
            "ValueError: There is no module or parameter named 'mlp_AR' in TransformersForCausalLM",
            "model_load",
            id="vllm-no-param-named",
        ),
        # vllm-project/vllm#21713, #15536 (2025), #44788 (2026) [other on arrival]
        pytest.param(
            "vllm",
            (_SP + "vllm/model_executor/model_loader/default_loader.py:load_weights",),
            "ValueError: Following weights were not initialized from checkpoint: {'model.layers.19.mlp.shared_experts.gate_up_proj.weight', 'model.layers.37.mlp.shared_experts.gate_up_proj.weight'}",
            "model_load",
            id="vllm-weights-not-initialized",
        ),
        # wording of vllm config _get_and_verify_max_len (no thread found)
        pytest.param(
            "vllm",
            (),
            "ValueError: User-specified max_model_len (262144) is greater than the derived max_model_len (max_position_embeddings=40960 or model_max_length=None in model's config.json). This may lead to incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
            "config",
            id="vllm-user-max-model-len",
        ),
        # wording of sglang cuda_graph_runner (raise Exception(f'Capture cuda graph failed: {e}...')) (no thread found)
        pytest.param(
            "sglang",
            (_SP + "sglang/srt/model_executor/cuda_graph_runner.py:__init__",),
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.06 GiB is free.",
            "oom",
            id="sglang-capture-failed-oom",
        ),
        # sgl-project/sglang#4233 (2025), #1533 (2025 comments) [other on arrival]
        pytest.param(
            "sglang",
            (_SP + "sglang/srt/model_executor/model_runner.py:init_torch_distributed",),
            "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=10.2, local_gpu_memory=75.3, local_gpu_memory * 0.9 = 67.8",
            "oom",
            id="sglang-capacity-unbalanced",
        ),
        # NVIDIA/TensorRT-LLM#5950 (2025)
        pytest.param(
            "trtllm",
            (),
            "RuntimeError: Executor creation failed due to insufficient GPU memory.",
            "oom",
            id="trtllm-executor-insufficient",
        ),
        # triton-inference-server/tensorrtllm_backend#281
        pytest.param(
            "trtllm",
            (),
            "RuntimeError: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)",
            "oom",
            id="trtllm-cudamallocasync-oom",
        ),
        # NVIDIA/TensorRT-LLM#1838; tensorrtllm_backend#235 (engine built by another TensorRT/GPU) [other on arrival]
        pytest.param(
            "trtllm",
            (),
            "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Failed to deserialize cuda engine (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmRuntime.cpp:74)",
            "model_load",
            id="trt-deserialize-engine",
        ),
        # NVIDIA/TensorRT-LLM#1950, #1796, #1340 [other on arrival]
        pytest.param(
            "trtllm",
            (_SP + "tensorrt_llm/runtime/model_runner_cpp.py:from_dir",),
            "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/tmp/tritonbuild/tensorrtllm/tensorrt_llm/cpp/tensorrt_llm/runtime/worldConfig.cpp:99)",
            "config",
            id="trtllm-mpisize",
        ),
        # NVIDIA/TensorRT-LLM#1515, #198 [other on arrival]
        pytest.param(
            "trtllm",
            (_SP + "tensorrt_llm/runtime/model_runner_cpp.py:from_dir",),
            "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Unsupported architecture (/tensorrt_llm/cpp/tensorrt_llm/kernels/contextFusedMultiHeadAttention/fmhaRunner.cpp:89)",
            "unsupported",
            id="trtllm-assert-unsupported-arch",
        ),
        # huggingface/text-generation-inference#556; utils/weights.py [other on arrival]
        pytest.param(
            "tgi",
            (_SP + "text_generation_server/utils/weights.py:get_filename",),
            "RuntimeError: weight model.embed_tokens.weight does not exist",
            "model_load",
            id="tgi-weight-not-exist",
        ),
        # wording of TGI server/text_generation_server/utils/weights.py (huggingface/text-generation-inference#1019's review) [other on arrival]
        pytest.param(
            "tgi",
            (_SP + "text_generation_server/utils/weights.py:get_multi_weights_col",),
            "RuntimeError: Cannot load `awq` weight, make sure the model is already quantized",
            "model_load",
            id="tgi-cannot-load-awq",
        ),
        # wording of TGI flash_causal_lm.warmup (no thread found)
        pytest.param(
            "tgi",
            (),
            "RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`",
            "oom",
            id="tgi-not-enough-prefill",
        ),
        # -- native lines of ggml (llama.cpp, Ollama's runner) and Ollama's own
        # wording of llama.cpp llama-model-loader check_tensor_dims (no thread found)
        pytest.param(
            "llamacpp",
            None,
            "llama_model_load: error loading model: check_tensor_dims: tensor 'output.weight' has wrong shape; expected  4096, 128256, got  4096, 128257,     1,     1",
            "model_load",
            id="llamacpp-wrong-shape",
        ),
        # wording of llama.cpp llama-model-loader (a truncated GGUF) (no thread found)
        pytest.param(
            "llamacpp",
            None,
            "llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is not within the file bounds, model is corrupted or incomplete",
            "model_load",
            id="llamacpp-not-within-bounds",
        ),
        # wording of ggml-cuda ggml_cuda_error (driver older than the build's CUDA) (no thread found)
        pytest.param(
            "llamacpp",
            None,
            "CUDA error: the provided PTX was compiled with an unsupported toolchain.",
            "cuda",
            id="ggml-cuda-ptx-toolchain",
        ),
        # ggml-org/llama.cpp#8492
        pytest.param(
            "llamacpp",
            None,
            "ggml_vulkan: Device memory allocation of size 1610612736 failed.",
            "oom",
            id="ggml-vulkan-oom",
        ),
        # wording of ollama serve (Go net.Listen) (no thread found)
        pytest.param(
            "ollama",
            None,
            "Error: listen tcp 127.0.0.1:11434: bind: address already in use",
            "port_in_use",
            id="ollama-bind-in-use",
        ),
        # ollama/ollama#9758 (2025), #12986 (2025) [other on arrival]
        pytest.param(
            "ollama",
            None,
            "Error: pull model manifest: file does not exist",
            "model_load",
            id="ollama-manifest",
        ),
        # ollama/ollama#12597, #13411 (2025), #14876 (2026) [other on arrival]
        pytest.param("ollama", None, "Error: pull model manifest: 412:", "unsupported", id="ollama-412"),
        # ollama/ollama#7946 [other on arrival]
        pytest.param(
            "ollama",
            None,
            "Error: this model is not supported by your version of Ollama. You may need to upgrade",
            "unsupported",
            id="ollama-not-supported-version",
        ),
        # ollama/ollama#14065 (2026) [other on arrival]
        pytest.param(
            "ollama",
            None,
            'Error: 500 Internal Server Error: llama runner process has terminated: GGML_ASSERT(false && "unsupported minicpmv version") failed',
            "unsupported",
            id="ollama-ggml-assert-unsupported",
        ),
        # ollama/ollama#11710 (2025) [other on arrival]
        pytest.param(
            "ollama",
            None,
            "Error: 500 Internal Server Error: unable to load model: /data/ollama_models/blobs/sha256-7dd573dc3e0ba2e7d6bf76e16d400cf69b6afc2ae58f213e4eb1d133c38e938b",
            "model_load",
            id="ollama-unable-load",
        ),
        # wording of ollama llm/server.go (no thread found)
        pytest.param(
            "ollama",
            None,
            "Error: model requires more system memory (7.5 GiB) than is available (3.2 GiB)",
            "oom",
            id="ollama-system-memory",
        ),
        # wording of ollama runner via llama.cpp (no thread found)
        pytest.param(
            "ollama",
            None,
            "Error: 500 Internal Server Error: llama runner process has terminated: error loading model: unable to allocate CUDA0 buffer",
            "oom",
            id="ollama-unable-alloc-buffer",
        ),
    ],
)
def test_a_real_error_line_gets_the_category_of_what_failed(
    engine: str, frames: tuple[str, ...] | None, line: str, category: str
) -> None:
    """A launch that dies of a real error line crashes with that line as its cause and the category an expert
    gives from what failed: the exception's class, its library's wording, where it was raised."""
    analyzer = Analyzer(load_engine(engine))
    analyzer.feed(_log(frames, line).encode(), now=0.0)
    analyzer.finish(now=0.0)
    verdict = build_verdict(analyzer).to_json()
    assert verdict["state"] == "crashed"
    error = verdict["error"]
    assert isinstance(error, dict)
    assert str(error["summary"]).strip() in line
    assert error["category"] == category
