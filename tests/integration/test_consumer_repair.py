"""A consumer left ahead of its stream, as a power cut leaves it (nats-server#5412), made on a real server: the
stream's message files are put back to an earlier state while the server is stopped, and its consumers keep the
ack floor they had reached. jetstream_info names such a consumer; jetstream_consumer_repair puts it right (created
again, what the stream held acknowledged) so it receives the new messages, each once; a second run changes nothing.
nats-server 2.14 and newer put an R1 consumer right by themselves as they start: there nothing is found."""

import asyncio
import json
import shutil
import time

import nats

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JS_CONSUMER_NOT_FOUND, JetStream, NatsClient, NatsClientError)

from conftest import _js_conf, free_port, run_module

RECONCILES_SINCE = (2, 14, 0)


def _version(text):
    return tuple(int(part) for part in text.split("-")[0].split(".")[:3])


def _publish(js, first, count):
    for number in range(first, first + count):
        js.client.request("t.reading", json.dumps({"n": number}).encode())


def _fetch(url, consumer, batch, ack=True, domain="spoke"):
    """The numbers of the messages ``consumer`` of TELEMETRY (in ``domain``) gives now, without waiting, each
    acknowledged (``ack``)."""
    async def run():
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=3)
        numbers = []
        try:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish("$JS.%s.API.CONSUMER.MSG.NEXT.TELEMETRY.%s" % (domain, consumer),
                             json.dumps({"batch": batch, "no_wait": True}).encode(), reply=inbox)
            while True:
                try:
                    msg = await sub.next_msg(timeout=2)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    break
                if msg.headers and msg.headers.get("Status"):
                    break
                numbers.append(json.loads(msg.data)["n"])
                if ack:
                    await nc.publish(msg.reply, b"+ACK")
            await nc.flush()
        finally:
            await nc.close()
        return numbers
    return asyncio.run(run())


def test_a_consumer_a_power_cut_left_ahead_is_found_and_put_right(nats_binary, start_server, tmp_path):
    binary, version = nats_binary
    port, http = free_port(), free_port()
    store = tmp_path / "js"
    conf = _js_conf("edge", port, http, store, "spoke")
    url = "nats://127.0.0.1:%d" % port
    task = dict(servers=[url], domain="spoke", timeout=5.0)

    def start():
        server = start_server(binary, conf, "edge", http)
        server.wait(lambda: server.get("healthz")["status"] == "ok")
        return server

    server = start()
    with NatsClient({"servers": [url], "timeout": 5.0}) as client:
        js = JetStream(client, domain="spoke")
        js.call("STREAM.CREATE.TELEMETRY", {"name": "TELEMETRY", "subjects": ["t.>"], "storage": "file"})
        js.call("CONSUMER.DURABLE.CREATE.TELEMETRY.uploader", {"stream_name": "TELEMETRY", "config": {
            "durable_name": "uploader", "ack_policy": "explicit", "deliver_policy": "all"}})
        # one that waits for a sequence far ahead on purpose: never called ahead of its stream
        js.call("CONSUMER.DURABLE.CREATE.TELEMETRY.later", {"stream_name": "TELEMETRY", "config": {
            "durable_name": "later", "ack_policy": "explicit", "deliver_policy": "by_start_sequence",
            "opt_start_seq": 1000}})
        _publish(js, 1, 10)
    server.stop()
    msgs = next(store.glob("**/streams/TELEMETRY/msgs"))
    shutil.copytree(msgs, tmp_path / "msgs-at-10")

    # the site goes on: 5 more, all 15 uploaded and acknowledged; then the cut takes the last 5 writes
    server = start()
    with NatsClient({"servers": [url], "timeout": 5.0}) as client:
        js = JetStream(client, domain="spoke")
        _publish(js, 11, 5)
        assert _fetch(url, "uploader", 20, True) == list(range(1, 16))
    server.stop()
    shutil.rmtree(msgs)
    shutil.copytree(tmp_path / "msgs-at-10", msgs)
    server = start()

    info = run_module("jetstream_info", task)
    assert not info.get("failed"), info
    state = [s for s in info["streams"] if s["name"] == "TELEMETRY"][0]
    assert state["messages"] == 10, state
    if _version(version) >= RECONCILES_SINCE:
        # the server put its R1 consumer right as it started: nothing ahead, nothing to repair
        assert info["consumers_ahead"] == [], info["consumers_ahead"]
        repair = run_module("jetstream_consumer_repair", task)
        assert not repair["changed"] and repair["repaired"] == [] and repair["actions"] == [], repair
        with NatsClient({"servers": [url], "timeout": 5.0}) as client:
            js = JetStream(client, domain="spoke")
            _publish(js, 101, 3)
            assert _fetch(url, "uploader", 20, True) == [101, 102, 103]
        return

    ahead = info["consumers_ahead"]
    assert [(r["stream"], r["consumer"], r["ack_floor"], r["last_seq"]) for r in ahead] == [
        ("TELEMETRY", "uploader", 15, 10)], ahead
    assert any("consumer 'uploader' of stream 'TELEMETRY' in domain spoke: ack floor 15" in w
               for w in info.get("warnings", [])), info.get("warnings")
    assert any("Consumers Ahead of Their Stream" in line for line in info["report"]), info["report"]
    # stuck: the consumer gives nothing
    assert _fetch(url, "uploader", 20, False) == []

    predicted = run_module("jetstream_consumer_repair", task, check_mode=True)
    assert predicted["changed"] and [(r["consumer"], r["how"]) for r in predicted["repaired"]] == [
        ("uploader", "recreate")], predicted
    assert run_module("jetstream_info", task)["consumers_ahead"] == ahead  # check mode changed nothing

    repaired = run_module("jetstream_consumer_repair", task)
    assert repaired["changed"] and repaired["repaired"][0]["how"] == "recreate", repaired
    assert repaired["repaired"][0]["acknowledged"] == 10, repaired
    if _version(version) < (2, 10, 0):  # it reports no last activity after a restart: said, as what it means
        assert any("tells no time of its last activity" in w for w in repaired.get("warnings", [])), repaired
    assert [a["subject"].split(".")[4] for a in repaired["actions"]] == ["DELETE", "DURABLE"], repaired["actions"]
    again = run_module("jetstream_consumer_repair", task)
    assert not again["changed"] and again["repaired"] == [], again
    assert run_module("jetstream_info", task)["consumers_ahead"] == []

    # the new messages reach the consumer, each once, and nothing from before the cut comes again
    with NatsClient({"servers": [url], "timeout": 5.0}) as client:
        js = JetStream(client, domain="spoke")
        _publish(js, 101, 3)
        assert _fetch(url, "uploader", 20, True) == [101, 102, 103]
        assert _fetch(url, "uploader", 20, True) == []


