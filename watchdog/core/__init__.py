"""The pure core: bytes of a log in, transitions and a verdict out. No I/O, no clock (time is an argument).

framing (bytes -> lines) -> formats (CRI, json-file, journald records -> lines) -> envelope (a line's rank and
level) -> scanner (profile rules -> events) -> tracebacks (assembly per rank) -> rootcause and categories (what
failed, and why) -> findings -> lifecycle (the state machine) -> analyzer (all of it strung together) -> verdict
(the JSON object).
"""
