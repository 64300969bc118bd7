"""asyncssh's receive path made shorter for what a followed host sends most: its channels' data packets.

Every write round of a host's multiplexer (`watchdog.follow.sources.mux`) comes as one SSH packet, and asyncssh
pays the same Python for each whatever it carries: over SSH that was the one cost a local daemon does not have (a
tenth to a seventh of the daemon's samples at 200 launches: docs/benchmarks.md). Four parts of it are redone here,
each with the same outcome, each only where the version of asyncssh has what it needs (else left as it is, the
function saying False):

- `reuse_gcm_keys`: asyncssh's AES-GCM cipher (`aes128-gcm@openssh.com`, what it and OpenSSH negotiate first) makes
  a new `AESGCM` object for every packet it decrypts or encrypts: the key's schedule made again each time, for a
  key that stays the same until the next key exchange (which makes a new cipher). Here each cipher makes it once,
  and counts its invocation (the IV's last 8 bytes) as an int rather than from its bytes each time.
- `quick_awaitable_check`: for each packet, asyncssh asks `inspect.isawaitable` of what its handler returned
  (nearly always True), which for a bool goes through `collections.abc.Awaitable`'s ABC check (a call of
  Python's `ABCMeta.__instancecheck__`). Its connection module is given an `inspect` whose `isawaitable` says
  False at once for True, False and None, and asks `inspect` for the rest.
- `direct_data`: a channel's data packet goes through the channel's packet handler table, `_process_data` (its
  state, the string read, a debug log call), `_accept_data` (the window, a pause) and `_deliver_data` to the
  session's `data_received`. For the usual case (the channel open both ways, not paused, the data within the
  window, nothing at asyncssh's debug level 2 to log, no text decoding) the channel takes it in one call: the
  window counted as asyncssh counts it, its adjustment sent when asyncssh sends it (through asyncssh's own
  `_deliver_data`); anything else goes the usual way, untouched.
- `direct_packets`: the connection decrypts each packet as asyncssh does (the same call of its decryption), and
  a data packet of a channel of `direct_data`'s goes to that channel at once: no `SSHPacket`, no walk of the
  packet type's checks (key exchange, authentication, strict kex), no handler dispatch; the sequence number and
  the receive state move on as asyncssh's `_finish_recv_packet` moves them. Any other packet (or one the channel
  does not take) goes through asyncssh's own `_recv_packet`, handed what was decrypted: everything but data
  is asyncssh's, as before.
"""

from __future__ import annotations

import inspect
from typing import Any

from watchdog.follow.sources.asyncssh_quiet import asyncssh

__all__ = ["direct_data", "direct_packets", "quick_awaitable_check", "reuse_gcm_keys"]

_MSG_CHANNEL_DATA = 94  # RFC 4254 section 5.2
_DATA_DEBUG_LEVEL = 2  # asyncssh's debug level from which `_process_data` logs each packet
_MASK64 = (1 << 64) - 1
# the releases of asyncssh whose receive path (connection.py `_recv_packet`, `_finish_recv_packet`; channel.py
# `_process_data`, `_accept_data`, `_deliver_data`; crypto/cipher.py `GCMCipher`) these shortcuts were read against:
# they repeat its steps, so a release not read here keeps asyncssh's own path, whatever attributes it has. The
# steps are the same in all four but one: up to 2.24.0 a channel counts received data against its window in
# `_deliver_data` (as it hands it to the session), from 2.24.1 in `_accept_data` (as it takes it, paused or not);
# the value says where ("deliver" or "accept"). CI runs the tests on the newest (constraints.txt) and the oldest
# (the floors, pyproject.toml).
_READ_RELEASES = {"2.23.0": "deliver", "2.23.1": "deliver", "2.24.0": "deliver", "2.24.1": "accept"}
_CONNECTION_NEEDS = (
    "_recv_packet",
    "_recv_pkthdr",
    "_recv_handler",
    "_recv_encryption",
    "_recv_seq",
    "_recv_macsize",
    "_recv_blocksize",
    "_pktlen",
    "_packet",
    "_inpbuf",
    "_auth_complete",
    "_auth_final",
    "_decompressor",
    "_channels",
    "_transport",
)
_CHANNEL_NEEDS = (
    "process_packet",
    "_recv_state",
    "_send_state",
    "_recv_paused",
    "_recv_window",
    "_init_recv_window",
    "_encoding",
    "_session",
    "_deliver_data",
)


