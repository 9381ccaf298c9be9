"""The jetstream data source with local Spark against real servers: batch
reads with gaps and a subject filter, streaming from a checkpoint (exactly
the new messages), the origin header of sourced messages, and reading with
creds + TLS + another account's API (share_stream exports), and a domain."""

import json
import os
import subprocess

import pytest

from conftest import _js_conf, free_port, operator_mode_conf, spark_missing
from test_nsc_exports import build_store, wait_for

try:
    from pyspark_jetstream._jetstream import JetStream
    from pyspark_jetstream._nats import Connection
    from pyspark_jetstream._reader import RangeReader, ack_fields
except ImportError as missing:
    pytest.skip(spark_missing(missing), allow_module_level=True)


@pytest.fixture
def js_server(nats_binary, start_server, tmp_path):
    """One JetStream server (domain hub); yields its URL."""
    binary, _version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, _js_conf("n1", port, http, tmp_path / "js", "hub"), "n1", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    return "nats://127.0.0.1:%d" % port


def js_call(url, suffix, payload=None, **connect):
    with Connection([url], **connect) as conn:
        return JetStream(conn).call(suffix, payload)


def publish(url, messages, **connect):
    with Connection([url], **connect) as conn:
        return conn.publish_acked(messages)


def read(spark, url, stream, **options):
    reader = spark.read.format("jetstream").option("servers", url)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(stream)


def no_consumers_left(url, stream, **connect):
    wait_for(lambda: js_call(url, "STREAM.INFO.%s" % stream, **connect)["state"]["consumer_count"] == 0, 20)


def test_batch_read_skips_deleted_messages_and_filters_subjects(spark, js_server):
    js_call(js_server, "STREAM.CREATE.t", {"name": "t", "subjects": ["t.>"], "storage": "file"})
    publish(js_server, (("t.a" if n % 2 else "t.b", b"m%d" % n) for n in range(1, 301)))
    for seq in (3, 4, 151, 299):
        js_call(js_server, "STREAM.MSG.DELETE.t", {"seq": seq})

    rows = read(spark, js_server, "t", partitions=3).orderBy("seq").collect()
    assert [r.seq for r in rows] == [s for s in range(1, 301) if s not in (3, 4, 151, 299)]
    assert all(r.data == b"m%d" % r.seq and r.headers == {} and r.timestamp is not None for r in rows)

    odd = read(spark, js_server, "t", partitions=4, filter_subject="t.a").collect()
    assert sorted(r.seq for r in odd) == [s for s in range(1, 301, 2) if s not in (3, 151, 299)]
    assert {r.subject for r in odd} == {"t.a"}

    ranged = read(spark, js_server, "t", start_seq=100, end_seq=160, partitions=2).collect()
    assert sorted(r.seq for r in ranged) == [s for s in range(100, 161) if s != 151]
    no_consumers_left(js_server, "t")

    # registered by hand works too, as does a JSON payload parsed into typed columns
    from pyspark_jetstream import JetStreamDataSource
    spark.dataSource.register(JetStreamDataSource)
    js_call(js_server, "STREAM.CREATE.j", {"name": "j", "subjects": ["j"], "storage": "memory"})
    publish(js_server, [("j", b'{"v": 1.5, "n": "a"}'), ("j", b'{"v": "x"}')])
    parsed = read(spark, js_server, "j", json_schema="v double, n string").orderBy("seq").collect()
    assert parsed[0].json.v == 1.5 and parsed[0].json.n == "a" and parsed[0].json_error is None
    assert parsed[1].json is None and parsed[1].json_error == "field 'v': expected double, got the string 'x'"


def test_streaming_restarts_from_the_checkpoint_with_exactly_the_new_messages(spark, js_server, tmp_path):
    js_call(js_server, "STREAM.CREATE.s", {"name": "s", "subjects": ["s.>"], "storage": "file"})
    publish(js_server, (("s.x", b"%d" % n) for n in range(1, 251)))
    js_call(js_server, "STREAM.MSG.DELETE.s", {"seq": 10})
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run(**options):
        reader = spark.readStream.format("jetstream").option("servers", js_server).option("partitions", "2")
        for key, value in options.items():
            reader = reader.option(key, str(value))
        query = (reader.load("s").select("seq", "subject", "data").writeStream.format("parquet")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(out))
        query.awaitTermination(120)
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    assert run(max_messages_per_trigger=100) == [99, 100, 50]  # 10 is gone
    publish(js_server, (("s.x", b"%d" % n) for n in range(251, 301)))
    js_call(js_server, "STREAM.MSG.DELETE.s", {"seq": 260})
    assert run() == [49]
    seqs = sorted(r.seq for r in spark.read.parquet(out).collect())
    assert seqs == [s for s in range(1, 301) if s not in (10, 260)]
    assert run() == []
    # the checkpoint belongs to its stream
    with pytest.raises(Exception, match="checkpoint holds offsets of stream 's'"):
        reader = spark.readStream.format("jetstream").option("servers", js_server).load("t2")
        js_call(js_server, "STREAM.CREATE.t2", {"name": "t2", "subjects": ["t2"], "storage": "memory"})
        reader.writeStream.format("parquet").option("checkpointLocation", checkpoint).trigger(
            availableNow=True).start(out + "2").awaitTermination(60)
    no_consumers_left(js_server, "s")


