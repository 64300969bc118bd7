"""The pure core: bytes of a log in, transitions and a verdict out; no I/O, no clock (docs/architecture.md)."""
