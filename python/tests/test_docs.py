"""Every Python snippet of docs/python.md runs, in order, as one script; the example scripts run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def snippets(path: str) -> list[str]:
    with open(os.path.join(ROOT, path)) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_python_md_snippets(tmp_path, monkeypatch):
    blocks = snippets("docs/python.md")
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    env: dict = {}
    for block in blocks:
        exec(compile(block, "docs/python.md", "exec"), env)


@pytest.mark.parametrize("script", ["python/examples/quickstart.py"])
def test_examples_run(script):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
