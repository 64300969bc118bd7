"""Accelerator runtimes' error catalogues, read by class from their own tables (issue 30, i30-plat3).

Each line is built from the runtime's own format string and table, cited above it: torch_npu 2.14.0's
NPU_CHECK_ERROR / HCCL_CHECK_ERROR messages and its ACL code table (torch_npu/csrc/core/npu/NPUException.h,
NPUErrorCodes.h, include/acl/error_codes/rt_error_codes.h), CANN's error manager ('<errTitle>(<ErrCode>): ...', its
EE1023 troubleshooting page), op-plugin's operator look-up (op_plugin/utils/op_api_common.h), HIP's hipError_t and
hipGetErrorString table, hipBLAS's statuses, Unified Runtime's ur_result_t (ur_api.h), XLA's absl status codes
(absl::Status::ToString, xla/status_macros.h RET_CHECK), Intel Gaudi's synStatus (synapse_common_types.h and the
Synapse runtime's status strings). The category is what failed, with the precedence of docs/categories.md: a
resource exhausted (memory, or a device pool of streams, events, notifies) `oom`, the runtime's or device's fault
`cuda`, the collective library's `nccl`, an op/dtype/feature the backend lacks `unsupported`, the deployment's
environment `config` / `import`, a check `assertion`. Where a runtime prints its code line and then its text line
(torch_npu), the code line is the root cause and the text decides only when the code line was cut off.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from publiccases import error, replay_text, verdict

_TB = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", line 1, in load_model\n'
    "    call()\n"
    '  File "/usr/local/lib/python3.11/site-packages/torch/_ops.py", line 1, in __call__\n'
    "    call()\n"
)
# torch_npu's formatErrorCode(SubModule::PTA, ErrCode::ACL) line after the code line: '[ERROR] <time> (PID:..,
# Device:.., RankID:..) ERR00100 PTA call acl api failed' (torch_npu/utils/_error_code.py, NPUException.cpp)
_PTA = "[ERROR] 2026-11-20-08:01:02 (PID:4242, Device:0, RankID:-1) ERR00100 PTA call acl api failed\n"
_PLACE = "build/CMakeFiles/torch_npu.dir/compiler_depend.ts"


def _crash(tmp_path: Path, text: str) -> dict[str, object]:
    out = replay_text(tmp_path, text)
    assert out["state"] == "crashed", out
    return error(out)


def _npu(call: str, code: int, text: str) -> str:
    # NPU_CHECK_ERROR_CHECK_UCE (NPUException.h): '<func>:<file>:<line> NPU function error: <call>, error code is <code>'
    # + PTA_ERROR(ErrCode::ACL) + '\n[Error]: ' + the table's text for the code (two lines: what, then a hint)
    return f"RuntimeError: malloc:{_PLACE}:412 NPU function error: {call}, error code is {code}\n{_PTA}[Error]: {text}\n"


# torch_npu 2.14.0 NPUErrorCodes.h: each code with the first line of its text, and its class (docs/categories.md)
_ACL_CODES = [
    (207001, "Failed to apply for memory.", "oom"),  # ACL_ERROR_RT_MEMORY_ALLOCATION
    (207005, "Failed to apply for memory.", "oom"),  # ACL_ERROR_RT_RESOURCE_ALLOC_FAIL
    (207007, "Event resources are insufficient.", "oom"),  # ACL_ERROR_RT_NO_EVENT_RESOURCE
    (207008, "Stream resources are insufficient.", "oom"),  # ACL_ERROR_RT_NO_STREAM_RESOURCE
    (207009, "Notify resources in the system are insufficient.", "oom"),  # ACL_ERROR_RT_NO_NOTIFY_RESOURCE
    (207018, "The memory on the device is exhausted. ", "oom"),  # ACL_ERROR_RT_DEVICE_OOM
    (200000, "Failed to apply for memory.", "oom"),  # ACL_ERROR_BAD_ALLOC
    (300000, "The storage limit is exceeded.", "oom"),  # ACL_ERROR_STORAGE_OVER_LIMIT
    (200001, "The interface does not support this function.", "unsupported"),  # ACL_ERROR_API_NOT_SUPPORT
    (100026, "Unsupported data type.", "unsupported"),  # ACL_ERROR_UNSUPPORTED_DATA_TYPE
    (
        148049,
        "The 'ASCEND_OPP_PATH' environment variable is not set, or the value of the environment",
        "config",
    ),
    (
        100039,
        "The dynamic library path configured before running the application is the path of the",
        "import",
    ),
    (507015, "The aicore execution is abnormal. ", "cuda"),  # ACL_ERROR_RT_AICORE_EXCEPTION
    (507013, "System Direct Memory Access (DMA) hardware execution error. ", "cuda"),  # ACL_ERROR_RT_SYS_DMA
    (507899, "An internal error occurs in the Driver module. ", "cuda"),  # ACL_ERROR_RT_DRV_INTERNAL_ERROR
    (107001, "Invalid device ID.", "cuda"),  # ACL_ERROR_RT_INVALID_DEVICEID
]


@pytest.mark.parametrize(("code", "text", "category"), [pytest.param(*c, id=str(c[0])) for c in _ACL_CODES])
def test_an_acl_code_is_read_by_its_class_and_its_code_line_is_the_cause(
    tmp_path: Path, code: int, text: str, category: str
) -> None:
    """torch_npu's code line carries the ACL code, and the code's class is the category (a resource exhausted oom,
    what the NPU lacks unsupported, the environment config/import, the runtime's or device's fault cuda); the code
    line, printed first, is the root cause, not the text line after it."""
    found = _crash(
        tmp_path, _TB + _npu("aclrtMallocAlign32(&ptr, size, ACL_MEM_MALLOC_HUGE_FIRST)", code, text)
    )
    assert found["category"] == category
    assert f"error code is {code}" in str(found["summary"])


def test_the_text_line_decides_only_when_the_code_line_is_cut(tmp_path: Path) -> None:
    """The same message with its code line cut off (an excerpt that starts below it): torch_npu's text line is then
    the root cause, read by its own class (the table's text of a stream pool exhausted, oom)."""
    found = _crash(
        tmp_path,
        f"{_PTA}[Error]: Stream resources are insufficient.\n        Check whether the number of streams\n",
    )
    assert (found["category"], found["summary"]) == ("oom", "[Error]: Stream resources are insufficient.")
    assert "streams" in str(found["hint"])


def test_a_wrappers_carried_code_line_is_the_cause(tmp_path: Path) -> None:
    """vLLM-Ascend's worker wraps the code line ('Worker failed with error '... error is capture_begin:...''): the
    line that carries the code is still the root cause over torch_npu's text line, in the code's class."""
    line = (
        "RuntimeError: Worker failed with error 'NPUModelRunner init failed, error is NPUModelRunner failed, error is "
        f"capture_begin:{_PLACE}:214 NPU function error: c10_npu::acl::AclmdlRICaptureBegin(capture_stream_, "
        "capture_mode), error code is 207008\n"
    )
    out = replay_text(tmp_path, line + _PTA + "[Error]: Stream resources are insufficient.\n")
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    assert error(out)["category"] == "oom"
    assert "error code is 207008" in str(error(out)["summary"])


def test_the_tuning_corpus_capture_begin_names_the_code_line() -> None:
    """vllm-ascend#8393 (tests/fixtures/corpus): the root cause is the line with the failed call and its code
    (207005, its label's), as the rule says; vllm-ascend#12113's excerpt starts below its code line, so its text line
    is the cause there (its label's)."""
    found = error(
        verdict(
            "vllm",
            "vllm-ascend-2026-v0.18.0rc1-a3-mtp-npumodelrunner-capture-begin-207005-failed-to-apply-for-memory-"
            "vllmascend8393",
        )
    )
    assert found["category"] == "oom"
    assert "AclmdlRICaptureBegin(capture_stream_, capture_mode), error code is 207005" in str(
        found["summary"]
    )
    cut = error(
        verdict("vllm", "vllm-ascend-2026-graph-capture-npu-failed-to-apply-for-memory-ee9999-issue12113")
    )
    assert (cut["category"], cut["summary"]) == ("oom", "[Error]: Failed to apply for memory.")


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # HCCL_CHECK_ERROR (torch_npu/csrc/distributed/HCCLUtils.hpp) with HcclResult 24 'out of memory' and 7
        # 'resource unavailable' (NPUErrorCodes.h, quoting hccl_types.h)
        pytest.param(
            f"RuntimeError: create_config:{_PLACE}:149 HCCL function error: hcclCommInitRootInfoConfig(numRanks,"
            " &rootInfo, rank, config, &(comm->hcclComm_)), error code is 24",
            "oom",
            id="hccl-24-out-of-memory",
        ),
        pytest.param(
            f"RuntimeError: createHCCLComm:{_PLACE}:1508 HCCL function error: HcclGetRootInfo(&hcclID), error code is 7",
            "nccl",
            id="hccl-7",
        ),
        # op-plugin's look-up of the aclnn operator (op_api_common.h EXEC_NPU_CMD's TORCH_CHECK)
        pytest.param(
            "RuntimeError: aclnnLightningIndexer or aclnnLightningIndexerGetWorkspaceSize not in libopapi.so, or"
            " libopapi.so not found.",
            "unsupported",
            id="op-plugin-not-in-libopapi",
        ),
        pytest.param(
            "RuntimeError: Worker failed with error 'aclnnAddRmsNormBias or aclnnAddRmsNormBiasGetWorkspaceSize not"
            " in libopapi.so, or libopapi.so not found.'",
            "unsupported",
            id="op-plugin-carried",
        ),
        # -- HIP: hipError_t names (hip_runtime_api.h) and hipGetErrorString's strings; hipBLAS(Lt)'s statuses as
        # torch's hipified TORCH_CUDABLAS_CHECK prints them ('CUDA error: <status> when calling `<call>`')
        pytest.param("RuntimeError: HIP error: hipErrorMemoryAllocation", "oom", id="hip-memory-allocation"),
        pytest.param(
            "RuntimeError: CUDA error: HIPBLAS_STATUS_NOT_SUPPORTED when calling `hipblasLtMatmul( ltHandle, "
            "computeDesc.descriptor(), &alpha_val, mat1_ptr, Adesc.descriptor(), ...)`",
            "unsupported",
            id="hipblaslt-not-supported",
        ),
        pytest.param(
            "RuntimeError: HIP error: limit is not supported on this architecture",
            "unsupported",
            id="hip-limit",
        ),
        pytest.param("RuntimeError: HIP error: hipErrorECCNotCorrectable", "cuda", id="hip-ecc"),
        pytest.param(
            "RuntimeError: CUDA error: HIPBLAS_STATUS_EXECUTION_FAILED when calling `hipblasGemmEx( handle, opa, opb,"
            " m, n, k, &falpha, a, HIP_R_16BF, lda, b, HIP_R_16BF, ldb, &fbeta, c, HIP_R_16BF, ldc, ...)`",
            "cuda",
            id="hipblas-execution-failed",
        ),
        # -- Intel: SYCL's report of a UR result (ur_api.h: 40 UR_RESULT_ERROR_OUT_OF_RESOURCES, 44
        # UR_RESULT_ERROR_UNSUPPORTED_FEATURE), in its three wordings
        pytest.param(
            "RuntimeError: level_zero backend failed with error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)",
            "oom",
            id="ur-out-of-resources",
        ),
        pytest.param(
            "RuntimeError: UR backend failed. UR backend returns:40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)",
            "oom",
            id="ur-backend-out-of-resources",
        ),
        pytest.param(
            "RuntimeError: Native API failed. Native API returns: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)",
            "oom",
            id="native-api-out-of-resources",
        ),
        pytest.param(
            "RuntimeError: level_zero backend failed with error: 44 (UR_RESULT_ERROR_UNSUPPORTED_FEATURE)",
            "unsupported",
            id="ur-unsupported-feature",
        ),
        pytest.param(
            "RuntimeError: ZE_RESULT_ERROR_UNSUPPORTED_FEATURE", "unsupported", id="ze-unsupported-feature"
        ),
        pytest.param("RuntimeError: UR_RESULT_ERROR_DEVICE_LOST", "cuda", id="ur-bare-device-lost"),
        # -- XLA: absl's codes on jax's classes and torch_xla's 'Bad StatusOr access: '
        pytest.param(
            "jax.errors.JaxRuntimeError: INTERNAL: RET_CHECK failure (external/xla/xla/service/hlo_verifier.cc:1234)"
            " ShapeUtil::Compatible(a, b)",
            "assertion",
            id="xla-ret-check",
        ),
        pytest.param(
            "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: PjRT_Client_Connect.",
            "timeout",
            id="xla-deadline",
        ),
        pytest.param(
            "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed.",
            "cuda",
            id="xla-failed-precondition",
        ),
        pytest.param(
            "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem while"
            " allocating on stack for %fusion.1",
            "oom",
            id="xla-resource-exhausted-class",
        ),
        pytest.param(
            "jax.errors.JaxRuntimeError: INTERNAL: Mosaic failed to compile TPU kernel: Unsupported matmul RHS type"
            " on target",
            "unsupported",
            id="mosaic-stays-unsupported",
        ),
        pytest.param(
            "RuntimeError: Bad StatusOr access: UNAVAILABLE: TPU device not reachable",
            "cuda",
            id="torch-xla-unavailable",
        ),
        # -- Intel Gaudi: synStatus with the runtime's string in brackets (synapse_common_types.h)
        pytest.param(
            "RuntimeError: synNodeCreateWithId failed for node: batch_gemm with synStatus 4 [Out of Device memory"
            " (OOM)]. .",
            "oom",
            id="syn-4",
        ),
        pytest.param(
            "RuntimeError: Graph compile failed. synStatus=synStatus 27 [Out-Of-Resources]",
            "oom",
            id="syn-27",
        ),
        pytest.param(
            "RuntimeError: Graph compile failed. synStatus=synStatus 18 [Unsupported operation]",
            "unsupported",
            id="syn-18",
        ),
        pytest.param(
            "RuntimeError: synLaunch failed with synStatus 40 [Got failure from HCCL]. .", "nccl", id="syn-40"
        ),
    ],
)
def test_a_runtimes_status_is_read_by_its_class(tmp_path: Path, line: str, category: str) -> None:
    """A runtime's status name or code in its own wording gets the category of its class, whichever of the
    runtime's names or codes it is (not one rule per line seen)."""
    found = _crash(tmp_path, _TB + line + "\n")
    assert found["category"] == category
    assert str(found["summary"]).strip() in line


