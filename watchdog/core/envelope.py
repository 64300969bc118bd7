"""Envelopes: peel the wrapper prefixes off a log line into time, source (rank/process), level and content.

Logs arrive wrapped by whatever carried them: docker compose (``vllm-1  | ``), journald, Docker Desktop or
Kubernetes timestamps, Python logging, Ray (``(RayWorkerWrapper pid=249, ip=...)``), torchrun
(``[rank0]:``), vLLM (``(EngineCore_DP0 pid=17374) ERROR 09-28 15:47:24 [core.py:718]``), SGLang
(``[2025-07-02 07:31:02 DP0 TP0 EP0]``), TGI, Ollama, TensorRT-LLM. Layers are peeled from the left until
none matches; what remains is the content that tracebacks and profile rules read. Pure: no I/O, no clock.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from datetime import datetime
from typing import NamedTuple

__all__ = ["ERROR_LEVEL_MARKS", "MAX_LOG_GAP", "Record", "parse", "seconds_between", "unglue"]

MAX_LOG_GAP = 31 * 86400.0  # the longest duration read from a log's times that is believed (a month)


class Record(NamedTuple):
    """One logical log line with its wrappers peeled off (a named tuple: made for each line read, three times
    cheaper than a frozen dataclass)."""

    content: str  # the message as the program wrote it
    source: str  # rank or process tag ("TP3", "rank0", "EngineCore_DP0", "VllmWorkerProcess pid=67"), or ""
    level: str  # "ERROR", "WARNING", "INFO", ... or "" when the line has none
    at: str | None  # the line's time as ISO 8601 ("2025-07-02T07:31:02"; "07-02T07:31:02" without a year)
    seconds: float | None  # the line's outermost time as seconds on a common scale, for durations
    tagged: bool  # True when the source tag is printed on this very line (torchrun, Ray, vLLM workers)


_LEVELS = {
    "I": "INFO",
    "W": "WARNING",
    "E": "ERROR",
    "F": "CRITICAL",
    "D": "DEBUG",
    "WARN": "WARNING",
    "ERR": "ERROR",
    "FATAL": "CRITICAL",
    "EROR": "ERROR",
    # zerolog's console writer (LocalAI): its three-letter levels
    "TRC": "TRACE",
    "DBG": "DEBUG",
    "INF": "INFO",
    "WRN": "WARNING",
    "FTL": "CRITICAL",
    "PNC": "CRITICAL",
}
# What an error (or fatal) level of the layers below looks like in a line's bytes, when the level is not the word
# ERROR, CRITICAL or FATAL itself: glog's "[E0120 08:28:09.4 x.cc:1] " and "E0120 08:28:09.4 1 x.cc:1] ", PyTorch's
# "[E x.cc:1] ", llama.cpp's "0.01.090.687 E ", Ollama's "level=error", TensorRT-LLM's "[E] " (byte regexes, a
# superset: the analyzer's prefilter reads every line one of them finds; keep them beside the layers). glog's
# mark holds its time's "hh:", as both glog layers do: without the colon ("[EF][0-9]{3,4} [0-9]", classes alone)
# Hyperscan's scan of a whole log was a tenth slower.
ERROR_LEVEL_MARKS = (
    rb"[EF][0-9]{3,4} [0-9][0-9]:",
    rb"\[[EF] ",
    rb"[0-9] E ",
    rb"[0-9]\] E ",
    rb"level=[EeFfCc]",
    rb"\[(?:E|F|ERR|EROR)\]",
    rb"[AP]M (?:ERR|FTL|PNC) ",
)

_TS = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_TS_DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
_IDENT = r"[\w.@/-]+(?:\[\d+\])?"  # a journald line's identifier and pid: "ollama[1418]", "kernel"
_LEVEL = r"DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE"

# Each layer: a regex anchored at the start; named groups ts/date/time/level/source/rank carry what it tells.
# Compiled when first used (`_layer`): `_ANY_LAYER` finds which one a line has, and a log shows a few of them.
_LAYER_PATTERNS: tuple[str, ...] = (
    # a markdown blockquote around a log pasted into an issue's reply: "> [2025-11-06T02:10:00.702Z] ..."
    r">(?: |$)",
    # docker compose service prefix: "vllm-1  | ", and without the replica number: "vllm-server  | "; each
    # behind a look for the name and its bar that its match implies (one pass over a line's first word, where
    # the layer itself backtracks through it: most contents start with a word, and no bar)
    r"(?=[\w.-]+\s+\|)(?:[\w.-]+-\d+|[\w.-]+_\d+)\s+\|\s?",
    r"(?=[\w.-]+ +\| )(?:[A-Za-z][\w.]*(?:[-_][\w.-]*)? {2,}\| |[A-Za-z][\w.]*[-_][\w.-]* \| )",
    # kubectl logs --prefix: "[pod/vllm-0/server] "
    r"\[pod/[\w.-]+/[\w.-]+\] ",
    # journald: "Jan 26 17:48:20 ip-172-31-3-6 ollama[1418]: ", its month in the host's locale (strftime's %b):
    # "7月 21 11:33:06 dar ollama[1166693]: " (Chinese, Japanese; Korean "7월"), "juil. 21 ..." (French); and with
    # its host and identifier taken out, as journal excerpts are pasted into public issues ("Mar 25 08:53:54: ",
    # ollama#9976 2025, ollama#16499 2026): the time then ends in the colon; and journalctl -o short-precise, the same
    # with the time's microseconds ("Dec 02 10:00:01.123456 gpu-node-7 vllm[4242]: ", journalctl(1) --output)
    rf"(?:(?P<mon>[A-Z][a-z]{{2}})|(?P<monnum>\d{{1,2}})[月월]|[^\W\d_]{{3,5}}\.?) (?P<day>[ \d]\d) "
    rf"(?P<time>\d\d:\d\d:\d\d)(?:\.\d{{6}})?(?: \S+ {_IDENT})?: ",
    # Google Cloud logging export: "ERROR 2025-04-07T19:13:52.318307161Z "
    rf"(?P<level>{_LEVEL}|DEFAULT) (?P<ts>\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?Z ",
    # Python logging's "%(asctime)s - %(name)s - %(levelname)s - %(message)s" (the logging HOWTO's, and a launcher
    # relaying a server's lines through its own logger: "2025-03-07 23:50:27,531 - __main__ - INFO - ",
    # "2026-01-17 20:30:51,298 - vllm - INFO - "), and without the logger's name, "%(asctime)s - %(levelname)s -
    # %(message)s": "2026-05-29 09:14:45,594 - INFO - "; asctime as a formatter's own ISO time (GPUStack's, 2025:
    # "2025-02-28T16:40:18+00:00 - gpustack.worker.backends.vllm - INFO - ", "2025-12-20 04:37:58.559317+08:00 - ")
    rf"(?P<ts>\d{{4}}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)? - (?:[\w.]+ - )?"
    rf"(?P<level>{_LEVEL}) - ",
    # a harness relaying a container's lines (the Docker SDK's container.logs()) through its own logger or print,
    # each tagged as the container's: logger.info(f"[container] {line}"), "[Container] ", "[CONTAINER] "
    r"\[(?:container|Container|CONTAINER)\] (?P<relay>)",
    # Dynamo's `dynamo run` relaying its engine subprocess (launch/dynamo-run/src/subprocess.rs start: each line of
    # the child's stdout and stderr re-logged by `tracing::debug!("{}", strip_log_prefix(&line))`, 2025), so its
    # tracing formatter prints the child's line after the event's target: "2025-06-06T19:02:34.252Z DEBUG
    # dynamo_run::subprocess:     raise e" (dynamo#1422: a vLLM engine's traceback at DEBUG). The one space is the
    # formatter's; what follows is the child's line, a frame's indent included
    r"dynamo_run::subprocess:(?: |$)(?P<relay>)",
    # SGLang >= 0.5.4 custom format: "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 file.py:222] "
    rf"(?P<ts>\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d) (?P<level>{_LEVEL}) \d+ \[(?P<rank>(?:[A-Z]{{2,4}}\d+ )*)[\w.]+:\d+\] ",
    # SGLang: "[2025-07-02 07:31:02 DP0 TP0 EP0] ", "[17:43:23 TP6] "
    r"\[(?:(?P<date>\d{4}-\d\d-\d\d) |(?P<md2>\d\d-\d\d) )?(?P<time>\d\d:\d\d:\d\d)(?P<rank>(?: [A-Z]{2,4}\d+)*)\] ",
    # Ray / vLLM process tag: "(RayWorkerWrapper pid=249, ip=172.20.249.91) ", "(EngineCore_DP0 pid=17374) ",
    # vLLM 0.9-0.10's multiproc workers "(VllmWorker rank=0 pid=3781015) " (the rank names the source), and
    # 0.10.1-0.10.2's, named by their parallel ranks when there are several (multiproc_executor.py WorkerProc:
    # "VllmWorker" + " DP<r>" / " PP<r>" / " TP<r>" / " EP<r>"): "(VllmWorker TP3 pid=433) ", always with a pid;
    # and SkyPilot's prefix of a task's output (sky/skylet/log_lib.py run_with_log callers: '({task}, pid={pid}) ' on
    # one node, '({node}, rank={rank}, pid={pid}[, ip={ip}]) ' on several, '(setup pid={pid}, ip={ip}) '), the
    # rank naming the node's stream: "(task, pid=12148) ", "(worker1, rank=1, pid=2330, ip=10.0.0.2) "
    # Ray's own prefix is "({actor or task name} pid={pid}[, ip={ip}]) " (ray/_private/worker.py print_worker_logs,
    # prefix_for): a task's name may begin with an underscore ("(_EngineBackgroundProcess pid=9083) ",
    # "(_get_vllm_engine_config pid=61380) ") and a Serve replica's actor is named "ServeReplica:<app>:<deployment>",
    # a deployment's name with its own colons, slashes and dots ("(ServeReplica:default:VLLMDeployment pid=770466) ",
    # "(ServeReplica:default:meta-llama/Llama-2-7b-chat-hf:meta-llama--Llama-2-7b-chat-hf pid=529554) "); an actor's
    # name is its class's __repr__ where it has one, and Ray Data's actor-pool map worker has, with the operator's name
    # in it ("MapWorker({op_name})", data/_internal/execution/operators/actor_pool_map_operator.py _MapWorker, the
    # name's own parentheses two deep): "(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=162837) " (ray.data.llm's
    # vLLM stage, ray#56905)
    r"\((?P<source>[A-Za-z][\w-]*(?: rank=\d+|, rank=\d+(?=, pid=)|(?: [A-Z]{2,3}\d+)+(?= pid=)"
    r"|(?::[\w./-]+)+(?= pid=)|\((?:[^()\s]|\([^()\s]*\))*\)(?= pid=))?|_[\w-]*(?= pid=))"
    r"(?:,? pid=(?P<pid>\d+))?(?:, ip=[\w.:-]+)?\) ?",
    # torchrun: "[rank0]:"
    r"\[(?P<source>rank\d+)\]:\s?",
    # glog / c10: "[W623 15:37:01.823833318 socket.cpp:460] ", and without the time (PyTorch < 2.4):
    # "[W socket.cpp:663] ", "[E ProcessGroupNCCL.cpp:475] "
    r"\[(?P<level>[IWEF])(?:(?P<md>\d{3,4}) (?P<time>\d\d:\d\d:\d\d)\.\d+)? [\w.]+:\d+\] ",
    # glog's own format, unbracketed (Triton Inference Server): "E0120 08:28:09.425599 2049 model_lifecycle.cc:654] "
    r"(?P<level>[IWEF])(?P<md>\d{4}) (?P<time>\d\d:\d\d:\d\d)\.\d+ +\d+ [\w.]+:\d+\] ",
    # llama.cpp's common log (2025+ builds, on by default): minutes.seconds.ms.us since start and a level
    # letter, "0.01.090.687 I srv  llama_server: listening on ..."; the relative time is no clock time
    r"\d+\.\d\d\.\d{3}\.\d{3} (?P<level>[IWED]) ",
    # and llama-server's router mode (2025-12+, --models-dir / --models-preset) in front of every line of a model's
    # child server it relays, the child's port: tools/server/server-models.cpp's LOG("[%5d] %s", port, line), its
    # common log lines ("[41303] 0.01.289.827 E alloc_tensor_range: ...") and what the child writes to stderr itself,
    # with no time: ggml_abort's '<file>:<line>: GGML_ASSERT(...) failed', gdb's backtrace, 'terminate called ...'
    # ("[57663] /src/llama-model.cpp:410: GGML_ASSERT(...) failed", "[ 8081] [New LWP 397021]")
    r"\[ {0,4}\d{1,5}\] ",
    # and with a wall-clock date-time in brackets instead (llama-box, GPUStack's llama.cpp server, 2025):
    # "[2025-05-29 12:00:35.235796] E ROCm error: out of memory"; the fraction tells it from SGLang's "[date time] "
    r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] (?P<level>[IWED]) ",
    # vLLM: "INFO 08-19 07:51:03 model_runner.py:732] ", "ERROR 05-21 20:51:38 [core.py:489] ", and as a
    # markdown rendering mangled it in a published issue, "ERROR 10-20 03:20:50 [async_llm.py:485[] "; from
    # 2025-2026 the file is named by its path under its package, a plugin's middle directories shortened to "...":
    # "ERROR 02-07 18:18:59 [v1/executor/multiproc_executor.py:824] ", "[vllm_ascend/.../platform.py:12] "
    # (a captured vLLM 0.32 launch, vllm-ascend 0.13 in vllm-ascend#6611). The header ends in one blank, also before an
    # empty line: vLLM's NewLineFormatter (logging_utils/formatter.py) puts the record's 'header ' before every line
    # of a multi-line record, the empty lines of a chained traceback too, and a copy that strips trailing blanks (or
    # an excerpt cut there) leaves the header alone (Qwen3-VL#1988: '... ERROR 01-13 07:02:02 [core.py:866]')
    rf"(?P<level>{_LEVEL}) (?P<md2>\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d)(?:\.\d+)? \[?[\w.-]+(?:/[\w.-]+)*:\d+(?:\]|\[\])(?: |$)",
    # and its source location alone, the line's front (level, time, process tag) lost where a pasted excerpt begins
    # mid-line: "[multiproc_executor.py:492] ValueError: Free memory on device ..." (a Python file's name only)
    r"\[[\w.-]+(?:/[\w.-]+)*\.py:\d+\] ",
    # Ollama >= 0.1.3x: 'time=2025-05-01T16:40:14.182+02:00 level=DEBUG source=server.go:625 msg='
    r"time=(?P<ts>\S+) level=(?P<level>\w+) source=\S+ (?:msg=)?",
    # Ollama older / Go log: "2024/07/21 15:40:57 routes.go:1096: INFO "
    rf"(?P<slash>\d{{4}}/\d\d/\d\d) (?P<time>\d\d:\d\d:\d\d) [\w.]+:\d+: (?:(?P<level>{_LEVEL}) )?",
    # TensorRT-LLM: "[12/20/2025-04:19:30] [TRT-LLM] [I] ", "[TensorRT-LLM][INFO] "
    r"\[(?P<mdy>\d\d/\d\d/\d{4})-(?P<time>\d\d:\d\d:\d\d)\] ",
    # with its rank before the level ("[TRT-LLM] [RANK 2] [E] ", 2025) or, from 2026, the logger's module and the
    # rank after it ("[TRT-LLM] [I] [_torch  ] [RANK 6] ", or glued to it: "[TRT-LLM] [E] [executor][RANK 1] ",
    # "[TRT-LLM] [I] [batchmgr][RANK 0] ")
    # and TensorRT's own logger ("[03/27/2024-11:09:02] [TRT] [E] 6: The engine plan file ..."), and AutoDeploy's
    # ("[TRT-LLM AUTO-DEPLOY] [RANK 0] [I] ", its ad_logger, as a 1.2.0rc5 launch in the corpus prints it)
    r"\[(?:TRT-LLM(?: AUTO-DEPLOY)?|TensorRT-LLM|TRT)\]\s?(?:\[(?P<rank>RANK \d+)\] )?\[(?P<level>[A-Z]+)\] "
    r"(?:\[_?[a-z][\w.]* *\](?: |(?=\[RANK \d+\] )))?",
    # the 2026 logger's module glued to the rank, its "[TRT-LLM] [I] " lost in a paste: "[_torch][RANK 0] "
    r"\[_?[a-z][\w.]*\](?=\[RANK \d+\] )",
    r"\[(?P<rank>RANK \d+)\] ",
    # srun -l / a launcher's task label in front of a rank's line: "6: [05/12/2026-05:01:16] [TRT-LLM] ..."
    r"\d{1,4}: (?=\[)",
    # ISO timestamp in front (Docker --timestamps, kubectl --timestamps, TGI): "2025-04-14T15:51:31.134585Z ",
    # and a CRI record's (containerd, CRI-O): "2026-12-04T08:54:17.831019227Z stderr F " (or P: a partial
    # record's, its parts joined by formats.Unwrapper); or journalctl -o short-iso(-precise):
    # "2026-12-04T08:54:17+0000 host ident[pid]: ", with an offset, never a "Z" (which tells it from a
    # transport's timestamp in front of a "word word: " message). One layer: one match tried, not two.
    rf"(?P<jts>{_TS_DATE}(?:\.\d+)?[+-]\d\d:?\d\d) \S+ {_IDENT}: "
    rf"|(?P<ts>{_TS})(?: (?:stdout|stderr) [FP](?::\S*)?)?(?: |$)",
    # a CI runner's (Jenkins timestamper, GitLab) bracketed ISO time in front: "[2025-11-06T02:10:00.702Z] "
    rf"\[(?P<ts>{_TS_DATE}(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\] ",
    # LocalAI's own log (zerolog's console writer: time.Kitchen and a three-letter level, "10:41AM DBG "), and its
    # relay of a backend process's output (pkg/model initializers.go: log.Debug().Msgf("GRPC(%s): stderr %s",
    # <model id>-<address>, line), and stdout): "GRPC(gpt-4-127.0.0.1:36865): stderr " before llama.cpp's own line
    r"\d{1,2}:\d\d[AP]M (?P<level>TRC|DBG|INF|WRN|ERR|FTL|PNC) ",
    r"GRPC\([^()\s]*:\d+\): std(?:err|out)(?: |$)(?P<relay>)",
    # LocalAI's backend-log page (2026, react-ui BackendLogs.jsx) copied from the browser: each line's time
    # (toLocaleTimeString() + "." + milliseconds), its stream's badge and the engine's text are three spans with
    # nothing between them, so a copy glues them: "10:22:48.969stderrprint_info: ...", "1:02:03 PM.004stdout..."
    r"(?P<time>\d{1,2}:\d\d:\d\d)(?: [AP]M)?\.\d{3}(?:stdout|stderr)(?=\S)",
    # a level word in brackets after a timestamp: Lemonade's server wrapping the engine it runs
    # ("2026-05-08 11:50:14.752 [Error] (Process) (EngineCore pid=3043) ERROR 05-08 ..."); its component
    # "(Process)" is then peeled as a process tag
    r"\[(?P<level>Error|Warn|Warning|Info|Debug|Critical|Fatal|Trace)\] (?=\()",
    # a bare level: Uvicorn's "INFO:     ", TGI's "INFO text_generation_launcher: " keeps its target
    rf" ?(?P<level>{_LEVEL}):?\s+(?=\S)",
)
_BARE_LEVEL = len(_LAYER_PATTERNS) - 1
# Uvicorn's level prefix has a fixed width (uvicorn/logging.py ColourizedFormatter.formatMessage, 0.13-0.38:
# levelprefix = levelname + ":" + " " * (8 - len(levelname)), then the format's "%(levelprefix)s %(message)s"): the
# message begins in column 10, and the blanks beyond are its own, a traceback's indent where a server logs each line
# of an exception through that format (TabbyAPI: "ERROR:      File ...", "ERROR:        result = await app(")
_PADDED_LEVEL = re.compile(rf" ?(?:{_LEVEL}):")

# Every layer at once (their named groups made plain), each one followed by an empty group of its own, whose
# number (`lastindex`) names the layer found: one match finds the first layer that matches, or that none does, in
# C (a line's prefixes are peeled with two matches, not with ~20 each). The group is put after its layer, not
# around it, so that each alternative begins with its layer's first character or class, which the regex engine
# checks before it enters the alternative: a line with no layer left (every line's last match) fails twice as fast.
_ANY_LAYER = re.compile(
    "|".join("(?:" + re.sub(r"\(\?P<\w+>", "(?:", layer) + ")()" for layer in _LAYER_PATTERNS)
)


@functools.cache
def _layer(index: int) -> re.Pattern[str]:
    """Layer `index` of `_LAYER_PATTERNS`, compiled."""
    return re.compile(_LAYER_PATTERNS[index])


_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}

# Where a new record starts in the middle of a line: a tqdm bar without its final newline glues itself
# onto the next log line.
_GLUE = re.compile(
    r"(?<=\S)(?=\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]{2,4}\d+)*\] "
    r"|\((?:APIServer|ApiServer_\d+|EngineCore\w*|VllmWorkerProcess|VllmWorker(?: rank=\d+| [A-Z]{2,3}\d+)*|RayWorkerWrapper|Worker\w*) pid=\d+"
    rf"|(?:{_LEVEL}) \d\d-\d\d \d\d:\d\d:\d\d[ .])"
    # TensorRT-LLM's logger after its per-module weight-loading bar: "...139.82it/s][07/23/2025-06:37:06] [TRT-LLM] "
    r"|(?<=\S)(?=\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] \[TRT-LLM\])"
)

# A superset of _GLUE's third kind of start (a vLLM level and date), as a search that starts at its first word's
# letters (_GLUE's look-behind makes the regex engine try every position); the other two start at "[" or " pid=".
_GLUE_LEVEL = re.compile(rf"(?:{_LEVEL}) \d\d-")
# ... and a superset of that start itself (_GLUE's third kind holds " MM-DD hh:" after its level word), a search
# from its literal space, which the regex engine finds before it tries a position (_GLUE_LEVEL tries the nine
# words at each one): tried first, about 4x quicker over SGLang's 2.4 KB argument dump, and on a short line
_GLUE_DATE = re.compile(r" \d\d-\d\d \d\d:")
# ... and of its bracketed starts, a date "[2025-" or "[07/23/": not a tqdm bar's "[00:01<00:02", nor a list's "['"
_GLUE_BRACKET = re.compile(r"\[\d(?:\d{3}-|\d/)")


def unglue(text: str) -> list[str]:
    """Split a line where another record starts in its middle (a tqdm bar glued onto the next log line)."""
    if "[" not in text and "(" not in text and " " not in text:
        return [text]
    if (
        _GLUE_BRACKET.search(text, 1) is None
        and " pid=" not in text
        and (_GLUE_DATE.search(text) is None or _GLUE_LEVEL.search(text) is None)
    ):
        return [text]  # nearly every line: none of the three starts of a record _GLUE knows is in it
    cuts = [0, *(m.start() for m in _GLUE.finditer(text)), len(text)]
    return [text[start:end] for start, end in itertools.pairwise(cuts)]


def parse(text: str, *, remember: bool = False) -> Record:
    """Peel wrapper prefixes off one cleaned line. `remember`: the layer found (or none) after the first one
    peeled is remembered by the text it is looked for in, and taken from there the next time that text comes (a
    crash loop's startup and tracebacks print the same messages, with other times, at each start): for lines read
    whole, whose contents come again; a busy log's serving lines, each with its own counts, would only churn it."""
    source = ""
    level = ""
    tagged = False
    at: str | None = None
    seconds: float | None = None
    content = text
    if text.startswith('{"') and '"msg"' in text:
        record = _jsonl(text)
        if record is not None:
            content, level = record
    for turn in range(8):
        if remember and turn:
            layer = _NEXT.get(content)
            if layer is None:
                layer = _next_layer(content)
                if len(_NEXT) >= _NEXT_MAX:
                    _NEXT.clear()
                _NEXT[content] = layer
            index, end = layer
            if index < 0:
                break
        else:
            first = _ANY_LAYER.match(content)
            if first is None:
                break
            end = first.end()
            if end:
                index = first.lastindex - 1  # type: ignore[operator]  # the layer found: its group
                if index == _BARE_LEVEL:
                    end = _level_end(content, end)
            else:
                index, end = _next_layer(content)
                if index < 0:
                    break
        # what a layer's prefix tells depends on its text alone: lines of one second share it
        key = (index, content[:end])
        peeled = _PEELED.get(key)
        if peeled is None:
            peeled = _peel(_layer(index).match(content))  # type: ignore[arg-type]
            if len(_PEELED) >= _PEELED_MAX:
                _PEELED.clear()
            _PEELED[key] = peeled
        found_level, found, found_source, found_tagged, starts = peeled
        if starts:
            # a program's own line begins after this prefix: a level found before it was its relay's (a launcher's
            # logger, a log service's severity), which says nothing of the line (a traceback relayed at INFO)
            level = ""
        if found_level:
            level = found_level
        if found is not None:
            # Layers peel outside-in, so the last clock found is the program's own, not the transport's: the
            # time shown. Durations are measured on the first clock found, the outermost: a transport's
            # (docker -t, kubectl --timestamps, journald) stamps every line on one clock, where the program
            # stamps only some of them, maybe in another timezone (a UTC "Z" outside, "-07:00" inside).
            at = found[0]
            seconds = found[1] if seconds is None else seconds
        if found_source is not None:
            source, tagged = found_source, tagged or found_tagged
        content = content[end:]
    # trailing white space is no part of the message (a terminal's capture pads its lines): peeled last, so that
    # a prefix's own space still marks it on an empty line ("[pod/llm-0/server] ")
    return Record(content.rstrip(), source, level, at, seconds, tagged)


_JSONL_LEVELS = {"info": "INFO", "warn": "WARNING", "error": "ERROR", "debug": "DEBUG"}


def _jsonl(text: str) -> tuple[str, str] | None:
    # llama.cpp's common log as JSON lines (--log-jsonl, 2026: common/log.cpp common_log_entry::print writes
    # {"type": "log", "time": <us since start>, "level": "info|warn|error|debug|cont|none", "msg": "<line>\n"} to
    # stdout, one a line): its message and level, or None for any other text; what the program writes to stderr
    # itself (ggml_abort, gdb) stays plain beside them. The time is no clock time (as in its plain prefix)
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("type") != "log" or not isinstance(msg := obj.get("msg"), str):
        return None
    level = obj.get("level")
    return msg.rstrip("\n"), _JSONL_LEVELS.get(level, "") if isinstance(level, str) else ""


def _next_layer(text: str) -> tuple[int, int]:
    # the layer at the start of `text` and where it ends, or (-1, 0): none (that `parse` peels)
    first = _ANY_LAYER.match(text)
    if first is None:
        return _NO_LAYER
    if first.end():
        index: int = first.lastindex - 1  # type: ignore[operator]  # the layer found: its group
        return index, _level_end(text, first.end()) if index == _BARE_LEVEL else first.end()
    # a layer that matches nothing is passed over: the ones after it are tried one by one
    index = next((i for i in range(len(_LAYER_PATTERNS)) if (m := _layer(i).match(text)) and m.end()), -1)
    if index < 0:
        return _NO_LAYER
    return index, _layer(index).match(text).end()  # type: ignore[union-attr]


def _level_end(text: str, end: int) -> int:
    # where a bare level's prefix ends: the blanks past Uvicorn's column are the message's own (its indent)
    padded = _PADDED_LEVEL.match(text)
    if padded is None:
        return end
    return min(end, padded.end() + max(1, 9 - len(padded.group().strip(" :"))))


_NO_LAYER = (-1, 0)
# `_next_layer` of the texts left after a line's first layer (`parse(remember=True)`), bounded: a log's messages
_NEXT: dict[str, tuple[int, int]] = {}
_NEXT_MAX = 1024

# (level, time, source, tagged, starts) of a layer's prefix, by (layer, prefix text); bounded, as a busy log's times
# move on
_Peeled = tuple[str, "tuple[str, float] | None", "str | None", bool, bool]
_PEELED: dict[tuple[int, str], _Peeled] = {}
_PEELED_MAX = 4096


def _peel(m: re.Match[str]) -> _Peeled:
    # What one layer's match tells: its level ("" for none), its time, the source it names (None: it names none),
    # whether that source is a tag printed on the line, and whether a program's own line starts after it (a process
    # tag with its pid, as Ray and vLLM print it, or a relay's tag of a container's line).
    groups = m.groupdict()
    level = ""
    if groups.get("level"):
        raw = groups["level"].upper()
        level = _LEVELS.get(raw, raw)
    rank = (groups.get("rank") or "").strip()
    if rank:
        return level, _time_of(groups), _short_rank(rank), False, False
    if groups.get("source"):
        name = groups["source"]
        pid = groups.get("pid")
        source = name if (pid is None or any(c.isdigit() for c in name)) else f"{name} pid={pid}"
        return level, _time_of(groups), source, True, pid is not None
    return level, _time_of(groups), None, False, "relay" in groups


def _short_rank(rank: str) -> str:
    # SGLang's "DP1 TP1 EP1": the TP rank is unique across the group and is what its messages name.
    return next((part for part in rank.split() if part.startswith("TP")), rank)


def _time_of(g: dict[str, str | None]) -> tuple[str, float] | None:
    time = g.get("time")
    try:
        if stamp := g.get("ts") or g.get("jts"):
            ts = stamp.replace(",", ".")
            dt = datetime.fromisoformat(ts.replace("Z", "+00:00"))
            # its local reading, the offset set aside: a log that prints some lines with an offset (-07:00) and
            # others without one (the same clock, local time) must not jump by the offset between them
            dt = dt.replace(tzinfo=None, microsecond=0)
            return dt.isoformat(), _epoch(dt)
        if time is None:
            return None
        hh, mm, ss = (int(x) for x in time.split(":"))
        if ymd := g.get("date") or g.get("slash"):  # 2025-07-02 or 2025/07/02
            y, mo, d = (int(x) for x in ymd.replace("/", "-").split("-"))
            return _at(y, mo, d, hh, mm, ss, True)
        if g.get("mdy"):
            mo, d, y = (int(x) for x in str(g["mdy"]).split("/"))
            return _at(y, mo, d, hh, mm, ss, True)
        if g.get("md2"):
            mo, d = (int(x) for x in str(g["md2"]).split("-"))
            return _at(2000, mo, d, hh, mm, ss, False)
        if g.get("md"):
            md = str(g["md"])
            return _at(2000, int(md[:-2]), int(md[-2:]), hh, mm, ss, False)
        if g.get("mon"):
            return _at(2000, _MONTHS.get(str(g["mon"]), 1), int(str(g["day"])), hh, mm, ss, False)
        if g.get("monnum"):
            return _at(2000, int(str(g["monnum"])), int(str(g["day"])), hh, mm, ss, False)
        return f"{hh:02d}:{mm:02d}:{ss:02d}", float(hh * 3600 + mm * 60 + ss)
    except ValueError:
        return None


@functools.lru_cache(maxsize=1024)  # a log's lines share their seconds (a busy one prints dozens a second)
def _at(y: int, mo: int, d: int, hh: int, mm: int, ss: int, has_year: bool) -> tuple[str, float]:
    dt = datetime(y, mo, d, hh, mm, ss)
    iso = dt.isoformat() if has_year else dt.isoformat()[5:]
    return iso, _epoch(dt)


def _epoch(dt: datetime) -> float:
    return (dt - datetime(1970, 1, 1)).total_seconds()


def seconds_between(start: float | None, end: float | None) -> float | None:
    """Seconds from `start` to `end` by a log's own times; a negative gap of under a day is a midnight crossing
    (time-only logs). None when the log's times cannot tell (negative, or more than `MAX_LOG_GAP`: formats of
    different precision mixed, a clock stepped): a duration is then unknown, and the sinks measure it on the
    follower's clock, rather than say "ready after -7200s" or 946,684,800 s in a phase."""
    if start is None or end is None:
        return None
    gap = end - start
    if -86400 < gap < 0 and start < 86400:
        gap += 86400
    return gap if 0 <= gap <= MAX_LOG_GAP else None
