"""The pure core: a log's bytes in, transitions and a verdict out; no I/O, no clock (docs/architecture.md)."""
