"""Wire-level faults shared by the local fakes (Vertex AI, W&B) and the fault proxy (MLflow):
a TCP reset instead of an answer, and an answer dripped one byte at a time."""

from __future__ import annotations

import socket
import struct
import time
from http.server import BaseHTTPRequestHandler


def reset(h: BaseHTTPRequestHandler) -> None:
    """Close the connection with a TCP RST (SO_LINGER 0), as a load balancer that drops it does."""
    h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    h.close_connection = True
    h.connection.close()


def send_body(h: BaseHTTPRequestHandler, body: bytes, drip: float = 0.0) -> None:
    """Write the body; with `drip`, one byte per interval (each well inside a client's per-read
    timeout) until all is sent or the client hangs up, as a client that gave up does."""
    try:
        if not drip:
            h.wfile.write(body)
            return
        for i in range(len(body)):
            h.wfile.write(body[i : i + 1])
            h.wfile.flush()
            time.sleep(drip)
    except (BrokenPipeError, ConnectionResetError):
        h.close_connection = True
