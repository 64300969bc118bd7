"""asyncssh, imported with cryptography's DSA deprecation quieted: every module of ours takes it from here.

cryptography 51 deprecates DSA, and asyncssh (to 2.24.1 at least) names DSA key types at import, so each
process that reaches SSH would print `CryptographyDeprecationWarning: DSA is deprecated` on its standard error
once. Watchdog never uses DSA keys; the warning tells an operator nothing they can act on. Only that warning,
only while asyncssh is first imported, is ignored.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="DSA is deprecated")
    import asyncssh

__all__ = ["asyncssh"]
