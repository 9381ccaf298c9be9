"""A durable aggregate (nats_fleet_aggregates with durable) through the fleet's own stages, on a hub of three
clustered servers (JetStream domain ``hub``) and a site (domain ``leaf``) joined to every one of them as a leaf node:
the site's streams stage makes the consumer the R3 regional stream reads the site through, a second run changes
nothing (nor does one limited to the hub or to the site), and while the site publishes with acks the regional
stream's leader moves three times. The hub then holds every acknowledged message once, the site still has the one
consumer it made (the new leaders reset it rather than making another), and its ack floor is what the hub holds. An
aggregate without durable, under the same load and leader changes, is the reference: it too holds every message
once."""

import threading
import time

import pytest
import yaml

from conftest import _js_conf, free_port, jetstream
from test_fleet_objects import run_stages, stage_vars
from test_nsc_exports import wait_for

AGGREGATES = [{"name": "tele", "origin": "tele-{site}", "regions": {"north": ["leaf"]}, "durable": True,
               "stream": {"replicas": 3}},
              {"name": "logs", "origin": "logs-{site}", "regions": {"north": ["leaf"]}, "stream": {"replicas": 3}}]
CONSUMER = "tele-north-hub"
MESSAGES = 3000


@pytest.fixture
def hub_cluster_and_leaf(nats_binary, start_server, tmp_path):
    binary, version = nats_binary
    if tuple(int(part) for part in version.split(".")[:2]) < (2, 14):
        pytest.skip("durable sourcing consumers need nats-server 2.14; the modules' refusal on older servers is "
                    "test_durable_sourcing's")
    hub = [dict(client=free_port(), http=free_port(), cluster=free_port(), leaf=free_port()) for _number in range(3)]
    servers = [start_server(binary, _js_conf("hub-%d" % (n + 1), ports["client"], ports["http"],
                                             tmp_path / ("hub-%d-js" % (n + 1)), "hub", leaf_listen=ports["leaf"],
                                             cluster=(ports["cluster"], [p["cluster"] for p in hub])),
                            "hub-%d" % (n + 1), ports["http"])
               for n, ports in enumerate(hub)]
    leaf = dict(client=free_port(), http=free_port())
    leaf_server = start_server(binary, _js_conf("leaf-1", leaf["client"], leaf["http"], tmp_path / "leaf-js", "leaf",
                                                remote=[p["leaf"] for p in hub]), "leaf-1", leaf["http"])
    for server in servers + [leaf_server]:
        server.wait(lambda server=server: server.get("healthz")["status"] == "ok", 60)
    leaf_server.wait(lambda: leaf_server.get("leafz")["leafnodes"] == 1)
    yield {"hub": ["nats://127.0.0.1:%d" % p["client"] for p in hub], "leaf": "nats://127.0.0.1:%d" % leaf["client"]}


def _inventory(env, tmp_path):
    hosts = {"all": {"vars": stage_vars(tmp_path), "children": {"nats_servers": {"children": {
        "hub": {"hosts": dict(("hub-%d" % (n + 1), {"nats_server_jetstream_domain": "hub", "nats_client_url": url})
                              for n, url in enumerate(env["hub"])),
                "vars": {"nats_fleet_aggregates": AGGREGATES}},
        "spokes": {"hosts": {"leaf-1": {"nats_server_jetstream_domain": "leaf", "nats_client_url": env["leaf"]}},
                   "vars": {"nats_streams": [{"name": "tele-leaf", "subjects": ["tele.leaf.>"]},
                                             {"name": "logs-leaf", "subjects": ["logs.leaf.>"]}]}}}}}}}
    path = tmp_path / "edge-fleet" / "hosts.yml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(hosts))
    return str(path)


def _publish(url, subjects, count, acked):
    """Publish ``count`` messages on each subject, about 200 a second, counting the acknowledged ones."""
    import json

    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient

    with NatsClient({"servers": [url], "timeout": 5.0}) as client:
        for number in range(count):
            for subject in subjects:
                if "seq" in json.loads(client.request(subject, b"reading %d" % number).decode()):
                    acked[subject] += 1
            time.sleep(0.005)


