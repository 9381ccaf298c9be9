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
    assert state["totals"] == {"messages": 400, "rejected": 30, "valid": 370, "last_seq": 400,
                               "streams": {"telemetry": 400}}
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
    assert summaries[-1]["through"] == {"telemetry": 600} and summaries[-1]["stream"] == "telemetry"


def test_the_job_reads_regional_streams_side_by_side(spark, hub, tmp_path):
    """What the regions hold, read side by side, aggregates to what their total holds."""
    publish(hub, telemetry_messages(300))
    wait_for(lambda: js_call(hub, "STREAM.INFO.telemetry")["state"]["messages"] == 300)
    lasts = {site: js_call(hub, "STREAM.INFO.%s" % site)["state"]["last_seq"] for site in ("spoke-1", "spoke-2")}
    assert sum(lasts.values()) == 300 and all(lasts.values())
    config = config_for(hub, tmp_path, source=dict(servers=[hub], stream=["spoke-1", "spoke-2"], partitions=2))
    assert config["source_options"]["stream"] == "spoke-1,spoke-2"
    job.run(config, spark=spark)
    want, rejects = reference.compute(hub_messages(hub), WINDOW)
    got = {(r["site"], r["metric"], int(r["window_start"].timestamp()) * 1000000): r
           for r in telemetry.read_aggregates(config["output"]).to_pylist()}
    assert set(got) == set(want)
    for key, row in want.items():
        for name in ("count", "bytes", "min", "max"):
            assert got[key][name] == row[name], (key, name)
        assert math.isclose(got[key]["sum"], row["sum"], rel_tol=1e-9, abs_tol=1e-6), key
    totals = json.load(open(os.path.join(config["output"], "_state.json")))["totals"]
    assert totals["messages"] == 300 and totals["streams"] == lasts
    rejected = telemetry.read_rejects(config["output"]).to_pylist()
    assert len(rejected) == len(rejects) and all(r["subject"].startswith("telemetry.%s." % r["stream"])
                                                 for r in rejected)


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


# -- --check-config: every key the run uses, with the run's own rules -------------------------------------------

GOOD = {"source": {"stream": "telemetry"}, "output": "/o", "checkpoint": "/c"}


def check(tmp_path, capsys, text):
    """(exit code, what --check-config printed on stderr) of a configuration file's text."""
    path = tmp_path / "job.yml"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    code = job.main(["--check-config", str(path)])
    return code, " ".join(capsys.readouterr().err.replace(str(path), "job.yml").split())


def with_key(section, key, value):
    """The good configuration with ``key`` (of ``section``, or at the top) set to ``value``."""
    data = json.loads(json.dumps(GOOD))
    if section:
        data.setdefault(section, {"subject": "analytics.summary"} if section == "summary" else {})[key] = value
    else:
        data[key] = value
    return json.dumps(data)


BAD_CONFIGS = [
    # (section, key, value, what the message says): each passed --check-config and failed when the job ran
    (None, "output", ["/o"], 'job.yml: output: ["/o"] is not a directory path'),
    (None, "output", {"path": "/o"}, 'job.yml: output: {"path": "/o"} is not a directory path'),
    (None, "checkpoint", True, "job.yml: checkpoint: true is not a directory path"),
    (None, "window", 0, "job.yml: window: 0 must be longer than zero"),
    (None, "window", "0.0000001s", 'job.yml: window: "0.0000001s" is out of range'),
    (None, "trigger_interval", [30], "job.yml: trigger_interval: [30] is not a duration"),
    ("summary", "subject", "analytics.*", "job.yml: summary: subject: 'analytics.*' has a wildcard (*)"),
    ("summary", "subject", "analytics.>", "job.yml: summary: subject: 'analytics.>' has a wildcard (>)"),
    ("summary", "subject", "analytics summary", "job.yml: summary: subject: 'analytics summary' is not a subject"),
    ("summary", "servers", "nats://hub:port", "job.yml: summary: servers: 'nats://hub:port' is not a NATS server URL"),
    ("summary", "max_windows", "all", 'job.yml: summary: max_windows: "all" is not a whole number from 1'),
    ("summary", "max_windows", -1, "job.yml: summary: max_windows: -1 is not a whole number from 1"),
    ("summary", "tls_verify", "maybe", 'job.yml: summary: tls_verify: "maybe" is not true or false'),
    ("summary", "tls_cert", "/c.pem", "job.yml: summary: tls_cert: TLS options take effect with a tls_ca"),
    ("summary", "token", ["t"], 'job.yml: summary: token: ["t"] is not a single value'),
    ("source", "stream", "telemetry/eu", "job.yml: source: jetstream option 'stream': 'telemetry/eu' is not a stream name"),
    ("source", "stream", ["a", {"b": 1}], 'job.yml: source: stream[1]: {"b": 1} is not a stream name'),
    ("source", "stream", ["a", "a"], "job.yml: source: jetstream option 'stream': a named twice"),
    ("source", "servers", "nats://hub:42x2", "job.yml: source: servers: 'nats://hub:42x2' is not a NATS server URL"),
    ("source", "servers", "ws://hub:8080", "job.yml: source: servers: 'ws://hub:8080' is not a NATS server URL"),
    ("source", "filter_subject", "telemetry..eu", "jetstream option 'filter_subject': 'telemetry..eu' is not a subject"),
    ("source", "domain", "hub.eu", "jetstream option 'domain': 'hub.eu' is not a JetStream domain"),
    ("source", "options", ["heartbeat=2"], 'job.yml: source: options: ["heartbeat=2"] is not a mapping'),
    ("source", "options", {"json_schema": "a string"}, "job.yml: source: options: json_schema: the job reads"),
    ("spark", "master", "local[2", 'job.yml: spark: master: "local[2" is not a Spark master URL'),
    ("spark", "conf", ["spark.executor.memory=2g"], 'job.yml: spark: conf: ["spark.executor.memory=2g"] is not a mapping'),
    (None, "summary", "analytics.summary", 'job.yml: summary: "analytics.summary" is not a mapping'),
    (None, "summary", True, "job.yml: summary: true is not a mapping"),
    (None, "spark", "local[*]", 'job.yml: spark: "local[*]" is not a mapping'),
]


