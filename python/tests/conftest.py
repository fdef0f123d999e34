"""Fixtures of the SDK's tests: a fresh project and key directory per test (so the install key,
tokens and sessions are the test's own), servers over a unix socket and over TCP on
127.0.0.1 with an ephemeral port, and the tokens `cordon token create` makes. $CORDON is the
binary under test; ns sessions need root and a host where the ns backend is available."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import cordon  # noqa: E402

CORDON = os.environ.get("CORDON", "")


def pytest_collection_modifyitems(config, items):
    if not CORDON or not os.access(CORDON, os.X_OK):
        skip = pytest.mark.skip(reason="$CORDON does not name the cordon binary under test")
        for item in items:
            item.add_marker(skip)


def run_cordon(*args: str, check: bool = True) -> str:
    return subprocess.run([CORDON, *args], check=check, capture_output=True, text=True).stdout


@pytest.fixture
def project(tmp_path, monkeypatch):
    proj = tmp_path / "project"
    keys = tmp_path / "keys"
    proj.mkdir()
    keys.mkdir(mode=0o700)
    monkeypatch.setenv("CORDON_PROJECT", str(proj))
    monkeypatch.setenv("CORDON_KEY_DIR", str(keys))
    monkeypatch.chdir(proj)
    yield proj
    # Sessions a failed test left behind would outlive the directory.
    sessions = proj / ".cordon" / "sessions"
    if sessions.is_dir():
        for sid in os.listdir(sessions):
            run_cordon("session", "destroy", sid, check=False)


_ns_checked: list[str] = []


def ns_unavailable_reason() -> str:
    if not _ns_checked:
        reason = ""
        if os.geteuid() != 0:
            reason = "ns sessions need root here"
        else:
            out = subprocess.run([CORDON, "backends", "--json"], capture_output=True, text=True)
            if '"ns"' not in out.stdout:
                reason = "no ns backend"
            elif subprocess.run([CORDON, "run", "--backend", "ns", "--", "true"],
                                capture_output=True).returncode != 0:
                reason = "the ns backend cannot run a command on this host"
        _ns_checked.append(reason)
    return _ns_checked[0]


@pytest.fixture
def need_ns(project):
    reason = ns_unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def client(project):
    """A client of a private server (Client(None)) in the test's project."""
    with cordon.Client() as c:
        yield c


class TcpServer:
    def __init__(self, project):
        self.token_file = project / "admin.token"
        self.err = open(project / "serve.err", "w+")
        self.proc = subprocess.Popen([CORDON, "serve", "--listen", "127.0.0.1:0",
                                      "--token-file", str(self.token_file)],
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.proc.stdout.readline()  # the ready line (the server's start is bounded)
        prefix = "cordon serve: listening on "
        if not line.startswith(prefix):
            self.stop()
            self.err.seek(0)
            raise RuntimeError(f"cordon serve did not start: {line!r} {self.err.read()}")
        self.url = line[len(prefix):].strip()
        self.admin_token = self.token_file.read_text().strip()

    def token(self, scope: str, *extra: str) -> str:
        return run_cordon("token", "create", "--scope", scope, *extra).strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.err.close()


@pytest.fixture
def tcp_server(project):
    server = TcpServer(project)
    yield server
    server.stop()


def wait_until(predicate, bound: float = 30.0, step: float = 0.1) -> bool:
    """Poll ``predicate`` until it holds or ``bound`` seconds pass (generous: loaded hosts)."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