def _window_counted() -> str | None:
    # where the installed release counts received data against a channel's window; None: a release not read
    return _READ_RELEASES.get(str(getattr(asyncssh, "__version__", "")))


def _read_release() -> bool:
    return _window_counted() is not None


def reuse_gcm_keys() -> bool:
    """Make asyncssh's AES-GCM cipher keep one `AESGCM` object per key (see the module's docstring); whether it
    is so now (done once per process)."""
    if not _read_release():
        return False
    cipher = getattr(getattr(asyncssh, "crypto", None), "cipher", None)  # asyncssh's layout: looked for
    gcm = getattr(cipher, "GCMCipher", None)
    if gcm is None:
        return False
    if getattr(gcm, "_watchdog_reused", False):
        return True
    aead, invalid = getattr(cipher, "AESGCM", None), getattr(cipher, "InvalidTag", None)
    mac_size = getattr(cipher, "_GCM_MAC_SIZE", None)
    if aead is None or invalid is None or mac_size != 16:
        return False
    if not all(callable(getattr(gcm, name, None)) for name in ("encrypt_and_sign", "verify_and_decrypt")):
        return False

    def _next(self: Any) -> tuple[Any, bytes]:
        # the cipher's AESGCM (made at its first packet), and the IV of this packet; the IV advanced for the next
        # as asyncssh's `_update_iv` would advance it (its last 8 bytes a big-endian counter)
        state = self.__dict__.get("_watchdog_gcm")
        iv = self._iv
        if state is None or state[2] is not iv:  # first packet (or the IV set from elsewhere): from its bytes
            state = [aead(self._key), int.from_bytes(iv[4:], "big"), iv]
            self._watchdog_gcm = state
        count = (state[1] + 1) & _MASK64
        state[1] = count
        state[2] = self._iv = iv[:4] + count.to_bytes(8, "big")
        return state[0], iv

    def encrypt_and_sign(self: Any, header: bytes, data: bytes) -> tuple[bytes, bytes]:
        key, iv = _next(self)
        sealed = key.encrypt(iv, data, header)
        return header + sealed[:-16], sealed[-16:]

    def verify_and_decrypt(self: Any, header: bytes, data: bytes, mac: bytes) -> bytes | None:
        key, iv = _next(self)
        try:
            opened: bytes | None = key.decrypt(iv, data + mac, header)
        except invalid:
            opened = None
        return opened

    gcm._watchdog_original = (gcm.encrypt_and_sign, gcm.verify_and_decrypt)  # asyncssh's, for a comparison
    gcm.encrypt_and_sign = encrypt_and_sign
    gcm.verify_and_decrypt = verify_and_decrypt
    gcm._watchdog_reused = True
    return True


