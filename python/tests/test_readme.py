"""python/README.md: its worked example runs as it stands, and the package installs with pip."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "README.md")


def blocks() -> list[str]:
    with open(README) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_the_worked_example_runs(project, need_ns, capsys):
    exec(compile(blocks()[0], "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "['main.sh']"
    assert out[1] == "0 b'hello from /workspace\\n'"
    assert out[2:5] == ["stdout b'one\\n'", "stderr b'two\\n'", "exit 3"]
    assert out[5] == 'echo "$GREETING from $(pwd)"'
    assert out[6] == "no such sandbox: not_found"


def test_the_asyncio_example_runs(project, need_ns, capsys):
    exec(compile(blocks()[1], "README.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["stdout b'hi\\n'", "exit 0"]


def test_pip_install(tmp_path):
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        pytest.skip(f"{sys.executable} has no pip")
    try:
        import setuptools  # noqa: F401  - the build backend, used without build isolation
    except ImportError:
        pytest.skip("setuptools is not installed (pip would fetch it)")
    # A copy: setuptools writes build/ and *.egg-info beside the sources.
    src = tmp_path / "src"
    shutil.copytree(os.path.join(HERE, ".."), src, ignore=shutil.ignore_patterns(
        "tests", "__pycache__", "build", "*.egg-info"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index",
                    "--no-build-isolation", "--no-deps", "--target", str(target), str(src)],
                   check=True)
    code = "import cordon, cordon.aio; print(cordon.__file__, cordon.Client.__name__)"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, "
                          f"{str(target)!r}); {code}"], check=True, capture_output=True,
                         text=True).stdout
    assert out.startswith(str(target)) and out.strip().endswith("Client")
    assert (target / "cordon" / "py.typed").exists()
