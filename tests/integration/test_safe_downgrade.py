"""The rollout's check before a server moves to an older release, against a real server: nats-server 2.11 and
newer stamp a stream or consumer that uses a newer feature with the JetStream API level it needs
(``_nats.req.level``), and an older release loads it offline. ``ansible-playbook nats_edge.fleet.rollout`` reads
every asset's level from the server's /jsz before any server is rolled and stops, naming the account, stream and
consumer and the release each needs, where the target is too old.

The runs go no further than the plan (``--tags nats_rollout_plan``), so the host (this machine) is never rolled."""

import sys

from conftest import _js_conf, free_port, jetstream
from test_rollout_knobs import rollout

PLAN_ONLY = ["--tags", "nats_rollout_plan"]


def plan(tmp_path, http, extra_vars):
    """(return code, the message of the failure, names of the tasks that ran) of the rollout's plan."""
    host = dict(ansible_connection="local", ansible_python_interpreter=sys.executable,
                nats_server_jetstream_domain="site1", nats_server_http_host="127.0.0.1", nats_server_http_port=http,
                nats_fleet_operator_mode=False, nats_fleet_tls="own")
    inventory = {"all": {"children": {"nats_servers": {"children": {"edges": {"hosts": {"edge-1": host}}}}}}}
    rc, tasks, failures = rollout(tmp_path, extra_vars, PLAN_ONLY, inventory)
    return rc, failures.get("edge-1", ""), [name for name, _hosts in tasks]


def test_a_downgrade_that_would_put_assets_offline_is_refused(nats_binary, start_server, tmp_path):
    binary, version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, _js_conf("s", port, http, tmp_path / "js", "site1"), "s", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    newer = not version.startswith("2.9.")
    with jetstream(url) as js:
        js.call("STREAM.CREATE.PLAIN", {"name": "PLAIN", "subjects": ["plain.>"], "storage": "file"})
        js.call("CONSUMER.CREATE.PLAIN.reader", {"stream_name": "PLAIN",
                                                 "config": {"durable_name": "reader", "ack_policy": "explicit"}})
        if newer:  # atomic batches: 2.12 (level 2); fast batches: 2.14 (level 4)
            js.call("STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"], "storage": "file",
                                             "allow_atomic": True, "allow_batched": True})
            js.call("CONSUMER.CREATE.ORDERS.billing", {
                "stream_name": "ORDERS", "config": {"durable_name": "billing", "ack_policy": "explicit",
                                                    "priority_groups": ["jobs"], "priority_policy": "prioritized"}})

    if newer:
        # to 2.12.8 (level 3): ORDERS needs 2.14.0; its consumer (prioritized, level 2) and PLAIN pass
        rc, failure, ran = plan(tmp_path, http, {"nats_server_version": "2.12.8"})
        assert rc != 0 and failure.startswith("rollout: edge-1: nats-server 2.12.8 runs JetStream API level 3"), failure
        assert "account $G stream ORDERS needs JetStream API level 4 (nats-server 2.14.0 or newer)" in failure, failure
        assert "PLAIN" not in failure and "billing" not in failure, failure
        assert "roll it to nats-server 2.14.0 or newer" in failure and "No server was rolled" in failure, failure
        assert "Report the plan" not in ran, ran
        # to 2.10.22 (no levels): the consumer's priority group (level 1) too
        rc, failure, _ran = plan(tmp_path, http, {"nats_server_version": "2.10.22"})
        assert rc != 0 and "stream ORDERS consumer billing needs JetStream API level 1 (nats-server 2.11.0" in failure
        # a release that runs them all, and the explicit opt-out, pass
        for extra in ({"nats_server_version": "2.14.0"},
                      {"nats_server_version": "2.12.8", "nats_rollout_downgrade_check": False}):
            rc, failure, ran = plan(tmp_path, http, extra)
            assert rc == 0 and not failure and "Report the plan" in ran, (extra, failure)
        with jetstream(url) as js:
            js.call("STREAM.DELETE.ORDERS")
    # assets that need no level: any older release may run them
    rc, failure, ran = plan(tmp_path, http, {"nats_server_version": "2.9.0"})
    assert rc == 0 and not failure and "Report the plan" in ran, failure

    # a server that does not answer: what it runs and holds cannot be read, so the move is refused
    server.stop()
    rc, failure, _ran = plan(tmp_path, http, {"nats_server_version": "2.9.0"})
    assert rc != 0 and "edge-1: its server did not answer /varz" in failure, failure
    assert "nats_rollout_downgrade_check: false" in failure, failure
    rc, failure, _ran = plan(tmp_path, http, {"nats_server_version": "2.9.0", "nats_rollout_downgrade_check": False})
    assert rc == 0, failure
