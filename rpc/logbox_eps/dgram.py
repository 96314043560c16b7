"""Many UDP datagrams in one system call: sendmmsg(2) through ctypes.

Python's socket has no sendmmsg, and one send() per datagram costs a Python call and a system
call each: on a 2-core box that held logbox-eps's UDP load below loggen's. Here a batch is
joined into one buffer, its iovec table is built in one pass (array of offset and length
pairs) and copied into a fixed mmsghdr array, and the kernel takes up to BATCH datagrams per
call. Linux only; Batcher.available() says whether it can be used (else send() per datagram).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
from array import array
from collections.abc import Sequence
from itertools import accumulate, chain

BATCH = 1024  # datagrams per sendmmsg call


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [
        ("msg_name", ctypes.c_void_p),
        ("msg_namelen", ctypes.c_uint32),
        ("msg_iov", ctypes.POINTER(_Iovec)),
        ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p),
        ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    ]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _Msghdr), ("msg_len", ctypes.c_uint)]


def _sendmmsg() -> object | None:
    """libc's sendmmsg, or None."""
    name = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(name, use_errno=True).sendmmsg
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


class Batcher:
    """Sends batches of datagrams on one connected UDP socket."""

    _fn = _sendmmsg()

    @classmethod
    def available(cls) -> bool:
        return cls._fn is not None and ctypes.sizeof(_Iovec) == 16

    def __init__(self, sock: socket.socket) -> None:
        self.fd = sock.fileno()
        self.iovs = (_Iovec * BATCH)()
        self.hdrs = (_Mmsghdr * BATCH)()
        for i in range(BATCH):
            self.hdrs[i].msg_hdr.msg_iov = ctypes.pointer(self.iovs[i])
            self.hdrs[i].msg_hdr.msg_iovlen = 1

    def send(self, msgs: Sequence[bytes]) -> None:
        """Every message as one datagram, in order. OSError as send() would raise it."""
        if not msgs:
            return
        buf = b"".join(msgs)  # kept alive here while the kernel reads it
        base = ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value or 0
        lens = [len(m) for m in msgs]
        # (address, length) of each: the running sums from base (one more than there are
        # messages: the end, which zip leaves out)
        starts = accumulate(lens, initial=base)
        table = array("Q", chain.from_iterable(zip(starts, lens, strict=False)))
        addr = table.buffer_info()[0]
        k = 0
        while k < len(msgs):
            n = min(BATCH, len(msgs) - k)
            ctypes.memmove(self.iovs, addr + 16 * k, 16 * n)
            r = self._fn(self.fd, self.hdrs, n, 0)  # type: ignore[misc, operator]
            if r < 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
            k += r
