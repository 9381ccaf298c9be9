"""Durable sourcing consumers (nats-server 2.14, ADR-60) through the modules, against real servers: a hub stream
sources a site's stream through a durable consumer made on the site, which keeps its place between the hub's
setups; on Debian's 2.9.10 both options are refused before anything is sent, naming the option and the version."""

import time

from conftest import Server, jetstream, publish
from test_nsc_exports import wait_for

CONSUMER = dict(stream="tele", name="hub-copy", deliver_subject="src.tele.hub", ack_policy="flow_control",
                max_ack_pending=1000)
SOURCE = {"name": "tele", "domain": "leaf", "consumer": {"name": "hub-copy", "deliver_subject": "src.tele.hub"}}


def held(url, domain, stream):
    with jetstream(url, domain) as js:
        return js.call("STREAM.INFO.%s" % stream)["state"]["messages"]


def test_a_hub_stream_sources_a_site_through_its_durable_consumer(hub_and_leaf, module):
    env = hub_and_leaf
    with jetstream(env["leaf"]) as js:
        js.call("STREAM.CREATE.tele", {"name": "tele", "subjects": ["tele.>"], "storage": "file"})
    consumer = module("jetstream_consumer", dict(CONSUMER, servers=[env["hub"]], domain="leaf"))
    stream = module("jetstream_stream", dict(servers=[env["hub"]], domain="hub", name="agg", sources=[SOURCE]))
    if env["version"].startswith("2.9."):
        assert consumer.get("failed") and "ack_policy: flow_control needs nats-server 2.14 or newer" in consumer["msg"]
        assert stream.get("failed") and "sources.consumer needs nats-server 2.14 or later" in stream["msg"], stream
        with jetstream(env["hub"], "hub") as js:
            assert "agg" not in (js.call("STREAM.NAMES").get("streams") or [])
        return
    assert consumer["changed"] and not consumer.get("failed"), consumer
    assert consumer["consumer"]["config"]["ack_policy"] == "flow_control"
    assert stream["changed"] and not stream.get("failed"), stream

    publish(env["leaf"], "tele.site.temp", 50)
    wait_for(lambda: held(env["hub"], "hub", "agg") == 50, 30)
    with jetstream(env["leaf"]) as js:
        info = js.call("CONSUMER.INFO.tele.hub-copy")
    assert info["delivered"]["stream_seq"] == 50, info
    # the acks come with flow control: the site's consumer knows what the hub holds
    wait_for(lambda: _ack_floor(env["leaf"]) == 50, 30)

    # declared again: nothing to do, and the server reports the source as it was declared
    again = [module("jetstream_consumer", dict(CONSUMER, servers=[env["hub"]], domain="leaf")),
             module("jetstream_stream", dict(servers=[env["hub"]], domain="hub", name="agg", sources=[SOURCE]))]
    assert [result["changed"] for result in again] == [False, False], again
    assert again[1]["stream"]["config"]["sources"][0]["consumer"] == SOURCE["consumer"]

    # the hub goes down while the site writes; when it is back it resets the same consumer where the copy stands:
    # nothing copied twice, nothing left out, and no consumer made in its place
    hub = env["hub_server"]
    hub.stop()
    publish(env["leaf"], "tele.site.temp", 25)
    restarted = Server(env["binary"], hub.log.name[:-len(".log")], hub.http_port)
    try:
        restarted.wait(lambda: restarted.get("healthz")["status"] == "ok")
        wait_for(lambda: held(env["hub"], "hub", "agg") >= 75, 150)
        time.sleep(2)
        assert held(env["hub"], "hub", "agg") == 75
        with jetstream(env["leaf"]) as js:
            after = js.call("CONSUMER.INFO.tele.hub-copy")
            names = js.call("CONSUMER.NAMES.tele").get("consumers")
        assert after["created"] == info["created"] and names == ["hub-copy"], (after, names)
        wait_for(lambda: _ack_floor(env["leaf"]) == 75, 30)
    finally:
        restarted.stop()


def _ack_floor(url):
    with jetstream(url) as js:
        return js.call("CONSUMER.INFO.tele.hub-copy")["ack_floor"]["stream_seq"]