def test_regional_streams_are_read_side_by_side(spark, js_server, tmp_path):
    """Several streams in one read: a stream column, each stream's range split on its own, offsets per stream,
    the limit per trigger shared, a stream added to the query read from its start, one taken out no longer read."""
    for name in ("north", "south", "east"):
        js_call(js_server, "STREAM.CREATE.%s" % name, {"name": name, "subjects": [name + ".>"], "storage": "file"})
    publish(js_server, (("north.s%d" % (n % 3), b"n%d" % n) for n in range(1, 121)))
    publish(js_server, (("south.s9", b"s%d" % n) for n in range(1, 31)))
    js_call(js_server, "STREAM.MSG.DELETE.north", {"seq": 7})

    rows = read(spark, js_server, "north,south", partitions=2).collect()
    assert sorted((r.stream, r.seq) for r in rows) == sorted(
        [("north", s) for s in range(1, 121) if s != 7] + [("south", s) for s in range(1, 31)])
    assert all(r.data == (b"n%d" if r.stream == "north" else b"s%d") % r.seq for r in rows)
    with pytest.raises(Exception, match="'start_seq': a sequence belongs to one stream"):
        read(spark, js_server, "north,south", start_seq=3).collect()

    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run(streams, **options):
        reader = spark.readStream.format("jetstream").option("servers", js_server)
        for key, value in options.items():
            reader = reader.option(key, str(value))
        query = (reader.load(streams).select("stream", "seq").writeStream.format("parquet")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(out))
        query.awaitTermination(120)
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    # 60 a trigger: south's 30 and 30 of north, then north alone
    assert run("north,south", max_messages_per_trigger=60) == [59, 60, 30]
    offsets = sorted((n for n in os.listdir(os.path.join(checkpoint, "offsets")) if n.isdigit()), key=int)
    with open(os.path.join(checkpoint, "offsets", offsets[-1])) as handle:
        assert json.loads(handle.read().splitlines()[-1]) == {"streams": {"north": 121, "south": 31}}
    publish(js_server, (("north.s1", b"n%d" % n) for n in range(121, 131)))
    publish(js_server, (("east.s5", b"e%d" % n) for n in range(1, 6)))
    # east joins: the first batch records where it starts (its first message), the next reads it
    assert run("north,south,east") == [10, 5]
    publish(js_server, (("south.s9", b"s%d" % n) for n in range(31, 41)))
    assert run("north,east") == []  # south is no longer read
    stored = sorted((r.stream, r.seq) for r in spark.read.parquet(out).collect())
    assert stored == sorted([("north", s) for s in range(1, 131) if s != 7] + [("south", s) for s in range(1, 31)]
                            + [("east", s) for s in range(1, 6)])
    for name in ("north", "south", "east"):
        no_consumers_left(js_server, name)


def test_sourced_messages_carry_their_origin_header(spark, js_server):
    js_call(js_server, "STREAM.CREATE.edge", {"name": "edge", "subjects": ["edge.>"], "storage": "file"})
    js_call(js_server, "STREAM.CREATE.agg", {"name": "agg", "storage": "file", "sources": [{"name": "edge"}]})
    publish(js_server, (("edge.s1", b"%d" % n) for n in range(20)))
    wait_for(lambda: js_call(js_server, "STREAM.INFO.agg")["state"]["messages"] == 20)
    rows = read(spark, js_server, "agg").orderBy("seq").collect()
    assert [r.subject for r in rows] == ["edge.s1"] * 20
    assert all(r.headers["Nats-Stream-Source"].startswith("edge ") for r in rows), rows[0].headers


def test_the_reader_stops_at_its_range_while_the_stream_changes(js_server):
    js_call(js_server, "STREAM.CREATE.c", {"name": "c", "subjects": ["c"], "storage": "file"})
    publish(js_server, (("c", b"%d" % n) for n in range(200)))
    seen = []
    with Connection([js_server]) as conn:
        reader = RangeReader(conn, "$JS.API", "c", 1, 200, batch_rows=10)
        for number, chunk in enumerate(reader.batches()):
            seen += [ack_fields(r)[0] for r in chunk.replies]
            if number == 0:
                # meanwhile: messages deleted ahead of the reader, more appended past the range
                for seq in (150, 151, 200):
                    js_call(js_server, "STREAM.MSG.DELETE.c", {"seq": seq})
                publish(js_server, (("c", b"late") for _n in range(30)))
    # what was already on its way may still arrive; nothing else deleted, nothing past the range
    assert seen == sorted(set(seen)) and seen[:10] == list(range(1, 11)) and max(seen) <= 200
    assert set(range(1, 200)) - {150, 151} <= set(seen)


