"""Error categories and hints: the class of failure an error line names, what an operator can do (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeVar

from watchdog.profiles.model import CategoryRule, Profile, Searched
from watchdog.vocabulary import Category, State

__all__ = ["categorize", "fill", "hint_for", "phase_from_error", "phase_from_frames"]

# What an error's rules read besides its message: the file paths and function names of the innermost frames
# (where it was raised), or a native line's own source location ("/src/ggml/ggml-cuda.cu:70: ...").
_FRAME = re.compile(r'File "(?P<path>[^"]*)", line \d+, in (?P<fn>[\w<>.]+)')
_INNERMOST = 4
_NATIVE_PLACE = re.compile(
    r"(?:^|\s|\()(?P<path>/?[\w.+-]+(?:/[\w.+-]+)*\.(?:cuh?|cpp|cc|cxx|c|hpp|h|go|rs)):\d+"
)
_EXCEPTION_CLASS = re.compile(r"^(?P<cls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::\s*|$)")
# where a message within a line begins: after a location or logger prefix ("file.cu:12: ", "what():  "), or
# at a quoted message a wrapper carries ("... with error 'CUDA error: ...'", 'ValueError("type ...")')
_NESTED = re.compile(r""":\s+|(?:^|[\s(])['"]""")


# Answers already given, per rules object: the root cause weighs every error of a launch again at each new one,
# and one answer costs a few hundred regex searches (case-blind alternations: tens of microseconds each), most
# of the time of replaying a short log. Keyed by the rules' identity (a profile's tuple; hashing its rules would
# cost more than it saves), the object kept beside its answers so that its id cannot be another's.
_Owner = TypeVar("_Owner")
_Key = TypeVar("_Key")
_Answer = TypeVar("_Answer")

_MEMO_RULES = 8  # rules objects remembered (a daemon's engines and user profiles)
_MEMO_ANSWERS = 4096  # answers remembered per rules object: beyond, they are forgotten and found again
_memo: dict[int, tuple[Sequence[CategoryRule], dict[tuple[str, str], Category]]] = {}


def answers_of(memo: dict[int, tuple[_Owner, dict[_Key, _Answer]]], owner: _Owner) -> dict[_Key, _Answer]:
    """The answers `memo` keeps for `owner` (a profile's rules: known by identity, kept beside its answers so
    that an id reused by another object finds none), made empty the first time; at most `_MEMO_RULES` owners."""
    entry = memo.get(id(owner))
    if entry is None or entry[0] is not owner:
        if len(memo) >= _MEMO_RULES:
            memo.clear()
        entry = memo[id(owner)] = (owner, {})
    return entry[1]


def categorize(summary: str, traceback: str = "", *, rules: Sequence[CategoryRule]) -> Category:
    """The category of an error from its decisive line `summary` and its `traceback`, by a profile's
    `[[category]]` `rules` (docs/categories.md): of the rules that hold, the one of the best tier (an exception's
    class, then its message's template, then where it was raised, then a phrase), the first of its tier;
    `other` when none holds."""
    answers = answers_of(_memo, rules)
    key = (summary, traceback)
    category = answers.get(key)
    if category is None:
        if len(answers) >= _MEMO_ANSWERS:
            answers.clear()
        category = answers[key] = _categorize(summary, traceback, rules)
    return category


def _categorize(summary: str, traceback: str, rules: Sequence[CategoryRule]) -> Category:
    # what the message says may follow ("This may lead to ... CUDA errors") is no part of what happened
    line = _HYPOTHETICAL.split(summary.strip(), maxsplit=1)[0]
    m = _EXCEPTION_CLASS.match(line)
    cls = m.group("cls") if m and ("." in m.group("cls") or m.group("cls").endswith(_CLASS_ENDINGS)) else None
    frames = list(_FRAME.finditer(traceback))[-_INNERMOST:]
    native = (p.group("path") for p in _NATIVE_PLACE.finditer(line))
    paths = "\n".join([*(f.group("path") for f in frames), *native])
    functions = "\n".join(f.group("fn") for f in frames)
    # A template is the failure's own wording from its start: an exception's message, or a message it carries
    # ("Worker failed with error 'CUDA error: ...'"); in a line that is no exception, the line itself; and in
    # either, what follows one of its prefixes ("file.cu:12: ", "what():  ").
    head = line[m.end() :] if m and cls is not None else line
    messages = [head, *(head[p.end() :] for p in _NESTED.finditer(head))]
    best: CategoryRule | None = None
    for rule in rules:
        if (best is None or rule.tier < best.tier) and rule.matches(cls, messages, line, paths, functions):
            best = rule
    if best is not None:
        return best.category
    if _IMPORTING.search(traceback):
        # raised while a module was being imported (an extension's operators missing, a package built for
        # another torch): the environment's packages do not fit together
        return Category.IMPORT
    return Category.OTHER


# The endings of an exception class's name: a line "Name: message" is an exception only with one of them (or a
# dotted, qualified name); "start: couldn't bind" is a logger's prefix.
_CLASS_ENDINGS = ("Error", "Exception", "Interrupt", "Exit", "Warning", "Failure", "Fault")

_HYPOTHETICAL = re.compile(r"\. (?:This|It|That|Which) (?:may|might|can|could|will|would) ")

# A frame whose source line is an import statement: the exception was raised while importing.
_IMPORTING = re.compile(r"\n\s+(?:from [\w.]+ import\b|import [\w.]+)")


# NCCL numbers each collective of a process group: startup (init, profiling, graph capture) runs a few
# hundred to a few thousand; tens of thousands mean the server had been serving for a while.
_SEQ_NUM = re.compile(r"SeqNum=(\d+)")
_SERVING_SEQ_NUM = 10_000

# torch.compile's own exception classes (torch/_dynamo/exc.py: Unsupported, BackendCompilerFailed,
# TorchRuntimeError, ...; torch/_inductor/exc.py: InductorError, CppCompileError, ...): only the compiler raises
# them, so the error happened while the model was compiled, a step of the capture phase (SCHEMA: CUDA graph
# capture, torch.compile, warm-up), whichever engine step ran the compile (vLLM's profile run, SGLang's piecewise
# CUDA graphs). Like any phase an error points at, it only moves the crash's phase forward, never after ready.
_COMPILER_ERROR = re.compile(r"\btorch\._(?:dynamo|inductor)\.exc\.[A-Z]\w*")

# The CUDA runtime's errors of stream capture (cudaGetErrorString of cudaErrorStreamCapture*, cudaErrorCapturedEvent,
# and their names as PyTorch 2.8+ cites them: "Search for `cudaErrorStreamCaptureUnsupported' in ..."): only an
# operation inside a stream capture fails so, and the engines capture streams to build CUDA graphs. HIP words them
# alike (hipErrorStreamCaptureInvalidated "operation failed due to a previous error during capture").
_CAPTURE_ERROR = re.compile(
    r"operation failed due to a previous error during capture|operation not permitted when stream is capturing"
    r"|operation would result in a merge of separate capture sequences|capturing stream has unjoined work"
    r"|capture was not ended in the same stream as it began|dependency created on uncaptured work in another stream"
    r"|operation not permitted on an event last recorded in a capturing stream|\b(?:cuda|hip)ErrorStreamCapture\w+"
)


def phase_from_error(summary: str) -> str | None:
    """The phase an error line itself proves (evidence that beats the markers around it), if any."""
    m = _SEQ_NUM.search(summary)
    if m:
        return "ready" if int(m.group(1)) >= _SERVING_SEQ_NUM else None
    return "capturing_graphs" if _COMPILER_ERROR.search(summary) or _CAPTURE_ERROR.search(summary) else None


_ORDER = {s.value: i for i, s in enumerate(State)}


def phase_from_frames(traceback: str, profile: Profile) -> str | None:
    """The phase that a traceback's innermost frame known to `profile` (its `[[frame]]` tables) belongs to."""
    frames = profile.frames
    answers = answers_of(_frames_memo, frames)
    if traceback in answers:
        return answers[traceback]
    found = [(m.start(), phase) for phase, pattern in frames for m in pattern.finditer(traceback)]
    # of frames at one place, the later phase's
    phase = max(found, key=lambda f: (f[0], _ORDER[f[1]]))[1] if found else None
    if len(answers) >= _MEMO_TEXTS:
        answers.clear()
    answers[traceback] = phase
    return phase


# Tracebacks' phases already found, per frames tuple (kept as `_memo` keeps its rules): a traceback is read when
# its exception line comes and again, the same text, when it closes, each time with every [[frame]] regex
_MEMO_TEXTS = 512  # texts remembered per frames tuple (a traceback's text is a few kilobytes)
_frames_memo: dict[int, tuple[tuple[tuple[str, Searched], ...], dict[str, str | None]]] = {}


def hint_for(category: str, summary: str, phase: str, facts: Mapping[str, object], profile: Profile) -> str:
    """One line an operator can act on: the first of `profile`'s hints for the category that fits the phase and
    the summary, filled in with the facts and what the log told (free memory, port, compute capability)."""
    for hint in profile.hints:
        if (
            hint.category == category
            and (not hint.phases or phase in hint.phases)
            and (hint.when is None or hint.when.search(summary))
        ):
            return fill(hint.text, {**facts, **_told(summary, facts)})
    return "see the traceback for the failing call"


def fill(template: str, values: Mapping[str, object]) -> str:
    """A hint's template with `values` put in; a name it has no value for stays as written."""
    try:
        return template.format_map(_Values(values))
    except (IndexError, ValueError):
        return template


class _Values(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return f"{{{key}}}"


def _told(summary: str, facts: Mapping[str, object]) -> dict[str, str]:
    # the values a hint may name besides the facts: what the error's message and the facts tell
    after_weights = _fact(facts, "avail_mem_after_weights_gb")
    kv_gib = _fact(facts, "kv_cache_memory_gb")
    port = _first(r"port[ =:'\"]+(\d{2,5})", summary) or _fact(facts, "port")
    cc = _first(r"capability:? (\d+\.\d+)", summary) or _first(r"sm_?(\d{2,3})", summary)
    missing = _first(r"(lib[\w.+-]+\.so[\w.]*)", summary) or _first(r"No module named '([^']+)'", summary)
    return {
        "free": f" ({after_weights} GB free after weights)"
        if after_weights
        else (f" ({kv_gib} GiB for the KV cache)" if kv_gib else ""),
        "where": f"port {port}" if port else "the port",
        "what": f"compute capability {cc}" if cc else "this GPU",
        "thing": missing or "a library",
        "args": summary.split("unrecognized arguments:", 1)[1].strip()
        if "unrecognized arguments:" in summary
        else "",
    }


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _fact(facts: Mapping[str, object], name: str) -> str | None:
    value = facts.get(name)
    return None if value is None else f"{value:g}" if isinstance(value, float) else str(value)
