"""jetstream-aggregate --show: the aggregates of an output directory summed up per site and metric."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyspark_jetstream import job, telemetry


def window(site, metric, start, count, total, low, high, size, lag_sum, lag_max):
    return dict(site=site, metric=metric, window_start=start, count=count, sum=total, min=low, max=high,
                avg=total / count, bytes=size, lag_sum=lag_sum, lag_min=0.0, lag_max=lag_max,
                lag_avg=lag_sum / count, first_seq=1, last_seq=count)


@pytest.fixture
def output(tmp_path):
    rows = [window("spoke-1", "temp", 0, 2, 10.0, 4.0, 6.0, 100, 1.0, 0.75),
            window("spoke-1", "temp", 60, 3, 6.0, -1.0, 5.0, 150, 3.0, 2.0),
            window("spoke-2", "humidity", 0, 1, 50.0, 50.0, 50.0, 40, 0.5, 0.5)]
    folder = tmp_path / "aggregates" / "date=2026-11-23"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), str(folder / "part-0.parquet"))
    (tmp_path / "_state.json").write_text(json.dumps({"batch": 4, "totals": {"messages": 7, "rejected": 1}}))
    return str(tmp_path)


def test_windows_are_summed_per_site_and_metric(output):
    rows, state = telemetry.report(output)
    assert [(r["site"], r["metric"]) for r in rows] == [("spoke-1", "temp"), ("spoke-2", "humidity")]
    first = rows[0]
    assert (first["windows"], first["count"], first["min"], first["max"], first["bytes"]) == (2, 5, -1.0, 6.0, 250)
    assert first["avg"] == pytest.approx(16.0 / 5) and first["lag_avg_s"] == pytest.approx(4.0 / 5)
    assert first["lag_max_s"] == 2.0 and state["totals"]["messages"] == 7


def test_the_table_has_a_line_per_site_and_metric_and_the_totals(output, capsys):
    assert job.main(["--show", output]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(telemetry.REPORT_COLUMNS)
    assert lines[1].split() == ["spoke-1", "temp", "2", "5", "-1.00", "6.00", "3.20", "250", "0.80", "2.00"]
    assert lines[2].split()[:4] == ["spoke-2", "humidity", "1", "1"]
    assert lines[3] == "messages 7, rejected 1 (kept in rejects/), after micro-batch 4"


def test_an_output_without_runs_says_so(tmp_path):
    lines = telemetry.format_report(*telemetry.report(str(tmp_path))).splitlines()
    assert lines[0].split() == list(telemetry.REPORT_COLUMNS) and lines[1:] == ["no output yet"]


def test_a_job_that_read_nothing_yet_says_it_runs_and_its_first_batch_counts_in_full(tmp_path):
    out = str(tmp_path / "out")
    assert telemetry.mark_started(out, "q1")
    assert not telemetry.mark_started(out, "q1")  # never replaces a state
    assert telemetry.format_report(*telemetry.report(out)).splitlines()[1:] == [
        "messages 0: the job runs and has read nothing yet"]
    telemetry.update_state(out, "q1", 0, {"messages": 5, "rejected": 1, "valid": 4, "last_seq": 5,
                                          "streams": {"t": 5}})
    state = json.load(open(tmp_path / "out" / "_state.json"))
    assert state["batch"] == 0 and state["totals"] == {"messages": 5, "rejected": 1, "valid": 4, "last_seq": 5,
                                                       "streams": {"t": 5}}
    assert not telemetry.mark_started(out, "q1")
    assert json.load(open(tmp_path / "out" / "_state.json")) == state
    # each stream's last sequence read is kept, also of a stream a later batch did not read
    telemetry.update_state(out, "q1", 1, {"messages": 2, "rejected": 0, "valid": 2, "last_seq": 3,
                                          "streams": {"u": 3}})
    assert json.load(open(tmp_path / "out" / "_state.json"))["totals"]["streams"] == {"t": 5, "u": 3}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["_state.json"]


def test_the_demos_telemetry_is_stamped_when_published_so_its_lag_is_the_pipelines():
    """lab/spark-aggregates publishes with spread=0: every valid message carries the publish time, so the lag the
    job reports is the real time to the hub stream; the default back-dates up to 299 s (several windows)."""
    from pyspark_jetstream import reference

    def stamps(**kwargs):
        out = []
        for _subject, payload in reference.sample(400, now=1000.0, **kwargs):
            try:
                out.append(json.loads(payload)["timestamp"])
            except (ValueError, KeyError):
                pass  # the invalid ones
        return out

    assert set(stamps(spread=0)) == {1000.0}
    spread = stamps()
    assert min(spread) == 1000.0 - 299 and max(spread) == 1000.0
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "lab", "spark-aggregates")) as handle:
        assert "spread=0" in handle.read()