class _Inspect:
    """`inspect` as asyncssh's connection module asks it: `isawaitable` at once for a handler's usual answers."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def isawaitable(self, value: object) -> bool:
        if value is True or value is None or value is False:
            return False
        return bool(self._module.isawaitable(value))


def quick_awaitable_check() -> bool:
    """Give asyncssh's connection module the `inspect` of `_Inspect` (see the module's docstring); whether it has
    it now (done once per process)."""
    module = getattr(asyncssh, "connection", None)
    found = getattr(module, "inspect", None)
    if isinstance(found, _Inspect):
        return True
    if found is not inspect:
        return False
    module.inspect = _Inspect(inspect)  # type: ignore[union-attr]
    return True


def _packets_readable() -> bool:
    # asyncssh's received packet keeps its payload and read position as `_packet` and `_idx`
    try:
        packet = asyncssh.packet.SSHPacket(b"\0\0\0\0")
        packet.get_uint32()
    except Exception:
        return False
    return getattr(packet, "_packet", None) == b"\0\0\0\0" and getattr(packet, "_idx", None) == 4


def direct_data(chan: object) -> bool:
    """Let the channel `chan` (an asyncssh client channel, as its session's `connection_made` gets it) hand its
    data packets to its session in one call (see the module's docstring); whether it was done."""
    counted = _window_counted()
    if counted is None:
        return False
    counted_when_delivered = counted == "deliver"
    level = getattr(asyncssh.logging.SSHLogger, "_debug_level", None)
    if not isinstance(level, int) or level >= _DATA_DEBUG_LEVEL:
        return False
    if not all(hasattr(chan, name) for name in _CHANNEL_NEEDS) or chan._encoding is not None:  # type: ignore[attr-defined]
        return False
    if not _packets_readable():
        return False
    process = chan.process_packet  # type: ignore[attr-defined]
    ch: Any = chan

    def take(payload: bytes, at: int) -> bool:
        # a data packet's payload, its string (uint32 length, then its bytes) at `at`: handed to the session as
        # asyncssh would hand it, if this is the usual case (else False, and nothing was done)
        if ch._recv_state != "open" or ch._recv_paused or ch._send_state in ("close_pending", "closed"):
            return False
        size = int.from_bytes(payload[at : at + 4], "big")
        window = ch._recv_window
        if not 0 < size <= window or at + 4 + size != len(payload):
            return False  # empty, past the window, malformed: as asyncssh has it
        window -= size
        session = ch._session
        if window < ch._init_recv_window / 2 or session is None:
            if not counted_when_delivered:
                ch._recv_window = window  # (else `_deliver_data` counts it)
            ch._deliver_data(payload[at + 4 :], None)  # the window's adjustment sent, as asyncssh sends it
        else:
            ch._recv_window = window
            session.data_received(payload[at + 4 :], None)
        return True

    def process_packet(pkttype: int, pktid: int, packet: Any) -> Any:
        if pkttype == _MSG_CHANNEL_DATA and take(packet._packet, packet._idx):
            packet._idx = len(packet._packet)
            return True
        return process(pkttype, pktid, packet)

    ch.process_packet = process_packet
    ch._watchdog_take = take
    return True


class _Decrypted:
    """A connection's decryption for one packet that `direct_packets` has decrypted already: asyncssh's own
    `_recv_packet` takes it on from there as if it had decrypted it (slicing and dropping the same bytes)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | None) -> None:
        self.data = data

    def decrypt_packet(
        self, seq: int, first: bytes, rest: bytes, header_len: int, mac: bytes
    ) -> bytes | None:
        return self.data


def direct_packets(conn: Any) -> bool:
    """Let the connection `conn` (as its client's `connection_made` gets it) take a data packet of a channel of
    `direct_data`'s at once after decrypting it (see the module's docstring); whether it was done."""
    if not _read_release():
        return False
    if not all(hasattr(conn, name) for name in _CONNECTION_NEEDS):
        return False
    usual = conn._recv_packet  # asyncssh's, bound

    def recv_packet() -> bool:
        decryption = conn._recv_encryption
        if not decryption or not conn._auth_complete or conn._decompressor is not None:
            return bool(usual())
        macsize = conn._recv_macsize
        rem = 4 + conn._pktlen + macsize - conn._recv_blocksize
        inpbuf = conn._inpbuf
        if len(inpbuf) < rem:
            return False
        seq = conn._recv_seq
        data = decryption.decrypt_packet(
            seq, conn._packet, inpbuf[: rem - macsize], 4, inpbuf[rem - macsize : rem]
        )
        if data and data[1] == _MSG_CHANNEL_DATA and len(data) > 6 + data[0]:
            chan = conn._channels.get(int.from_bytes(data[2:6], "big"))
            take = getattr(chan, "_watchdog_take", None)
            if take is not None and take(data[1 : -data[0]], 5):
                # what asyncssh's `_recv_packet` and `_finish_recv_packet` do after a channel's packet
                conn._inpbuf = inpbuf[rem:]
                conn._packet = b""
                conn._auth_final = True
                if conn._transport:
                    conn._recv_seq = (seq + 1) & 0xFFFFFFFF
                conn._recv_handler = conn._recv_pkthdr
                return True
        # anything else: asyncssh's own path, given what was decrypted (the decryption's state moved on once)
        conn._recv_encryption = _Decrypted(data)
        try:
            return bool(usual())
        finally:
            if type(conn._recv_encryption) is _Decrypted:  # (a key exchange's last packet sets another)
                conn._recv_encryption = decryption

    conn._recv_packet = recv_packet
    return True