def test_canns_resource_error_line_is_a_resource_exhausted(tmp_path: Path) -> None:
    """CANN's EE1023 as its troubleshooting page prints it ('Resource_Error(EE1023): Alloc Stream resource failed.
    Reason: Too many streams are created.', then its traceback of runtime calls): the device's stream pool is
    exhausted, oom, with the hint that names the streams."""
    found = _crash(
        tmp_path,
        "Resource_Error(EE1023): Alloc Stream resource failed. Reason: Too many streams are created.\n"
        '        Solution: For details about the troubleshooting method, search for the keyword "EE1023".\n'
        "TraceBack (most recent call last):\n"
        "        rtStreamCreateWithFlags execution failed, reason=driver error:resource alloc fail"
        "[FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:69]\n",
    )
    assert found["category"] == "oom"
    assert str(found["summary"]).startswith("Resource_Error(EE1023)")
    assert "streams" in str(found["hint"])


def test_vllm_ascends_aclgraph_stream_shortage_is_oom_in_the_capture(tmp_path: Path) -> None:
    """vLLM-Ascend's model runner (model_runner_v1.py, v0.10-v0.11) logs 'ACLgraph sizes capture fail: RuntimeError:'
    and on the next line that the ACL graph has too few streams for the capture sizes: the capture phase, oom, the
    hint naming the streams and the capture sizes."""
    prefix = "(Worker_TP11 pid=15618) ERROR 10-11 11:32:59 [model_runner_v1.py:3556] "
    out = replay_text(
        tmp_path,
        "(EngineCore_DP0 pid=15471) INFO 10-11 11:30:08 [kv_cache_utils.py:849] GPU KV cache size: 582,528 tokens\n"
        f"{prefix}ACLgraph sizes capture fail: RuntimeError:\n"
        f"{prefix}ACLgraph has insufficient available streams to capture the configured number of sizes. Please "
        "verify both the availability of adequate streams and the appropriateness of the configured size count.\n",
    )
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    assert error(out)["category"] == "oom"
    assert "cudagraph_capture_sizes" in str(error(out)["hint"])