def make_certs(folder):
    """A CA and a server certificate for 127.0.0.1, with openssl."""
    def openssl(*args):
        subprocess.run(("openssl",) + args, check=True, capture_output=True, cwd=folder)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
            "-keyout", "ca-key.pem", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server-key.pem",
            "-out", "server.csr")
    with open(os.path.join(folder, "ext.cnf"), "w") as handle:
        handle.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
            "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")
    return {name: os.path.join(folder, name + ".pem") for name in ("ca", "server", "server-key")}


def test_another_account_reads_over_tls_with_creds_through_shared_exports(spark, nats_binary, start_server,
                                                                          module, tmp_path):
    binary, _version = nats_binary
    base, operator, creds = build_store(module, tmp_path, ("TELEMETRY", "ANALYTICS"))
    certs = make_certs(str(tmp_path))
    port, http = free_port(), free_port()
    conf = operator_mode_conf(tmp_path, operator, port, http, domain="hub")
    conf += 'tls { cert_file: "%s", key_file: "%s" }\n' % (certs["server"], certs["server-key"])
    server = start_server(binary, conf, "op", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "tls://127.0.0.1:%d" % port
    push = dict(push=True, servers=[url], timeout=3.0, expected_servers=1, tls_ca=certs["ca"])
    for name in ("TELEMETRY", "ANALYTICS"):
        pushed = module("nsc_account", dict(base, name=name, signing_key=True, push=True, servers=[url],
                                            tls_ca=certs["ca"], timeout=3.0, expected_servers=1,
                                            jetstream=dict(disk_storage="64MiB", mem_storage="8MiB", streams=10,
                                                           consumers=20)))
        assert not pushed.get("failed") and pushed["unconfirmed"] == [], pushed
    shared = module("nsc_export", dict(base, share_stream=dict(stream="telemetry", from_account="TELEMETRY",
                                                               from_domain="hub", to_account="ANALYTICS"), **push))
    assert shared["changed"] and shared["unconfirmed"] == [], shared
    owner = dict(creds=creds["TELEMETRY"], tls={"ca": certs["ca"]})
    js_call(url, "STREAM.CREATE.telemetry", {"name": "telemetry", "subjects": ["telemetry.>"], "storage": "file"},
            **owner)
    publish(url, (("telemetry.s%d" % (n % 3), b"%d" % n) for n in range(500)), **owner)
    js_call(url, "STREAM.MSG.DELETE.telemetry", {"seq": 7}, **owner)

    options = dict(creds=creds["ANALYTICS"], tls_ca=certs["ca"], api_prefix=shared["external"]["api"],
                   deliver_prefix=shared["external"]["deliver"], partitions=3)
    rows = read(spark, url, "telemetry", **options).collect()
    assert sorted(r.seq for r in rows) == [s for s in range(1, 501) if s != 7]
    filtered = read(spark, url, "telemetry", filter_subject="telemetry.s1", **options).collect()
    assert sorted(r.seq for r in filtered) == [n + 1 for n in range(500) if n % 3 == 1]
    # the readers' ephemeral consumers go by themselves (deletion is not exported)
    no_consumers_left(url, "telemetry", **owner)

    # without the deliver prefix the account cannot receive the deliveries; without TLS no connection
    with pytest.raises(Exception, match="nothing arrives on _INBOX"):
        read(spark, url, "telemetry", **{**options, "deliver_prefix": "_INBOX", "timeout": 3}).collect()
    with pytest.raises(Exception, match="cannot connect|TLS|certificate"):
        read(spark, url, "telemetry", **{**options, "tls_ca": "", "tls_verify": "true", "timeout": 3}).collect()


def test_a_stream_in_another_domain_is_read_through_a_leaf(spark, hub_and_leaf):
    hub = hub_and_leaf["hub"]
    js_call(hub, "STREAM.CREATE.remote", {"name": "remote", "subjects": ["remote"], "storage": "file"})
    publish(hub, (("remote", b"%d" % n) for n in range(50)))
    rows = read(spark, hub_and_leaf["leaf"], "remote", domain="hub", partitions=2).collect()
    assert sorted(r.seq for r in rows) == list(range(1, 51))
    with pytest.raises(Exception, match="no JetStream answers"):
        read(spark, hub_and_leaf["leaf"], "remote", domain="nowhere", timeout=2).collect()


def test_json_schema_columns(spark, js_server):
    js_call(js_server, "STREAM.CREATE.k", {"name": "k", "subjects": ["k"], "storage": "memory"})
    publish(js_server, [("k", json.dumps({"ts": "2026-11-23T10:00:00Z", "n": 3}).encode())])
    row = read(spark, js_server, "k", json_schema="ts timestamp, n long").collect()[0]
    assert row.json.n == 3 and row.json.ts.isoformat().startswith("2026-11-23T10:00:00")
