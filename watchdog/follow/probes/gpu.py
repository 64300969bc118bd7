"""GPU memory probe: runs `nvidia-smi --query-gpu=...` on the host (locally or over the shared SSH connection)."""

from __future__ import annotations

import shlex

import anyio

from watchdog.follow.probes.nvidia import QUERY_GPU_ARGS, GpuSample, parse_gpu_query
from watchdog.follow.sources.sshpool import SSHPool
from watchdog.vocabulary import DEFAULT_GPU_INTERVAL

__all__ = ["DEFAULT_GPU_INTERVAL", "GpuProbe"]

_TIMEOUT = 10.0


class GpuProbe:
    """Samples GPU memory on a host; `available` turns False once nvidia-smi is found missing."""

    def __init__(
        self,
        *,
        pool: SSHPool | None = None,
        host: str | None = None,
        port: int | None = None,
        user: str | None = None,
    ) -> None:
        """Describe the host: `host` None is this machine; otherwise `pool` reaches it."""
        if host is not None and pool is None:
            raise ValueError("a remote GPU probe needs the SSH pool")
        self.pool = pool
        self.host = host
        self.port = port
        self.user = user
        self.available = True

    async def sample(self) -> list[GpuSample] | None:
        """One reading of every GPU; None when there is no nvidia-smi or it failed (no GPU, no driver).

        Raises:
            ConnectionLost: the host cannot be reached now.
        """
        if not self.available:
            return None
        if self.host is None or self.pool is None:
            return await self._local()
        result = await self.pool.run(
            self.host, shlex.join(QUERY_GPU_ARGS), port=self.port, user=self.user, timeout=_TIMEOUT
        )
        if result.exit_status == 127:  # command not found: a host without NVIDIA tools
            self.available = False
            return None
        if result.exit_status != 0:
            return None
        stdout = result.stdout
        text = stdout.decode("utf-8", "replace") if isinstance(stdout, bytes) else str(stdout or "")
        return parse_gpu_query(text)

    async def _local(self) -> list[GpuSample] | None:
        try:
            # Shielded: a cancel landing while asyncio spawns the child would leave it (and its pipes)
            # behind; nvidia-smi answers within a second, and the timeout still bounds it.
            with anyio.CancelScope(shield=True), anyio.fail_after(_TIMEOUT):
                result = await anyio.run_process(list(QUERY_GPU_ARGS), check=False)
        except FileNotFoundError:
            self.available = False
            return None
        if result.returncode != 0:
            return None
        return parse_gpu_query(result.stdout.decode("utf-8", "replace"))
