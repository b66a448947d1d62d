"""A real OpenSSH server on 127.0.0.1 for the ssh collector's tests, with throwaway keys.

Four ports: one normal, and three whose ForceCommand misbehaves the ways real hosts do: every
command sleeps (a hung filesystem), the answer stops midway and then hangs, or a login banner
answers instead of the command.
Client configs (ssh -F) pin the port, key and known_hosts so the tests never touch ~/.ssh.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ml-skills-test", "-f", str(path)], check=True)
    return path


@dataclass
class Sshd:
    root: Path
    port: int
    sleep_port: int
    partial_port: int
    junk_port: int
    proc: subprocess.Popen[bytes]

    def client_config(self, name: str, *, port: int | None = None, key: str = "userkey", known_hosts: str = "known_hosts") -> str:
        """An ssh_config that reaches this server at 127.0.0.1, with this key and known_hosts."""
        cfg = self.root / f"{name}.ssh_config"
        cfg.write_text(
            "Host 127.0.0.1\n"
            f"  Port {port or self.port}\n"
            f"  IdentityFile {self.root / key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.root / known_hosts}\n"
            "  GlobalKnownHostsFile /dev/null\n"
        )
        return str(cfg)

    def stop(self) -> None:
        if self.proc.poll() is None:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                child.kill()
            self.proc.kill()
        self.proc.wait(5)


def start(root: Path) -> Sshd:
    if not os.path.exists(SSHD):
        raise RuntimeError("sshd is not installed: apt-get install openssh-server (tests/run.sh does it)")
    host = keygen(root / "hostkey")
    user = keygen(root / "userkey")
    keygen(root / "otherkey")
    (root / "authorized_keys").write_text(Path(f"{user}.pub").read_text())
    port, sleep_port, partial_port, junk_port = free_port(), free_port(), free_port(), free_port()
    pub = " ".join(Path(f"{host}.pub").read_text().split()[:2])
    (root / "known_hosts").write_text("".join(f"[127.0.0.1]:{p} {pub}\n" for p in (port, sleep_port, partial_port, junk_port)))
    (root / "empty_known_hosts").write_text("")
    (root / "sshd_config").write_text(
        f"Port {port}\nPort {sleep_port}\nPort {partial_port}\nPort {junk_port}\nListenAddress 127.0.0.1\nHostKey {host}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPidFile none\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        f"Match LocalPort {sleep_port}\n    ForceCommand sleep 20\n"
        f"Match LocalPort {partial_port}\n    ForceCommand sh -c \"$SSH_ORIGINAL_COMMAND\" | head -c 700; sleep 20\n"
        f"Match LocalPort {junk_port}\n    ForceCommand echo Welcome to the login node; echo '==ML-SKILLS-0000 LOG ok 9'\n"
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)  # the privilege separation directory Debian's sshd requires as root
    log = open(root / "sshd.log", "wb")  # noqa: SIM115 - sshd writes to it for as long as it runs
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")], stdout=log, stderr=log, start_new_session=True)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(root / 'sshd.log').read_text()}")
        try:
            for p in (port, sleep_port, partial_port, junk_port):
                socket.create_connection(("127.0.0.1", p), timeout=0.5).close()
                return Sshd(root, port, sleep_port, partial_port, junk_port, proc)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"sshd did not listen within 10 s: {(root / 'sshd.log').read_text()}")
