"""The process's own log: structlog's events and the standard library's records in one format, on standard error."""

from __future__ import annotations

import asyncio
import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, MutableMapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    import structlog

__all__ = [
    "FOREIGN_LOG_LEVEL",
    "configure_logging",
    "configure_logging_on_import",
    "flush_log",
    "import_structlog_without_rich",
]

# what other libraries (asyncssh, aiohttp, asyncio) log: their warnings and errors, as before they were routed
FOREIGN_LOG_LEVEL = "WARNING"


def _without_controls(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # the console's processor: JSON escapes control characters by itself, a terminal would act on them
    from watchdog.core.framing import without_controls  # noqa: PLC0415 - with the console only

    for key, value in event.items():
        if isinstance(value, str):
            event[key] = without_controls(value)
    return event


def _traceback_without_controls(sio: TextIO, exc_info: Any) -> None:
    # the console's traceback (structlog's plain one, no locals): an exception's message may hold a host's or
    # a receiver's text, and the renderer writes it after every processor has run
    import traceback  # noqa: PLC0415 - with the console only

    from watchdog.core.framing import without_controls  # noqa: PLC0415 - with the console only

    text = "".join(traceback.format_exception(*exc_info)).removesuffix("\n")
    sio.write("\n" + without_controls(text))


def configure_logging(
    log_format: str, stream: TextIO | None = None, *, level: str = "INFO", cache: bool = True
) -> None:
    """The daemon's log on standard error (or `stream`): one JSON object per line ("json", for journald and
    log shippers) or human-readable lines ("console").

    Everything comes out in that one format: structlog's events, and the standard `logging` records of the
    libraries (asyncssh, aiohttp, asyncio; warnings and up, with a `logger` field). An exception comes with
    its traceback (in JSON as the text of the `exception` field), never with its frames' local variables
    (they hold webhook URLs and tokens). Console colours only on a terminal, and never with `NO_COLOR` set
    (https://no-color.org). `level`: the least level of watchdog's own events that is written; `cache`: each
    logger keeps this configuration once used (the daemon's speed; a command run in-process by a test leaves
    no logger bound to it with `cache=False`). Without `stream`, standard error as it is at each write.
    """
    import structlog  # noqa: PLC0415 - see configure_logging_on_import

    out = stream if stream is not None else cast("TextIO", _STDERR)
    renderer_chain: list[structlog.typing.Processor]
    if log_format == "json":
        # format_exc_info: Python's own traceback text (no locals), in the `exception` field
        renderer_chain = [
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=_json_line),
        ]
    else:
        colors = not os.environ.get("NO_COLOR") and _isatty(out)
        renderer_chain = [
            _without_controls,  # a log's text (or a host's error) moves no cursor on the terminal
            structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=_traceback_without_controls),
        ]
    shared: list[structlog.typing.Processor] = [
        structlog.processors.add_log_level,
        _UtcStamper(),
    ]
    structlog.configure(
        processors=[*shared, *renderer_chain],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level]),
        # one write a line (print makes two, each a system call on an unbuffered standard error: a pipe to
        # journald or a supervisor that a crash loop writes to a hundred times a second)
        logger_factory=structlog.WriteLoggerFactory(out),
        cache_logger_on_first_use=cache,
    )
    # the standard library's records, rendered by the same processors to the same stream
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer_chain],
        )
    )
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(FOREIGN_LOG_LEVEL)
    logging.captureWarnings(True)  # warnings.warn() too, as the `py.warnings` logger


