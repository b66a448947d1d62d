"""Which processes are this server's client: the one pid kill-worker must never signal besides the server's own.

Why its own module: an ancestor is the client only when the client started the server directly. Over `--transport http`
the client is a TCP peer, or the far end of a forwarder (mcp-remote, socat, `ssh -L`) that is; over stdio a client that
started the server through `setsid -f` is no ancestor, and holds the server's stdio pipes. Each was signalled on its own
request after an accept (seventy-sixth and seventy-seventh rounds).
"""

from __future__ import annotations

import ipaddress
import os
from collections import defaultdict

MAX_HOPS = 3  # forwarders between the client and the server followed, each accepting a loopback connection
MAX_FDS = 100_000


def is_client(pid: int) -> bool:
    """Whether `pid` holds the server's stdio pipes, or reaches the server over loopback TCP through at most MAX_HOPS
    processes that each accepted the connection before it (the server's own listener first)."""
    return _holds_our_stdio(pid) or pid in _tcp_clients()


def _pipe(link: str) -> bool:
    return link.startswith("pipe:")


def _holds_our_stdio(pid: int) -> bool:
    ours = set()
    for fd in (0, 1):
        try:
            if _pipe(link := os.readlink(f"/proc/self/fd/{fd}")):
                ours.add(link)
        except OSError:
            continue
    if not ours:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in fds[:MAX_FDS]:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") in ours:
                return True
        except OSError:
            continue
    return False


def _loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip.split("%")[0]).is_loopback
    except ValueError:
        return False


def _tcp_clients() -> set[int]:
    """Processes connected to the server's listening sockets over loopback, and to those processes' listening sockets,
    hop by hop. Only accepted connections are followed: the server's own outgoing calls (to an MLflow server, which the
    run being diagnosed also talks to) lead to no client."""
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return set()
    by_laddr = {c.laddr: c.pid for c in conns if c.pid and c.laddr}
    listening: dict[int, set[int]] = defaultdict(set)
    accepted: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for c in conns:
        if c.pid and c.status == psutil.CONN_LISTEN:
            listening[c.pid].add(c.laddr.port)
    for c in conns:
        if c.pid and c.raddr and c.laddr and c.laddr.port in listening[c.pid] and _loopback(c.raddr.ip):
            accepted[c.pid].add(tuple(c.raddr))
    seen, frontier, out = {os.getpid()}, {os.getpid()}, set()
    for _ in range(MAX_HOPS + 1):
        nxt = {q for p in frontier for r in accepted.get(p, ()) if (q := by_laddr.get(r)) and q not in seen}
        seen |= nxt
        out |= nxt
        frontier = nxt
    return out
