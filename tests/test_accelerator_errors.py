"""Accelerator runtimes other than CUDA's, each error line as its runtime prints it (issue 30, i30-accel).

ROCm/HIP, Intel XPU (SYCL's Unified Runtime, Level Zero, oneCCL), Ascend (torch_npu's NPU_CHECK_ERROR and
HCCL_CHECK_ERROR), Intel Gaudi (Synapse through its bridge) and Google TPU (XLA's status codes through jax and
torch_xla). 16 lines are as public threads and
logs of 2024-2026 show them (named above each); 9, marked "form", are built as the runtime's source builds its message
(values filled in) where no thread was found. The category is what failed:
out of device memory `oom`, the runtime's own fault `cuda`, the collective library's `nccl`, a kernel the backend
lacks `unsupported` (docs/categories.md). Each is `other` (or another category) without the rules of common.toml's
accelerator section.
"""

from __future__ import annotations

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import build_verdict
from watchdog.profiles.loader import load_engine

_FRAMES = (
    ("/usr/local/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", "load_model"),
    ("/usr/local/lib/python3.11/site-packages/torch/_ops.py", "__call__"),
)


def _crash_error(line: str) -> dict[str, object]:
    # the verdict's error for a launch whose log ends in a Python traceback ending in `line`, as a worker prints the
    # exception its runtime raised; the launch must be a crash
    lines = ["Traceback (most recent call last):"]
    for path, fn in _FRAMES:
        lines += [f'  File "{path}", line 1, in {fn}', "    call()"]
    analyzer = Analyzer(load_engine("vllm"))
    analyzer.feed(("\n".join([*lines, line]) + "\n").encode(), now=0.0)
    analyzer.finish(now=0.0)
    verdict = build_verdict(analyzer).to_json()
    assert verdict["state"] == "crashed"
    error = verdict["error"]
    assert isinstance(error, dict)
    return error


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # -- ROCm: HIP's enum name as older hipGetErrorString returns it; hipBLAS's handle allocation
        # ROCm troubleshooting tables of vLLM on ROCm (2025): 'RuntimeError: HIP error: hipErrorOutOfMemory'
        pytest.param("RuntimeError: HIP error: hipErrorOutOfMemory", "oom", id="hip-error-oom-name"),
        # form: CublasHandlePool.cpp hipified (torch ROCm builds)
        pytest.param(
            "RuntimeError: CUDA error: HIPBLAS_STATUS_ALLOC_FAILED when calling `hipblasCreate(handle)`",
            "oom",
            id="hipblas-alloc-failed",
        ),
        # -- Intel XPU: SYCL's report of a failed Unified Runtime call, Level Zero's names, oneCCL's exception
        # vLLM-XPU TP=2 all-reduce at start (2026)
        pytest.param(
            "RuntimeError: level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
            "oom",
            id="xpu-level-zero-oom",
        ),
        # llama.cpp#25286 (2026, the bracketed form)
        pytest.param(
            "RuntimeError: level_zero backend failed with error: 39 [UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY]",
            "oom",
            id="xpu-level-zero-oom-brackets",
        ),
        # form: the older 'UR backend failed' wording of ipex-llm#12872 (2025, its code 40 there), which the generic
        # UR rule took for cuda
        pytest.param(
            "RuntimeError: UR backend failed. UR backend returns:39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
            "oom",
            id="xpu-ur-backend-oom",
        ),
        # IPEX Marlin weight shuffle under vLLM on Lunar Lake (2026)
        pytest.param(
            "RuntimeError: level_zero backend failed with error: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
            "cuda",
            id="xpu-level-zero-device-lost",
        ),
        # form: Level Zero's own result name as llama.cpp#21747 (2026) quotes it, raised bare
        pytest.param("RuntimeError: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", "oom", id="level-zero-ze-oom"),
        # IPEX-LLM's multi-card troubleshooting (oneCCL under torch.distributed)
        pytest.param(
            "RuntimeError: oneCCL: comm_selector.cpp:57 create_comm_impl: EXCEPTION: ze_data was not initialized",
            "nccl",
            id="oneccl-exception",
        ),
        # vLLM-XPU in a container without /dev/dri listed (2026)
        pytest.param(
            "RuntimeError: oneCCL: ze_fd_manager.cpp:144 init_device_fds: EXCEPTION: opendir failed: could not open"
            " device directory",
            "nccl",
            id="oneccl-fd-manager",
        ),
        # -- Ascend: torch_npu's HCCL_CHECK_ERROR and NPU_CHECK_ERROR ('<func>:<file>:<line> ... error code is N')
        # vllm-ascend (2025-12): HCCL's socket port taken
        pytest.param(
            "RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:149 HCCL function error:"
            " hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is 7",
            "nccl",
            id="hccl-function-error",
        ),
        # vllm-ascend CI (2025-06)
        pytest.param(
            "RuntimeError: createHCCLComm:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1508 HCCL function error:"
            " HcclGetRootInfo(&hcclID), error code is 7",
            "nccl",
            id="hccl-get-root-info",
        ),
        # vLLM-Ascend engine core (2025-10): the DMA hardware's error under a device synchronize
        pytest.param(
            "RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:508 NPU function"
            " error: AclrtSynchronizeDeviceWithTimeout, error code is 507013",
            "cuda",
            id="npu-function-error-507013",
        ),
        # a model server on Ascend (2025-11): the device fails to start
        pytest.param(
            "RuntimeError: Initialize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:152 NPU function error:"
            " c10_npu::SetDevice(device_id_), error code is 507033",
            "cuda",
            id="npu-set-device",
        ),
        # form: ACL_ERROR_RT_MEMORY_ALLOCATION through the same macro
        pytest.param(
            "RuntimeError: malloc:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:412 NPU function error:"
            " aclrtMallocAlign32(&ptr, size, ACL_MEM_MALLOC_HUGE_FIRST), error code is 207001",
            "oom",
            id="npu-function-error-207001",
        ),
        # form: ACL_ERROR_RT_DEVICE_OOM, in NPU_CHECK_ERROR's compact form (TORCH_NPU_COMPACT_ERROR_OUTPUT: no place)
        pytest.param(
            "RuntimeError:  NPU function error: aclrtMallocWithCfg(&ptr, size, policy, cfg), error code is 207018"
            " ERR00100 PTA call acl api failed.",
            "oom",
            id="npu-device-oom-compact",
        ),
        # form: OPS_CHECK_ERROR's wording (an operator's ACL call), the device's fault under it
        pytest.param(
            "RuntimeError: npu_format_cast:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:40 OPS function error:"
            " aclrtSynchronizeStream(stream), error code is 507015",
            "cuda",
            id="ops-function-error",
        ),
        # vLLM-Ascend (2026-08): an aclnn kernel's tiling refuses the layout (ACLNN_ERR_INNER_TILING_ERROR)
        pytest.param(
            "RuntimeError: npu_lightning_indexer:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:79 NPU function"
            " error: call aclnnLightningIndexer failed, error code is 561002",
            "unsupported",
            id="aclnn-tiling-error",
        ),
        # form: vllm-ascend#6875's title (2026; the place before it filled in): an aclnn call that the AI core timed
        # out under (ACL_ERROR_RT_AICORE_TIMEOUT) is the device's fault
        pytest.param(
            "RuntimeError: npu_swiglu:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:61 NPU function error:"
            " call aclnnSwiGlu failed, error code is 507014",
            "cuda",
            id="aclnn-device-fault",
        ),
        # -- Intel Gaudi: the bridge's report of a failed Synapse call
        # hiyouga/LlamaFactory#7275 (2025, Gaudi 1.17)
        pytest.param(
            "RuntimeError: synNodeCreateWithId failed for node: batch_gemm with synStatus 26 [Generic failure]. .",
            "cuda",
            id="gaudi-synapse-node-failed",
        ),
        # -- TPU: XLA's status codes as jax and torch_xla raise them
        # pytorch/xla#8020, googlecolab/colabtools#5126 (2025)
        pytest.param(
            "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to"
            " allocate 129.50M. That was not possible. There are 78.17M free.; (0x0x0_HBM0)",
            "oom",
            id="torch-xla-hbm-oom",
        ),
        # huggingface/diffusers#8358 (2024, jax on TPU v3)
        pytest.param(
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to"
            " allocate 4.39G. That was not possible. There are 2.30G free.; (0x0x0_HBM0)",
            "oom",
            id="jax-hbm-oom",
        ),
        # XLA's TPU error code 1000 (compile-time HBM OOM), its TensorCore/SparseCore form, as jax 0.6+ raises it
        pytest.param(
            "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: TPU TensorCore Hbm usage: 34.82G, SparseCore Hbm usage"
            " 174.10G, exceeding available bytes: 95.74G",
            "oom",
            id="jax-tpu-compile-oom",
        ),
        # a TPU slice's core halt (2026)
        pytest.param(
            "jax.errors.JaxRuntimeError: INTERNAL: Core halted unexpectedly: INTERNAL: Accelerator device halted"
            " prematurely, perhaps due to an on-device check-failure.",
            "cuda",
            id="tpu-core-halted",
        ),
        # form: jax's xla_bridge (jax 0.10.2, backends()) with the TPU asked for and another process holding it
        pytest.param(
            "RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process with pid"
            " 4242. Not attempting to load libtpu.so in this process.",
            "cuda",
            id="tpu-in-use",
        ),
        # form: XLA's UNIMPLEMENTED status for a Pallas/Mosaic kernel the partitioner cannot handle
        pytest.param(
            "jaxlib.xla_extension.XlaRuntimeError: UNIMPLEMENTED: Mosaic kernels cannot be automatically partitioned."
            " Please wrap the call in a shard_map.",
            "unsupported",
            id="xla-unimplemented",
        ),
    ],
)
def test_an_accelerator_runtimes_error_gets_the_category_of_what_failed(line: str, category: str) -> None:
    """A launch that dies of an accelerator runtime's own error crashes with that line as its cause, in the
    category of what failed: device memory, the runtime, the collective library, a kernel the backend lacks."""
    error = _crash_error(line)
    assert str(error["summary"]).strip() in line
    assert error["category"] == category


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # gRPC's RESOURCE_EXHAUSTED (a message over the size limit) is no device memory: not oom
        pytest.param(
            "grpc._channel._InactiveRpcError: RESOURCE_EXHAUSTED: Received message larger than max (8388608 vs."
            " 4194304)",
            "oom",
            id="grpc-message-size-not-oom",
        ),
        # an HCCL word inside another library's message decides nothing: the template is read from the start
        pytest.param(
            "ValueError: expected backend hccl or nccl, HCCL function error: none",
            "nccl",
            id="hccl-word-inside",
        ),
    ],
)
def test_a_runtimes_word_elsewhere_does_not_decide(line: str, category: str) -> None:
    """The accelerator templates hold at the message's start and on their memory wordings only: a status code
    or a library's name inside another message is not that runtime's failure."""
    assert _crash_error(line)["category"] != category