def import_structlog_without_rich() -> bool:
    """Import structlog with rich hidden from it, unless either is imported already; whether it was done.

    structlog looks for rich when it is imported (its console renderer's tracebacks, when rich is there). The
    daemon renders its tracebacks itself (`_traceback_without_controls`, or as JSON text) and draws nothing with
    rich: the 52 modules it would load are 6 MB of the daemon's memory for nothing. An import of rich after this
    one works as usual (only structlog's look was refused)."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return False
    sys.modules["rich"] = None  # type: ignore[assignment]  # how an import is refused: ImportError
    try:
        import structlog  # noqa: F401, PLC0415 - imported here, with rich hidden
    finally:
        del sys.modules["rich"]
    return True


def configure_logging_on_import(log_format: str, *, level: str = "INFO", cache: bool = True) -> None:
    """`configure_logging` the moment something imports structlog, or never if nothing does.

    A command whose own work logs nothing through structlog (`watch` of a local file) saves its import and
    the rich that structlog loads with it (a tenth of a second of the time to a verdict), and still never lets
    an unconfigured structlog print to standard output (its default), which is the command's own.
    """
    if "structlog" in sys.modules:
        configure_logging(log_format, level=level, cache=cache)
        return
    sys.meta_path.insert(
        0, _ConfigureOnImport(lambda: configure_logging(log_format, level=level, cache=cache))
    )


class _ConfigureOnImport(importlib.abc.MetaPathFinder):
    """Finds structlog as the other finders do, and configures it once it has been executed."""

    def __init__(self, configure: Callable[[], None]) -> None:
        self._configure = configure

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "structlog":
            return None
        sys.meta_path.remove(self)  # once, and not again for the find below
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, configure = spec.loader, self._configure

        class _Loader(importlib.abc.Loader):
            # structlog's own loader, but for the configuration after its execution (its other methods, the
            # source and resource readers, are the original's)
            def __getattr__(self, name: str) -> object:
                return getattr(loader, name)

            def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
                return loader.create_module(spec)

            def exec_module(self, module: ModuleType) -> None:
                loader.exec_module(module)
                configure()

        spec.loader = _Loader()
        return spec


class _UtcStamper:
    """structlog's `TimeStamper(fmt="iso", utc=True)`, the same text (2026-12-06T07:35:52.954948Z) made a third
    as dear: the date and time of day once a second, not a `datetime` per line (a crash loop logs ~80 a second)."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")  # one tuple: read and replaced whole from any thread

    def __call__(self, logger: object, name: str, event_dict: MutableMapping[str, Any]) -> Any:
        event_dict["timestamp"] = self.text(time.time_ns() // 1000)  # floored, as `datetime.now` does
        return event_dict

    def text(self, micros: int) -> str:
        """The time `micros` microseconds after the epoch, as `datetime.isoformat` writes it in UTC, with Z."""
        second, fraction = divmod(micros, 1_000_000)
        known, text = self._second
        if known != second:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{fraction:06d}Z" if fraction else f"{text}Z"  # isoformat leaves out a zero fraction


def _json_fallback(value: object) -> object:
    # structlog's: a value's own `__structlog__()`, else its repr
    try:
        return value.__structlog__()  # type: ignore[attr-defined]
    except AttributeError:
        return repr(value)


# one encoder for every line: `json.dumps(..., default=...)` makes one a call (half the cost of a short line)
_ENCODER = json.JSONEncoder(default=_json_fallback)


def _json_line(event_dict: object, **_: object) -> str:
    """JSONRenderer's text of an event (`json.dumps` with structlog's fallback), by the one encoder."""
    return _ENCODER.encode(event_dict)


class _Stderr:
    """`sys.stderr` as it is at each write, not as it was when logging was set up (a test runner swaps it).

    The lines an event loop's callbacks write are held and go out together, in one write, at the loop's next turn
    (a relaunch read in one go logs five transitions: one system call, and one wake-up of journald or whatever
    reads the pipe, not five). So a line reaches the stream within a turn of the loop (milliseconds), a crash's
    too. Anywhere else (no running loop: before it starts, after it ends; another thread) a line is written at
    once (after what is held, in the main thread); what is held at the process's exit is written then
    (`flush_held`, also before an `os._exit`).
    """

    def __init__(self) -> None:
        self._held: list[str] = []

    def write(self, text: str) -> int:
        if threading.current_thread() is not threading.main_thread():
            return sys.stderr.write(text)  # held lines are the main thread's alone: no lock on them
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush_held()
            return sys.stderr.write(text)
        if not self._held:
            loop.call_soon(self.flush_held)
        self._held.append(text)
        return len(text)

    def flush(self) -> None:
        # a logger flushes after each line: held lines are flushed at the loop's next turn, not here
        if not self._held:
            sys.stderr.flush()

    def flush_held(self) -> None:
        """Write what is held now, in one write."""
        if self._held:
            text = "".join(self._held)
            self._held.clear()
            sys.stderr.write(text)
            sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


_STDERR = _Stderr()  # one for the process: what it holds is written at exit
atexit.register(_STDERR.flush_held)


def flush_log() -> None:
    """Write the log lines held for the event loop's next turn now (before `os._exit`, which runs no exit
    handler)."""
    _STDERR.flush_held()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False
