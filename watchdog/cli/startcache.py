"""What a replay's start compiles (regular expressions, dataclasses' methods), kept compiled between its runs.

A replay's start makes about 140 regular expressions (module constants, the profile's rules, the envelope's
layers) and 39 dataclasses, whose methods `dataclasses` writes as source text and compiles one by one (about
220 `exec`s): on CPython 3.11 the two were about a third of a replay's start, and a sixth of a replay of a
million lines. Neither depends on the log. So the program's own replay keeps what they compile in one file of
the user's cache folder (beside the prefilter's Hyperscan databases, in the same checksummed format), keyed by
the exact Python, and the next run takes it from there:

- a regular expression: the arguments `re._compiler.compile` gives `_sre.compile` (the opcodes, the flags, the
  groups; plain data), given to it again. `_sre.compile` checks the opcodes (CPython's `_validate`) before it
  makes the pattern, which is then equal in every respect to a compiled one. Most of a compile is the parse of
  the pattern in Python (`re._parser`): that is what is saved.
- a dataclass's method: the code object of the source text `dataclasses` passes to `exec`, as a `.pyc` file
  keeps a module's (`marshal`); the text is the key, so a method is the same code its text would compile to.
  So too a named tuple's `__new__` (`collections`' `eval`) and its fields' annotations (`typing`'s `compile` of
  each as a forward reference: the first compile of a process costs a millisecond).

Only in the program's own replay (`watchdog.cli.app.main`), never in a caller's process: it replaces
`re._compiler.compile`, and the `exec`, `eval` and `compile` that `dataclasses`, `collections` and `typing` call,
for the rest of the process. The regular expressions only on the CPython versions whose `re._compiler.compile`
`_compile` mirrors (3.11-3.13). Every failure (no cache folder, a damaged file, another Python's, opcodes refused)
is a compile, as without the file.
"""

from __future__ import annotations

import collections
import contextlib
import marshal
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from watchdog.follow.databases import DiskDatabases, cache_folder

__all__ = ["MAX_KEPT", "KeptCompiles", "keep_compiles"]

# entries kept at most, of each kind: a file past it starts over (a user's own rules, every engine's profile: a
# few hundred regexes; the dataclasses' methods are the same in every run)
MAX_KEPT = 4096
_RE_VERSIONS = {(3, 11), (3, 12), (3, 13)}  # whose re._compiler.compile `_compile` mirrors

_ReArgs = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]


