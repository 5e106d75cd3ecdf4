"""fastgen/cli/options.py's write_output: the file an option names (--json, --out, --timings) is written whole or not at
all, by the commands themselves in real processes whose writes really fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from _support import ROOT
from fastgen.cli.options import write_output
from fastgen.errors import OutputError

CUT = 64  # bytes a process may write into one file once its document is serialised: less than any document below

# fastgen as a user runs it, but the moment the command has serialised its JSON document (json.dumps with indent=1),
# RLIMIT_FSIZE makes any write past CUT bytes fail with EFBIG (Python ignores SIGXFSZ): a disk that fills while the
# document is written. Not from the start: analyze spills the read sessions into a temporary file first.
CUT_AFTER_SERIALISING = f"""
import json, resource, sys
dumps = json.dumps
def dumps_then_cut(*args, **kwargs):
    text = dumps(*args, **kwargs)
    if kwargs.get("indent") == 1:
        resource.setrlimit(resource.RLIMIT_FSIZE, ({CUT}, {CUT}))
    return text
json.dumps = dumps_then_cut
from fastgen.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _fastgen(*args: str, cut: bool) -> subprocess.CompletedProcess:
    start = ["-c", CUT_AFTER_SERIALISING] if cut else ["-m", "fastgen"]
    return subprocess.run([sys.executable, *start, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)


COMMANDS = {
    "workload stats": lambda traces: ["workload", "stats", str(traces)],
    "analyze": lambda traces: ["analyze", str(traces), "--only", "scenario1/c1"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_json_write_that_fails_leaves_the_old_file_and_no_partial_one(small_dataset, tmp_path, command):
    out = tmp_path / "figures.json"
    out.write_bytes(b'{"old": true}\n')
    args = [*COMMANDS[command](small_dataset / "traces"), "--json", str(out)]
    failed = _fastgen(*args, cut=True)
    assert failed.returncode == 1
    assert failed.stderr == f"fastgen: error: cannot write {out}: File too large; choose another --json\n"
    assert out.read_bytes() == b'{"old": true}\n'  # written in place, the first CUT bytes would be here
    assert os.listdir(tmp_path) == ["figures.json"]  # and no temporary file beside it
    whole = _fastgen(*args, cut=False)  # the same command, free to write: the document is longer than CUT
    assert whole.returncode == 0, whole.stderr
    assert len(out.read_bytes()) > CUT and json.loads(out.read_bytes()) != {"old": True}


def test_write_output_into_a_missing_folder_is_one_line_naming_the_option(tmp_path):
    with pytest.raises(
        OutputError, match=r"^cannot write .*t\.json: No such file or directory; choose another --timings$"
    ):
        write_output(tmp_path / "missing" / "t.json", b"{}", "--timings")
    assert os.listdir(tmp_path) == []


def test_write_output_replaces_the_file_whole(tmp_path):
    target = tmp_path / "stats.json"
    target.write_text("old, and longer than the new text")
    write_output(target, "{}\n", "--json")
    assert target.read_text() == "{}\n" and os.listdir(tmp_path) == ["stats.json"]