def _held(env, stream):
    with jetstream(env["hub"][0], "hub") as js:
        return js.call("STREAM.INFO.%s" % stream)["state"]["messages"]


def _leader(env, stream):
    with jetstream(env["hub"][0], "hub") as js:
        return js.call("STREAM.INFO.%s" % stream)["cluster"].get("leader")


def test_a_durable_region_keeps_its_site_consumer_through_leader_changes(hub_cluster_and_leaf, tmp_path):
    env = hub_cluster_and_leaf
    inventory = _inventory(env, tmp_path)
    proc, recap = run_stages(inventory)
    assert proc.returncode == 0, proc.stdout[-4000:]
    with jetstream(env["leaf"]) as js:
        made = js.call("CONSUMER.INFO.tele-leaf.%s" % CONSUMER)
        assert js.call("CONSUMER.NAMES.tele-leaf")["consumers"] == [CONSUMER]
    assert made["config"]["ack_policy"] == "flow_control"
    assert made["config"]["deliver_subject"] == "_nats_edge.src.hub.tele-north.leaf"
    with jetstream(env["hub"][0], "hub") as js:
        region = js.call("STREAM.INFO.tele-north")["config"]
    assert region["num_replicas"] == 3
    assert region["sources"][0]["consumer"] == {"name": CONSUMER, "deliver_subject": "_nats_edge.src.hub.tele-north.leaf"}

    proc, recap = run_stages(inventory)
    assert proc.returncode == 0 and sum(host["changed"] for host in recap.values()) == 0, proc.stdout[-4000:]
    # a run limited to the hub, or to the site, plans the same: the regions match their sites among the inventory's
    # domains, not the run's (the hub alone would find no site for its regions)
    for limit, hosts in (("hub", {"hub-1", "hub-2", "hub-3"}), ("leaf-1", {"leaf-1"})):
        proc, recap = run_stages(inventory, "--limit", limit)
        assert proc.returncode == 0 and set(recap) == hosts, (limit, proc.stdout[-4000:])
        assert sum(host["changed"] for host in recap.values()) == 0, (limit, proc.stdout[-4000:])

    wait_for(lambda: _leader(env, "tele-north"), 30)
    acked = {"tele.leaf.temp": 0, "logs.leaf.line": 0}
    writer = threading.Thread(target=_publish, args=(env["leaf"], sorted(acked), MESSAGES, acked), daemon=True)
    writer.start()
    leaders = [_leader(env, "tele-north")]
    for _turn in range(3):
        time.sleep(3)
        with jetstream(env["hub"][0], "hub") as js:
            js.call("STREAM.LEADER.STEPDOWN.tele-north")
            js.call("STREAM.LEADER.STEPDOWN.logs-north")
        wait_for(lambda: _leader(env, "tele-north") not in (None, "", leaders[-1]), 30)
        leaders.append(_leader(env, "tele-north"))
    writer.join(300)
    assert not writer.is_alive() and acked == {"tele.leaf.temp": MESSAGES, "logs.leaf.line": MESSAGES}, acked
    assert len(leaders) == 4 and all(a != b for a, b in zip(leaders, leaders[1:])), leaders

    for stream in ("tele-north", "logs-north"):
        wait_for(lambda stream=stream: _held(env, stream) >= MESSAGES, 120)
    time.sleep(2)
    # every acknowledged message once, in both
    assert (_held(env, "tele-north"), _held(env, "logs-north")) == (MESSAGES, MESSAGES)
    with jetstream(env["leaf"]) as js:
        after = js.call("CONSUMER.INFO.tele-leaf.%s" % CONSUMER)
        names = js.call("CONSUMER.NAMES.tele-leaf")["consumers"]
    # the same consumer, made once by the stage: each new leader reset it where the copy stood
    assert names == [CONSUMER] and after["created"] == made["created"], (names, after)
    wait_for(lambda: _ack_floor(env) == MESSAGES, 30)


def _ack_floor(env):
    with jetstream(env["leaf"]) as js:
        return js.call("CONSUMER.INFO.tele-leaf.%s" % CONSUMER)["ack_floor"]["stream_seq"]
