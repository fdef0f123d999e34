"""A private ``cordon serve`` for a client made without an address: started on a socket in a
fresh 0700 directory, waited for (bounded) until it prints its ready line, and stopped
(SIGTERM, then SIGKILL after a bound) with its directory removed when the client closes."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time

from .errors import CordonError

READY_PREFIX = "cordon serve: listening on "


def find_cordon(cordon: str | None = None) -> str:
    """The ``cordon`` binary: the one given, else $CORDON, else the first in PATH."""
    path = cordon or os.environ.get("CORDON") or shutil.which("cordon")
    if not path:
        raise CordonError("no cordon binary: set $CORDON or put cordon in PATH")
    return path


class PrivateServer:
    """One ``cordon serve --socket`` child; ``url`` is what it listens on."""

    def __init__(self, cordon: str | None = None, *, ready_timeout: float = 30.0) -> None:
        binary = find_cordon(cordon)
        self.dir = tempfile.mkdtemp(prefix="cordon-sdk.")
        socket_path = os.path.join(self.dir, "serve.sock")
        # stderr goes to a file: nobody drains a pipe while the server runs.
        self._stderr = open(os.path.join(self.dir, "serve.err"), "w+b")
        try:
            self.proc = subprocess.Popen([binary, "serve", "--socket", socket_path],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=self._stderr, close_fds=True)
        except OSError as e:
            self._cleanup()
            raise CordonError(f"cannot start {binary} serve: {e}") from None
        try:
            self.url = self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, bound: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + bound
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CordonError(f"cordon serve printed no ready line within {bound:g} s")
                if not sel.select(left):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    self.proc.wait()
                    raise CordonError(f"cordon serve exited {self.proc.returncode} before it "
                                      f"was ready: {self._stderr_text()}")
                buf += chunk
        line = buf.split(b"\n", 1)[0].decode("utf-8", "replace")
        if not line.startswith(READY_PREFIX):
            raise CordonError(f"cordon serve printed an unexpected line: {line!r}")
        return line[len(READY_PREFIX):]

    def _stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read(4096).decode("utf-8", "replace").strip()

    def stop(self, bound: float = 10.0) -> None:
        """Stop the server (it removes its socket on SIGTERM) and remove the directory.
        Idempotent."""
        proc = getattr(self, "proc", None)
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(bound)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        self._cleanup()

    def _cleanup(self) -> None:
        if not self._stderr.closed:
            self._stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