def test_check_config_refuses_what_the_run_would_fail_on_naming_the_key(tmp_path, capsys):
    wrong = []
    for section, key, value, message in BAD_CONFIGS:
        code, err = check(tmp_path, capsys, with_key(section, key, value))
        if code != 2 or message not in err:
            wrong.append("%s.%s=%r: exit %s, %r" % (section, key, value, code, err))
    assert not wrong, "\n".join(wrong)


def test_check_config_never_ends_in_a_traceback(tmp_path, capsys):
    """Every key the run uses, given each kind of value YAML can give: a message naming the key (or ok)."""
    keys = [(None, key) for key in job.TOP_KEYS] + [("source", key) for key in job.SOURCE_KEYS] + [
        ("summary", key) for key in job.SUMMARY_KEYS] + [("spark", key) for key in job.SPARK_KEYS]
    values = [None, "", True, 0, -1, 1.5, "x y", "a.*", [], ["x"], [{"a": 1}], {}, {"a": [1]}, {1: 2}]
    wrong = []
    for section, key in keys:
        for value in values:
            text = with_key(section, key, value) if not isinstance(value, dict) or not any(
                isinstance(k, int) for k in value) else with_key(section, key, {"k": value})
            try:
                code, err = check(tmp_path, capsys, text)
            except Exception as exc:  # what a user would see as a traceback
                wrong.append("%s.%s=%r: %s: %s" % (section, key, value, type(exc).__name__, exc))
                continue
            if code == 2 and (key not in err and "required" not in err):
                wrong.append("%s.%s=%r: the message does not name the key: %s" % (section, key, value, err))
    for text in (b"\xff\xfe not text", "", "- a list", "source: !!python/object:os.system {}", "{1: 2}"):
        try:
            code, err = check(tmp_path, capsys, text)
            assert code == 2 and err.startswith("jetstream-aggregate: job.yml"), err
        except Exception as exc:
            wrong.append("%r: %s: %s" % (text, type(exc).__name__, exc))
    assert not wrong, "\n".join(wrong)


def test_check_config_passes_the_configurations_that_run(tmp_path, capsys):
    # the guide's example, and the file the spark_job role writes
    guide = ("source:\n  servers: [nats://hub-1:4222, nats://hub-2:4222]\n  stream: telemetry\n"
             "  creds: /etc/jetstream-aggregate/reader.creds\n  api_prefix: JS.TELEMETRY@hub.API\n"
             "  deliver_prefix: deliver.TELEMETRY.hub.ANALYTICS.default.telemetry\n  max_messages_per_trigger: 500000\n"
             "output: /var/lib/jetstream-aggregate/output\ncheckpoint: /var/lib/jetstream-aggregate/checkpoint\n"
             "mode: batch\nwindow: 1m\ntrigger_interval: 30s\nsummary: {subject: analytics.summary}\n")
    role = ("checkpoint: /var/lib/jetstream-aggregate/checkpoint\nmode: streaming\noutput: /var/lib/jetstream-aggregate/output\n"
            "source:\n  creds: /etc/jetstream-aggregate/reader.creds\n  max_messages_per_trigger: '500000'\n"
            "  options:\n    heartbeat: 2\n  servers:\n  - nats://hub-1:4222\n  starting: earliest\n  stream: telemetry\n"
            "  tls_ca: /etc/jetstream-aggregate/ca.pem\nspark:\n  app_name: jetstream-aggregate\n"
            "summary:\n  subject: analytics.summary\ntrigger_interval: 30s\nwindow: 5m\n")
    more = ("source: {stream: t, servers: 'tls://a:4222,b', start_time: 2026-01-01T00:00:00Z, filter_subject: t.*.>,"
            " tls_verify: no}\noutput: o\ncheckpoint: c\nwindow: 90\n"
            "summary: {subject: 42, servers: [nats://s:4222], user: u, password: p, tls_ca: /ca.pem, tls_verify: off,"
            " max_windows: '100'}\nspark: {master: 'local[2, 3]', app_name: 7, conf: {spark.ui.enabled: false, "
            "spark.sql.shuffle.partitions: 8}}\n")
    for text in (guide, role, more):
        code, err = check(tmp_path, capsys, text)
        assert code == 0, err
    config = job.load_config(str(tmp_path / "job.yml"))
    assert config["summary"] == {"subject": "42", "servers": "nats://s:4222", "user": "u", "password": "p",
                                 "tls_ca": "/ca.pem", "tls_verify": "false", "max_windows": 100}
    assert config["spark"] == {"master": "local[2, 3]", "app_name": "7",
                               "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8"}}
    assert config["source_options"]["servers"] == "tls://a:4222,b" and config["window"] == 90
    assert config["source_options"]["start_time"] == "2026-01-01T00:00:00+00:00"
    # the summary goes where the source reads, its default server too
    code, _err = check(tmp_path, capsys, json.dumps(dict(GOOD, summary={"subject": "s"})))
    assert code == 0 and job.load_config(str(tmp_path / "job.yml"))["source_options"]["servers"] == "nats://127.0.0.1:4222"