def _fetch_when_led(url, wanted, timeout=20):
    """What the replicated consumer gives once it gives anything (a consumer just elected answers a pull with
    nothing for a moment), until ``wanted`` is read or ``timeout`` passes: everything read, in order."""
    got, deadline = [], time.monotonic() + timeout
    while len(got) < len(wanted) and time.monotonic() < deadline:
        got += _fetch(url, "uploader", 20, True, "hub")
        time.sleep(0.2)
    return got


def test_a_replicated_consumer_left_ahead_is_reset_or_created_again(nats_binary, start_server, tmp_path):
    """Three clustered servers, the stream and its consumer R3: the servers do not put a replicated consumer right
    as they start (2.15 neither), so the repair does - with the consumer reset on 2.14+, else by creating it
    again."""
    binary, version = nats_binary
    names = ("hub-1", "hub-2", "hub-3")
    ports = dict((name, (free_port(), free_port(), free_port())) for name in names)
    routes = [route for _port, _http, route in ports.values()]
    stores = dict((name, tmp_path / name / "js") for name in names)
    urls = ["nats://127.0.0.1:%d" % ports[name][0] for name in names]
    task = dict(servers=urls, domain="hub", timeout=5.0)

    def start_all():
        servers = [start_server(binary, _js_conf(name, ports[name][0], ports[name][1], stores[name], "hub",
                                                 cluster=(ports[name][2], routes)), name, ports[name][1])
                   for name in names]
        for server in servers:  # a meta leader (healthz, not js-enabled-only)
            server.wait(lambda s=server: s.get("healthz")["status"] == "ok", timeout=60)
        servers[0].wait(led, timeout=30)  # and leaders of the stream and its consumer, once there are any
        return servers

    def led():
        with NatsClient({"servers": urls, "timeout": 2.0}) as client:
            js = JetStream(client, domain="hub")
            try:
                stream = js.lookup("STREAM.INFO.TELEMETRY")
                consumer = stream and js.lookup("CONSUMER.INFO.TELEMETRY.uploader", JS_CONSUMER_NOT_FOUND)
            except NatsClientError:
                return False
        return all((info.get("cluster") or {}).get("leader") for info in (stream, consumer) if info)

    def stop_all(servers):
        for server in servers:
            server.stop()

    servers = start_all()
    with NatsClient({"servers": urls, "timeout": 5.0}) as client:
        js = JetStream(client, domain="hub")
        js.call("STREAM.CREATE.TELEMETRY", {"name": "TELEMETRY", "subjects": ["t.>"], "storage": "file",
                                            "num_replicas": 3})
        js.call("CONSUMER.DURABLE.CREATE.TELEMETRY.uploader", {"stream_name": "TELEMETRY", "config": {
            "durable_name": "uploader", "ack_policy": "explicit", "deliver_policy": "all", "num_replicas": 3}})
        _publish(js, 1, 10)
    time.sleep(1)
    stop_all(servers)
    saved = {}
    for name in names:
        saved[name] = [(path, tmp_path / "saved" / name / str(index)) for index, path in enumerate(
            list(stores[name].glob("**/streams/TELEMETRY/msgs")) + list(stores[name].glob("**/_js_/S-*")))]
        for path, copy in saved[name]:
            shutil.copytree(path, copy)

    servers = start_all()
    with NatsClient({"servers": urls, "timeout": 5.0}) as client:
        _publish(JetStream(client, domain="hub"), 11, 5)
    assert _fetch_when_led(urls[0], list(range(1, 16))) == list(range(1, 16))
    time.sleep(1)
    stop_all(servers)
    for name in names:
        for path, copy in saved[name]:
            shutil.rmtree(path)
            shutil.copytree(copy, path)
    start_all()

    info = run_module("jetstream_info", task)
    assert not info.get("failed"), info
    ahead = info["consumers_ahead"]
    assert [(r["consumer"], r["ack_floor"], r["last_seq"], r["replicas"]) for r in ahead] == [
        ("uploader", 15, 10, 3)], (ahead, [s for s in info["streams"] if s["name"] == "TELEMETRY"])
    repaired = run_module("jetstream_consumer_repair", task)
    way = "reset" if _version(version) >= RECONCILES_SINCE else "recreate"
    assert repaired["changed"] and [(r["consumer"], r["how"]) for r in repaired["repaired"]] == [
        ("uploader", way)], repaired
    assert not run_module("jetstream_consumer_repair", task)["changed"]
    with NatsClient({"servers": urls, "timeout": 5.0}) as client:
        _publish(JetStream(client, domain="hub"), 101, 3)
    assert _fetch_when_led(urls[0], [101, 102, 103]) == [101, 102, 103]
    assert _fetch(urls[0], "uploader", 20, True, "hub") == []
