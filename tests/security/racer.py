"""Swap two paths atomically in a loop (renameat2 RENAME_EXCHANGE), to race a check-then-open.

usage: python -m tests.security.racer PATH_A PATH_B SECONDS
The attackers' racer from issue 14 (reproductions P7 and P8), kept here so the tests run it.
"""

import ctypes
import os
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_EXCHANGE = 2


def main() -> None:
    a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
    end = time.time() + float(sys.argv[3])
    n = 0
    while time.time() < end:
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            print("renameat2 failed", ctypes.get_errno(), flush=True)
            sys.exit(1)
        n += 1
    print("swaps", n, flush=True)


if __name__ == "__main__":
    main()
