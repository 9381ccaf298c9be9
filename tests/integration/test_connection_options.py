"""The connection options every JetStream module takes, against a real server: ``inbox_prefix`` for a user who may
only subscribe below its own prefix (with the default _INBOX its requests get no reply), ``connection_name`` as the
server sees it (its trace of the CONNECT), and a prefix that cannot be one refused before anything is sent."""

import re

from conftest import free_port, run_module


def conf(tmp_path, port, http):
    return "\n".join([
        'server_name: "s"', 'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http,
        'jetstream { store_dir: "%s" }' % (tmp_path / "js"),
        'trace: true', 'logfile: "%s"' % (tmp_path / "server.log"),
        # the automation's user may subscribe only below its own reply prefix
        'authorization { users: [ { user: ops, password: secret, permissions: {'
        ' publish: ">", subscribe: "_INBOX_ops.>" } } ] }']) + "\n"


def test_inbox_prefix_and_connection_name(nats_binary, start_server, tmp_path):
    binary, _version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, conf(tmp_path, port, http), "s", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    task = dict(servers=["nats://127.0.0.1:%d" % port], user="ops", password="secret", timeout=2.0,
                name="ORDERS", subjects=["orders.>"])

    denied = run_module("jetstream_stream", task)
    assert denied.get("failed"), denied  # its replies would come on _INBOX.>, which it may not subscribe to

    made = run_module("jetstream_stream", dict(task, inbox_prefix="_INBOX_ops", connection_name="fleet-ci"))
    assert made.get("changed") and not made.get("failed"), made
    again = run_module("jetstream_stream", dict(task, inbox_prefix="_INBOX_ops"))
    assert not again.get("changed") and not again.get("failed"), again
    log = (tmp_path / "server.log").read_text()
    names = re.findall(r'"name": ?"([^"]*)", "no_responders"', log)  # each CONNECT the server traced
    assert "fleet-ci" in names and "ansible nats_edge.fleet" in names, names

    for bad in ("_INBOX.*", "a..b", "with space", "trailing."):
        refused = run_module("jetstream_stream", dict(task, name="OTHER", subjects=["other"], inbox_prefix=bad))
        assert refused.get("failed") and "inbox_prefix: %r is not a subject prefix" % bad in refused["msg"], refused
    assert '"OTHER"' not in (tmp_path / "server.log").read_text()  # refused before anything was sent