class KeptCompiles:
    """The regexes and methods compiled in runs before, loaded from `store`; saved to it when this run added.

    Each entry is kept marshalled on its own, and read when asked for: a file grown by every engine's rules and
    every error category that a user's replays met (a megabyte) costs a replay what it uses of it."""

    def __init__(self, store: DiskDatabases, key: bytes) -> None:
        self.store = store
        self.key = key
        self.regexes: dict[tuple[str | bytes, int], bytes] = {}
        self.codes: dict[tuple[str, str], bytes] = {}
        self.grew = False
        raw = store.load(key)
        if raw is not None:
            with contextlib.suppress(ValueError, EOFError, TypeError):
                regexes, codes = marshal.loads(raw)  # noqa: S302 - the user's own file, checksummed: a .pyc's trust
                if isinstance(regexes, dict) and isinstance(codes, dict):
                    self.regexes, self.codes = regexes, codes

    def compile_regex(self, pattern: Any, flags: int = 0) -> re.Pattern[Any]:
        """`re._compiler.compile`: a kept pattern's code handed to `_sre`, else compiled and kept."""
        if not isinstance(pattern, (str, bytes)) or flags & re.DEBUG:
            return _RE_COMPILE(pattern, flags)  # a parsed pattern (re.Scanner), or one to be printed
        key = (pattern, int(flags))  # a caller's RegexFlag as re._compile makes it: an int, marshal's own
        kept = self.regexes.get(key)
        if kept is not None:
            try:
                return _sre.compile(pattern, *marshal.loads(kept))  # type: ignore[no-any-return]  # noqa: S302
            except (TypeError, ValueError, EOFError, RuntimeError):
                pass  # not what _sre makes a pattern of (opcodes refused): compiled below
        args = _compile(pattern, key[1])
        self._keep(self.regexes, key, marshal.dumps(args))
        return _sre.compile(pattern, *args)  # type: ignore[no-any-return]

    def exec(self, source: Any, globals: Any = None, locals: Any = None) -> None:
        """The `exec` of `dataclasses`: a text's code object kept, else compiled as `exec` compiles it, and kept."""
        exec(self._code(source, "exec"), globals, locals)  # noqa: S102 - dataclasses' own generated methods

    def eval(self, source: Any, globals: Any = None, locals: Any = None) -> Any:
        """The `eval` of `collections` (a named tuple's `__new__`), as `exec` above."""
        return eval(self._code(source, "eval"), globals, locals)  # noqa: S307 - namedtuple's own generated code

    def compile_text(self, source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
        """The `compile` of `typing` (a forward reference: a class's annotation as text), as `exec` above."""
        if filename != "<string>" or args or kwargs:
            return compile(source, filename, mode, *args, **kwargs)
        return self._code(source, mode)

    def _code(self, source: Any, mode: str) -> Any:
        if not isinstance(source, str):
            return source
        key = (mode, source)
        kept = self.codes.get(key)
        if kept is not None:
            with contextlib.suppress(ValueError, EOFError, TypeError):
                code = marshal.loads(kept)  # noqa: S302 - as above
                if isinstance(code, types.CodeType):
                    return code
        # as exec, eval and compile make it of a text: file "<string>", no future flags (dataclasses, collections
        # and typing have none to inherit)
        code = compile(source, "<string>", mode, dont_inherit=True)
        self._keep(self.codes, key, marshal.dumps(code))
        return code

    def _keep(self, kept: dict[Any, bytes], key: Any, value: bytes) -> None:
        if len(kept) >= MAX_KEPT:
            kept.clear()
        kept[key] = value
        self.grew = True

    def save(self) -> None:
        """Write the file again where this run compiled anything new."""
        if self.grew:
            self.store.save(self.key, marshal.dumps((self.regexes, self.codes)))


def _compile(pattern: str | bytes, flags: int) -> _ReArgs:
    # re._compiler.compile of CPython 3.11-3.13 up to its call of _sre.compile: the arguments it gives it
    parsed = _parser.parse(pattern, flags)
    # its opcodes are int subclasses: plain ints for marshal
    code = [int(op) for op in _compiler._code(parsed, flags)]
    groupindex = parsed.state.groupdict
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return flags | parsed.state.flags, code, parsed.state.groups - 1, groupindex, tuple(indexgroup)


def keep_compiles() -> Callable[[], None]:
    """Have `re`, `dataclasses`, `collections` and `typing` use and keep the compiles of the user's cache folder from
    now on (this process only); return what saves them (call it at the run's end). A no-op where nothing can be
    kept."""
    folder = cache_folder()
    if folder is None or sys.implementation.name != "cpython":
        return lambda: None
    tag = f"python compiles {sys.implementation.cache_tag} {sys.hexversion:x} {sys.version}"
    kept = KeptCompiles(DiskDatabases(folder.parent / "compiled"), tag.encode())
    if sys.version_info[:2] in _RE_VERSIONS:
        _compiler.compile = kept.compile_regex
    # module globals, found before the builtins by the code of these modules alone
    collections.eval = kept.eval  # type: ignore[attr-defined]
    typing.compile = kept.compile_text  # type: ignore[attr-defined]
    import dataclasses  # noqa: PLC0415 - after: its imports (inspect, dis) make named tuples

    dataclasses.exec = kept.exec  # type: ignore[attr-defined]
    return kept.save


_compiler: Any = sys.modules["re._compiler"]
_parser: Any = sys.modules["re._parser"]
_sre: Any = sys.modules["_sre"]
_RE_COMPILE: Callable[..., re.Pattern[Any]] = _compiler.compile
