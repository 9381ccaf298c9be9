"""jetstream-aggregate with local Spark against a real server: edge streams
sourced into a hub stream, valid and invalid telemetry, the output against
the plain-Python reference, runs that add exactly the new messages, the
summary on NATS, and a configuration refused before anything runs."""

import json
import math
import os
import threading

import pytest

from conftest import SERVERS, spark_missing

try:
    from test_spark_source import js_call, publish, wait_for
    from pyspark_jetstream import job, reference, telemetry
    from pyspark_jetstream._nats import Connection
except ImportError as missing:
    pytest.skip(spark_missing(missing), allow_module_level=True)

WINDOW = 60


@pytest.fixture
def hub(start_server, tmp_path):
    from conftest import _js_conf, free_port

    port, http = free_port(), free_port()
    server = start_server(SERVERS["pypi"], _js_conf("hub", port, http, tmp_path / "js", "hub"), "hub", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    for site in ("spoke-1", "spoke-2"):
        js_call(url, "STREAM.CREATE.%s" % site, {"name": site, "subjects": ["telemetry.%s.>" % site],
                                                 "storage": "file"})
    js_call(url, "STREAM.CREATE.telemetry", {"name": "telemetry", "storage": "file",
                                             "sources": [{"name": "spoke-1"}, {"name": "spoke-2"}]})
    return url


def telemetry_messages(count, start=0):
    return reference.sample(count, start)


def hub_messages(url):
    with Connection([url]) as conn:
        return reference.stream_messages(conn, "telemetry")


def check_against_reference(url, output):
    rows, rejects = reference.compute(hub_messages(url), WINDOW)
    got = {(r["site"], r["metric"], int(r["window_start"].timestamp()) * 1000000): r
           for r in telemetry.read_aggregates(output).to_pylist()}
    assert set(got) == set(rows)
    for key, want in rows.items():
        assert got[key]["count"] == want["count"] and got[key]["bytes"] == want["bytes"], key
        for name in ("sum", "min", "max", "avg", "lag_min", "lag_max", "lag_avg"):
            assert math.isclose(got[key][name], want[name], rel_tol=1e-9, abs_tol=1e-6), (key, name)
    return rows, rejects


def config_for(url, tmp_path, **extra):
    data = dict(source=dict(servers=[url], stream="telemetry", partitions=2), output=str(tmp_path / "out"),
                checkpoint=str(tmp_path / "checkpoint"), window="1m", spark=dict(master="local[2]"))
    data.update(extra)
    path = tmp_path / "job.yml"
    path.write_text(json.dumps(data))
    return job.load_config(str(path))


def test_the_job_aggregates_what_the_edges_sourced_into_the_hub(spark, hub, tmp_path):
    publish(hub, telemetry_messages(400))
    wait_for(lambda: js_call(hub, "STREAM.INFO.telemetry")["state"]["messages"] == 400)
    config = config_for(hub, tmp_path, summary=dict(subject="analytics.summary"))
    summaries = []

    def listen():
        with Connection([hub]) as conn:
            conn.subscribe("analytics.summary")
            conn.flush()
            ready.set()
            try:
                while True:
                    summaries.append(json.loads(conn.next_frame(timeout=60).payload))
                    if summaries[-1]["totals"]["messages"] >= 600:
                        return
            except Exception:
                return
    ready = threading.Event()
    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    ready.wait(5)

    job.run(config, spark=spark)
    rows, rejects = check_against_reference(hub, config["output"])
    state = json.load(open(os.path.join(config["output"], "_state.json")))
    assert state["totals"] == {"messages": 400, "rejected": 30, "valid": 370, "last_seq": 400}
    assert len(rejects) == 30
    rejected = telemetry.read_rejects(config["output"]).to_pylist()
    assert sorted(r["seq"] for r in rejected) == sorted(seq for seq, _subject in rejects)
    reasons = {r["reason"] for r in rejected}
    assert reasons == {"field 'value': expected double, got the string 'hot'", "missing field 'timestamp'"} | {
        r["reason"] for r in rejected if r["reason"].startswith("not JSON")}
    assert all(r["subject"].startswith("telemetry.spoke-") for r in rejected)
    # the lag is measured from edge time to arrival in the hub
    assert all(0 <= r["lag_min"] and r["lag_max"] < 400 for r in rows.values())

    # nothing new: nothing changes; new messages: exactly those are added
    before = sorted(os.listdir(os.path.join(config["output"], "aggregates")))
    job.run(config, spark=spark)
    assert json.load(open(os.path.join(config["output"], "_state.json")))["totals"]["messages"] == 400
    publish(hub, telemetry_messages(200, start=400))
    wait_for(lambda: js_call(hub, "STREAM.INFO.telemetry")["state"]["messages"] == 600)
    job.run(config, spark=spark)
    check_against_reference(hub, config["output"])
    assert json.load(open(os.path.join(config["output"], "_state.json")))["totals"]["messages"] == 600
    assert sorted(os.listdir(os.path.join(config["output"], "aggregates"))) == before

    listener.join(30)
    assert [s["messages"] for s in summaries] == [400, 200], summaries
    assert summaries[0]["rejected"] == 30 and summaries[0]["windows"] and summaries[-1]["through_seq"] == 600


def test_a_run_on_an_empty_stream_leaves_a_state_that_says_so(spark, hub, tmp_path):
    # what a deployment waits for, also before the edges have sent anything
    config = config_for(hub, tmp_path)
    job.run(config, spark=spark)
    state = json.load(open(os.path.join(config["output"], "_state.json")))
    assert state["batch"] == -1 and state["totals"]["messages"] == 0
    publish(hub, telemetry_messages(20))
    wait_for(lambda: js_call(hub, "STREAM.INFO.telemetry")["state"]["messages"] == 20)
    job.run(config, spark=spark)
    state = json.load(open(os.path.join(config["output"], "_state.json")))
    assert state["batch"] >= 0 and state["totals"]["messages"] == 20


def test_a_replayed_micro_batch_counts_once(tmp_path):
    import pyarrow as pa

    partial = pa.table({"site": ["s"], "metric": ["m"], "window_start": pa.array([0], pa.timestamp("us", tz="UTC")),
                        "count": [2], "sum": [3.0], "min": [1.0], "max": [2.0], "bytes": [10], "lag_sum": [1.0],
                        "lag_min": [0.5], "lag_max": [0.5], "first_seq": [1], "last_seq": [2]})
    out = str(tmp_path)
    telemetry.apply_aggregates(out, partial, WINDOW, "q1", 0)
    telemetry.apply_aggregates(out, partial, WINDOW, "q1", 1)
    telemetry.apply_aggregates(out, partial, WINDOW, "q1", 1)  # Spark replays batch 1 after a failure
    row = telemetry.read_aggregates(out).to_pylist()[0]
    assert row["count"] == 4 and row["avg"] == 1.5 and row["bytes"] == 20
    with pytest.raises(ValueError, match="written by streaming query q1"):
        telemetry.apply_aggregates(out, partial, WINDOW, "q2", 0)


def test_a_bad_configuration_is_refused_with_its_key(tmp_path, capsys):
    path = tmp_path / "job.yml"
    for text, message in [
        ("source: {stream: t}\noutput: /o\n", "'checkpoint' is required"),
        ("source: {stream: t, partitons: 2}\noutput: /o\ncheckpoint: /c\n", "source: unknown key(s) partitons"),
        ("source: {stream: t, partitions: 0}\noutput: /o\ncheckpoint: /c\n", "'partitions': must be at least 1"),
        ("source: {stream: t}\noutput: /o\ncheckpoint: /c\nmode: sometimes\n", "mode must be batch or streaming"),
        ("source: {stream: t}\noutput: /o\ncheckpoint: /c\nwindow: soon\n", "window: 'soon' is not a duration"),
        ("source: {stream: t}\noutput: /o\ncheckpoint: /c\nsummary: {servers: [x]}\n", "summary needs a subject"),
        ("[1, 2", "is not YAML or JSON"),
    ]:
        path.write_text(text)
        assert job.main(["--check-config", str(path)]) == 2
        assert message in capsys.readouterr().err, text
    path.write_text("source: {stream: t, servers: [nats://a:4222, nats://b:4222], tls_verify: false}\n"
                    "output: /o\ncheckpoint: /c\n")
    assert job.main(["--check-config", str(path)]) == 0
    config = job.load_config(str(path))
    assert config["source_options"]["servers"] == "nats://a:4222,nats://b:4222"
    assert config["source_options"]["tls_verify"] == "false" and config["mode"] == "batch"
