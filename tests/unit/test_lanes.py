"""tests/lanes.sh, which runs make test's lanes side by side: every lane's log is shown, the exit status is a
failure if any lane failed, and the output ends with the summary and the lines that say what failed (a CI log
keeps only the end)."""
import pathlib
import re
import subprocess

LANES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "lanes.sh"

MAKEFILE = """\
slow:
\t@sleep 1; echo slow lane output
broken:
\t@echo "FAILED tests/integration/test_x.py::test_y - AssertionError: boom"; echo "1 failed, 3 passed in 2.00s"; exit 1
quick:
\t@echo quick lane output
"""


def run(tmp_path, *lanes):
    (tmp_path / "Makefile").write_text(MAKEFILE)
    return subprocess.run(
        ["bash", str(LANES), *lanes], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "LANE_LOGS": str(tmp_path / "logs")}, check=False)


def test_all_lanes_pass(tmp_path):
    result = run(tmp_path, "slow", "quick")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "slow lane output" in result.stdout and "quick lane output" in result.stdout
    # the order the lanes were named in, each with its time in whole seconds (slow sleeps 1 s: at least that)
    last = result.stdout.rstrip().splitlines()[-2:]
    assert re.fullmatch(r"lane slow: passed in [1-9]\d* s", last[0]) and re.fullmatch(
        r"lane quick: passed in \d+ s", last[1]), last


def test_a_failed_lane_fails_the_run_and_is_named_at_the_end(tmp_path):
    result = run(tmp_path, "slow", "broken", "quick")
    assert result.returncode != 0
    assert "slow lane output" in result.stdout and "quick lane output" in result.stdout
    tail = result.stdout.rstrip().splitlines()[-3:]
    assert tail[0] == "----- what failed in lane broken -----"
    assert tail[1] == "FAILED tests/integration/test_x.py::test_y - AssertionError: boom"
    assert tail[2] == "1 failed, 3 passed in 2.00s"
    assert any(line.startswith("lane broken: FAILED") for line in result.stdout.splitlines())
    assert (tmp_path / "logs" / "broken.log").read_text().startswith("FAILED tests/integration")
