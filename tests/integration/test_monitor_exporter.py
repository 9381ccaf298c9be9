"""The fleet exporter (monitoring/, nats_edge_monitor) against real servers: an operator-mode hub (JetStream domain
hub, client port on TLS) and a leaf site (domain spoke-1) whose leaf links bind the system account and TEST, so the
collector at the hub sees the leaf server through the system account alone."""

import asyncio
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT, free_port
from pki import CA

try:
    from nats_edge_monitor import metrics as monitor_metrics
    from nats_edge_monitor._config import check_config
except ImportError as missing:  # the package lives in .venv only (make venv installs it)
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(ROOT, ".venv")):
        raise
    pytestmark = pytest.mark.skip(reason="nats-edge-monitor is not installed in this virtualenv (%s): it runs in "
                                         ".venv (make integration)" % missing)

HUB, EDGE = "hub-1", "spoke1-1"
EXPORTER = os.path.join(os.path.dirname(sys.executable), "nats-edge-monitor-exporter")


def _older_than_2_10(version):
    return tuple(int(part) for part in version.split(".")[:2]) < (2, 10)


def _server_conf(tmp_path, name, domain, port, http, operator, preload, tls=None, leaf_listen=None, remotes=()):
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    lines = ['server_name: "%s"' % name, 'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http,
             'jetstream { store_dir: "%s", domain: "%s", max_memory_store: 67108864, max_file_store: 268435456 }'
             % (folder / "js", domain),
             'operator: "%s"' % operator["operator_jwt_path"], 'system_account: "%s"' % operator["system_account_id"],
             "resolver: MEMORY",
             "resolver_preload: { %s }" % ", ".join('%s: "%s"' % item for item in sorted(preload.items()))]
    if tls:
        lines.append('tls { cert_file: "%s", key_file: "%s" }' % tls)
    if leaf_listen:
        lines.append('leafnodes { listen: "127.0.0.1:%d" }' % leaf_listen)
    if remotes:
        lines.append("leafnodes { reconnect: 1, remotes: [ %s ] }" % ", ".join(
            '{ urls: ["nats-leaf://127.0.0.1:%d"], account: "%s", credentials: "%s" }' % remote for remote in remotes))
    return "\n".join(lines) + "\n"


async def _js_setup(url, creds, ca, steps):
    import nats

    options = dict(user_credentials=creds, allow_reconnect=False, connect_timeout=5)
    if ca:
        options["tls"] = ssl.create_default_context(cafile=ca)
    nc = await nats.connect(url, **options)
    try:
        return await steps(nc)
    finally:
        await nc.close()


def _run(coroutine):
    return asyncio.run(coroutine)


async def _api(nc, subject, body):
    reply = json.loads((await nc.request(subject, json.dumps(body).encode(), timeout=5)).data.decode())
    assert "error" not in reply, (subject, reply)
    return reply


async def _publish(nc, subject, count):
    for number in range(count):
        ack = json.loads((await nc.request(subject, b"message %d" % number, timeout=5)).data.decode())
        assert "seq" in ack, ack


async def _edge_streams(nc):
    await _api(nc, "$JS.API.STREAM.CREATE.readings", {
        "name": "readings", "subjects": ["readings.>"], "storage": "file", "num_replicas": 1,
        "metadata": {monitor_metrics.MSG_AGE_METADATA: "soon"}})
    await _publish(nc, "readings.t1", 5)


async def _hub_streams(nc):
    await _api(nc, "$JS.API.STREAM.CREATE.orders", {
        "name": "orders", "subjects": ["orders.>"], "storage": "file", "num_replicas": 1, "max_msgs": 100,
        "metadata": {monitor_metrics.MSG_AGE_METADATA: "5m"}})
    await _publish(nc, "orders.new", 10)
    await _api(nc, "$JS.API.CONSUMER.DURABLE.CREATE.orders.worker", {
        "stream_name": "orders", "config": {"durable_name": "worker", "ack_policy": "explicit"}})
    await _api(nc, "$JS.API.STREAM.CREATE.agg", {
        "name": "agg", "storage": "file", "num_replicas": 1,
        "sources": [{"name": "readings", "external": {"api": "$JS.spoke-1.API"}}]})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = await _api(nc, "$JS.API.STREAM.INFO.agg", {})
        if info["state"]["messages"] == 5:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("agg never sourced the 5 readings: %r" % info)


@pytest.fixture
def fleet(nats_binary, start_server, module, tmp_path):
    """hub-1 (site hub) and spoke1-1 (site spoke-1), linked for SYS and TEST; streams on both; an exporter
    config for the collector at the hub."""
    binary, version = nats_binary
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = module("nsc_operator", dict(base))
    account = module("nsc_account", dict(base, name="TEST", jetstream={}))
    app = module("nsc_user", dict(base, account="TEST", name="app"))
    leaf_user = module("nsc_user", dict(base, account="TEST", name="leaf", expires_in="30d"))
    for result in (operator, account, app, leaf_user):
        assert not result.get("failed"), result
    preload = {operator["system_account_id"]: operator["system_account_jwt"], account["account_id"]: account["jwt"]}
    (tmp_path / "pki").mkdir()
    ca = CA(tmp_path / "pki")
    hub_cert = ca.issue("hub-1", usages=("server",))
    ports = dict(hub=free_port(), hub_http=free_port(), leaf=free_port(), edge=free_port(), edge_http=free_port())
    hub = start_server(binary, _server_conf(tmp_path, HUB, "hub", ports["hub"], ports["hub_http"], operator, preload,
                                            tls=hub_cert, leaf_listen=ports["leaf"]), HUB, ports["hub_http"])
    edge_conf = _server_conf(tmp_path, EDGE, "spoke-1", ports["edge"], ports["edge_http"], operator, preload,
                             remotes=[(ports["leaf"], operator["system_account_id"], operator["sys_creds"]),
                                      (ports["leaf"], account["account_id"], leaf_user["creds_file"])])
    edge = start_server(binary, edge_conf, EDGE, ports["edge_http"])
    hub.wait(lambda: len(hub.get("leafz").get("leafs") or []) == 2, 30)
    edge.wait(lambda: edge.get("healthz")["status"] == "ok")
    hub.wait(lambda: hub.get("healthz")["status"] == "ok")
    hub_url, edge_url = "tls://127.0.0.1:%d" % ports["hub"], "nats://127.0.0.1:%d" % ports["edge"]
    config = {
        "listen": {"address": "127.0.0.1", "port": free_port(), "plaintext": True},
        "nats": {"servers": [hub_url], "creds": operator["sys_creds"], "ca": ca.path, "timeout": 1.0},
        "servers": [{"server": HUB, "site": "hub"}, {"server": EDGE, "site": "spoke-1"}],
        "collector_site": "hub",
        "leaf_links": [{"server": EDGE, "site": "spoke-1", "account": "TEST"},
                       {"server": EDGE, "site": "spoke-1", "account": "SYS"}],
        "accounts": {account["account_id"]: "TEST", operator["system_account_id"]: "SYS"},
        "certificates": [{"server": HUB, "site": "hub", "not_after": time.time() + 86400 * 300}],
        "creds": [{"account": "TEST", "user": "leaf", "site": "spoke-1", "expires": time.time() + 86400 * 30}],
        "thresholds": {"hub/TEST/orders": {"max_age_seconds": 999}, "hub/TEST/agg": {"max_age_seconds": 60},
                       "spoke-1/TEST/readings": {"max_age_seconds": 600}},
        "drift_file": str(tmp_path / "drift.prom"),
    }
    _run(_js_setup(edge_url, app["creds_file"], None, _edge_streams))
    _run(_js_setup(hub_url, app["creds_file"], ca.path, _hub_streams))
    return dict(version=version, binary=binary, ca=ca, hub=hub, edge=edge, edge_conf=edge_conf, hub_url=hub_url,
                edge_url=edge_url, app_creds=app["creds_file"], config=config, tmp_path=tmp_path,
                account=account["account_id"], start_server=start_server, ports=ports)


class Scrape(object):
    """The samples of one exposition (Prometheus text, parsed back)."""

    def __init__(self, text):
        from prometheus_client.parser import text_string_to_metric_families

        self.text = text
        self.samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]

    def find(self, name, **labels):
        return [sample for sample in self.samples
                if sample.name == name and all(sample.labels.get(key) == value for key, value in labels.items())]

    def value(self, name, **labels):
        found = self.find(name, **labels)
        assert len(found) == 1, "%s%r: %d samples\n%s" % (name, labels, len(found), self.text)
        return found[0].value

    def names(self, **labels):
        return set(sample.name for sample in self.samples
                   if all(sample.labels.get(key) == value for key, value in labels.items()))


class InProcess(object):
    """The exporter's registry in this process: one collector (one connection) across scrapes."""

    def __init__(self, config):
        from prometheus_client import generate_latest
        from nats_edge_monitor.exporter import build

        self.generate_latest = generate_latest
        self.registry, self.collector = build(check_config(config))

    def scrape(self):
        return Scrape(self.generate_latest(self.registry).decode())

    def until(self, predicate, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            scrape = self.scrape()
            if predicate(scrape) or time.monotonic() > deadline:
                return scrape
            time.sleep(0.2)


SERVER_SERIES = {"nats_server_up", "nats_server_info", "nats_server_memory_bytes", "nats_server_cpu_percent",
                 "nats_server_connections", "nats_server_slow_consumers_total", "nats_server_healthy",
                 "nats_jetstream_storage_used_bytes", "nats_jetstream_storage_limit_bytes",
                 "nats_jetstream_storage_reserved_bytes", "nats_jetstream_memory_used_bytes"}


def _assert_fleet(scrape, version):
    assert scrape.value("nats_fleet_collector_connected") == 1
    assert scrape.value("nats_fleet_servers_answered") == 2
    assert 0 < scrape.value("nats_fleet_scrape_duration_seconds") < 1.0  # every server answered: no timeout
    for server, site in ((HUB, "hub"), (EDGE, "spoke-1")):
        assert SERVER_SERIES <= scrape.names(server=server, site=site), (server, scrape.text)
        assert scrape.value("nats_server_up", server=server, site=site) == 1
        assert scrape.value("nats_server_info", server=server, site=site, version=version) == 1
        assert scrape.value("nats_server_healthy", server=server, site=site) == 1
        assert scrape.value("nats_server_memory_bytes", server=server) > 1e6
        assert scrape.value("nats_server_slow_consumers_total", server=server) == 0
        assert scrape.value("nats_jetstream_storage_limit_bytes", server=server) == 268435456
        assert scrape.value("nats_jetstream_storage_used_bytes", server=server) > 0
        assert scrape.value("nats_jetstream_memory_used_bytes", server=server) == 0
    assert scrape.value("nats_server_connections", server=HUB) >= 1  # the collector itself
    for account in ("TEST", "SYS"):
        assert scrape.value("nats_leaf_link_up", site="spoke-1", server=EDGE, account=account) == 1
        assert 0 <= scrape.value("nats_leaf_link_rtt_seconds", site="spoke-1", server=EDGE, account=account) < 1
    orders = dict(site="hub", server=HUB, account="TEST", stream="orders")
    assert scrape.value("nats_stream_messages", **orders) == 10
    assert scrape.value("nats_stream_limit_ratio", limit="messages", **orders) == pytest.approx(0.1)
    assert scrape.find("nats_stream_limit_ratio", limit="bytes", **orders) == []  # max_bytes unset
    assert 0 <= scrape.value("nats_stream_newest_message_age_seconds", **orders) < 120
    assert scrape.value("nats_consumer_pending_messages", consumer="worker", **orders) == 10
    assert scrape.value("nats_consumer_ack_pending_messages", consumer="worker", **orders) == 0
    assert scrape.value("nats_consumer_redelivered_messages", consumer="worker", **orders) == 0
    agg = dict(site="hub", server=HUB, account="TEST", stream="agg")
    source = dict(agg, source="readings", source_site="spoke-1", kind="source")
    assert scrape.value("nats_stream_messages", **agg) == 5
    assert scrape.value("nats_stream_source_lag_messages", **source) == 0
    assert 0 <= scrape.value("nats_stream_source_active_seconds", **source) < 60
    assert scrape.value("nats_stream_newest_age_threshold_seconds", **agg) == 60  # from the config's thresholds
    readings = dict(site="spoke-1", server=EDGE, account="TEST", stream="readings")
    assert scrape.value("nats_stream_messages", **readings) == 5
    assert scrape.find("nats_stream_limit_ratio", **readings) == []
    error_field = "metadata." + monitor_metrics.MSG_AGE_METADATA
    if _older_than_2_10(version):
        # 2.9 keeps no stream metadata: the config's thresholds are all there is
        assert scrape.value("nats_stream_newest_age_threshold_seconds", **orders) == 999
        assert scrape.value("nats_stream_newest_age_threshold_seconds", **readings) == 600
        assert scrape.find("nats_fleet_config_errors") == []
    else:
        # metadata wins over the config; metadata that is no duration leaves the series out and says so
        assert scrape.value("nats_stream_newest_age_threshold_seconds", **orders) == 300
        assert scrape.find("nats_stream_newest_age_threshold_seconds", **readings) == []
        assert scrape.value("nats_fleet_config_errors", field=error_field, **readings) == 1
    assert 299 * 86400 < scrape.value("nats_fleet_certificate_expiry_seconds", site="hub", server=HUB) <= 300 * 86400
    assert 29 * 86400 < scrape.value("nats_fleet_creds_expiry_seconds", site="spoke-1", account="TEST",
                                     user="leaf") <= 30 * 86400


def test_the_whole_fleet_through_the_system_account_at_the_hub(fleet):
    exporter = InProcess(fleet["config"])
    try:
        scrape = exporter.scrape()
        _assert_fleet(scrape, fleet["version"])

        # the drift file: absent, no drift series; malformed, an error series; well formed, re-exported
        assert scrape.find("nats_fleet_drift_hosts") == [] and scrape.value("nats_fleet_drift_file_error") == 0
        drift = fleet["tmp_path"] / "drift.prom"
        drift.write_text("nats_fleet_drift_hosts{stage=\"servers\"} 1\nnats_fleet_drift_changes{stage=\"servers\"")
        scrape = exporter.scrape()
        assert scrape.value("nats_fleet_drift_file_error") == 1 and scrape.find("nats_fleet_drift_hosts") == []
        assert scrape.value("nats_fleet_collector_connected") == 1
        drift.write_text("# TYPE nats_fleet_drift_hosts gauge\nnats_fleet_drift_hosts{stage=\"servers\"} 1\n"
                         "nats_fleet_drift_changes{stage=\"servers\",site=\"spoke-1\",host=\"spoke1-1\"} 3\n"
                         "nats_fleet_drift_run_success 1\n")
        scrape = exporter.scrape()
        assert scrape.value("nats_fleet_drift_file_error") == 0
        assert scrape.value("nats_fleet_drift_hosts", stage="servers") == 1
        assert scrape.value("nats_fleet_drift_changes", stage="servers", site="spoke-1", host=EDGE) == 3

        # the leaf server stops: its links and the server itself are down, the hub's are not
        connection = exporter.collector._nc
        fleet["edge"].stop()
        scrape = exporter.until(lambda s: s.value("nats_leaf_link_up", server=EDGE, account="TEST") == 0)
        assert scrape.value("nats_leaf_link_up", site="spoke-1", server=EDGE, account="TEST") == 0
        assert scrape.value("nats_leaf_link_up", site="spoke-1", server=EDGE, account="SYS") == 0
        assert scrape.value("nats_server_up", site="spoke-1", server=EDGE) == 0
        assert scrape.value("nats_server_up", site="hub", server=HUB) == 1
        assert scrape.value("nats_fleet_collector_connected") == 1 and scrape.value("nats_fleet_servers_answered") == 1
        assert scrape.find("nats_server_info", server=EDGE) == []
        assert scrape.find("nats_stream_messages", server=EDGE) == []
        # waited out the timeout (1 s) for the silent server, no longer
        assert 0.9 < scrape.value("nats_fleet_scrape_duration_seconds") < 3

        # back: the same collector, on the same connection, sees it again
        fleet["start_server"](fleet["binary"], fleet["edge_conf"], EDGE + "-again", fleet["ports"]["edge_http"])
        scrape = exporter.until(lambda s: s.value("nats_server_up", server=EDGE) == 1 and
                                all(link.value == 1 for link in s.find("nats_leaf_link_up", server=EDGE)) and
                                len(s.find("nats_stream_messages", server=EDGE)) == 1, timeout=30)
        assert scrape.value("nats_leaf_link_up", site="spoke-1", server=EDGE, account="TEST") == 1
        assert scrape.value("nats_leaf_link_up", site="spoke-1", server=EDGE, account="SYS") == 1
        assert scrape.value("nats_server_up", site="spoke-1", server=EDGE) == 1
        assert exporter.collector._nc is connection
    finally:
        exporter.collector.close()

    # the command line's --once prints the same families
    path = fleet["tmp_path"] / "exporter.json"
    path.write_text(json.dumps(fleet["config"]))
    once = subprocess.run([EXPORTER, "--config", str(path), "--once"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert once.returncode == 0, once.stderr
    printed = Scrape(once.stdout)
    assert printed.value("nats_server_up", site="spoke-1", server=EDGE) == 1
    assert printed.value("nats_leaf_link_up", site="spoke-1", server=EDGE, account="TEST") == 1
    with open(fleet["config"]["nats"]["creds"]) as handle:
        secrets = [line.strip() for line in handle if line.strip() and not line.startswith("-")]
    assert secrets and not any(secret in once.stdout + once.stderr for secret in secrets)


def _fetch(url, context):
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        return response.status, response.read().decode()


def _exporter_config(tmp_path, ca, port):
    """An exporter config with TLS on /metrics and a hub nobody listens at; (config, client cert, stranger cert)."""
    cert, key = ca.issue("exporter", usages=("server",))
    client = ca.issue("prometheus", usages=("client",))
    (tmp_path / "stranger").mkdir()
    stranger = CA(tmp_path / "stranger", name="stranger").issue("prometheus", usages=("client",))
    creds = tmp_path / "monitor.creds"
    creds.write_text("placeholder: the collector never gets as far as reading it\n")
    os.chmod(str(creds), 0o600)
    config = {
        "listen": {"address": "127.0.0.1", "port": port, "cert": cert, "key": key, "client_ca": ca.path},
        "nats": {"servers": ["tls://127.0.0.1:%d" % free_port()], "creds": str(creds), "ca": ca.path, "timeout": 0.5},
        "servers": [{"server": HUB, "site": "hub"}, {"server": EDGE, "site": "spoke-1"}],
        "collector_site": "hub",
        "leaf_links": [{"server": EDGE, "site": "spoke-1", "account": "TEST"}],
    }
    return config, client, stranger


def test_metrics_are_served_over_https_to_clients_with_a_certificate_of_the_ca(tmp_path):
    (tmp_path / "pki").mkdir()
    ca = CA(tmp_path / "pki")
    port = free_port()
    config, client, stranger = _exporter_config(tmp_path, ca, port)
    path = tmp_path / "exporter.json"
    path.write_text(json.dumps(config))
    log = open(str(tmp_path / "exporter.log"), "w")
    proc = subprocess.Popen([EXPORTER, "--config", str(path)], stdout=log, stderr=subprocess.STDOUT)
    url = "https://127.0.0.1:%d/metrics" % port
    try:
        def context(cert=None):
            made = ssl.create_default_context(cafile=ca.path)
            if cert:
                made.load_cert_chain(*cert)
            return made

        deadline = time.monotonic() + 15
        while True:
            try:
                status, body = _fetch(url, context(client))
                break
            except (OSError, urllib.error.URLError):
                assert proc.poll() is None and time.monotonic() < deadline, open(log.name).read()
                time.sleep(0.2)
        assert status == 200
        scrape = Scrape(body)
        # no hub server reached: a failed collection, not a failed scrape; the other sites are unknown
        assert scrape.value("nats_fleet_collector_connected") == 0
        assert scrape.value("nats_server_up", site="hub", server=HUB) == 0
        assert scrape.find("nats_server_up", server=EDGE) == [] and scrape.find("nats_leaf_link_up") == []
        for refused in (context(), context(stranger)):
            with pytest.raises((OSError, urllib.error.URLError)):
                _fetch(url, refused)
        with pytest.raises((OSError, urllib.error.URLError)):
            _fetch("http://127.0.0.1:%d/metrics" % port, None)
        assert _fetch(url, context(client))[0] == 200  # still serving
    finally:
        proc.terminate()
        code = proc.wait(15)
        log.close()
    assert code == 0, open(log.name).read()


@pytest.mark.parametrize("change, field", [
    (lambda c: c["listen"].pop("client_ca"), "listen.client_ca: missing"),
    (lambda c: c["nats"].update(timeout="2s"), "nats.timeout: expected a number"),
    (lambda c: c["servers"][1].pop("site"), "servers[1].site: missing"),
    (lambda c: c["listen"].update(port="7777"), "listen.port: expected a number"),
    (lambda c: c["nats"].update(creds="/nonexistent/monitor.creds"),
     "nats.creds: /nonexistent/monitor.creds does not exist"),
    (lambda c: c.update(thresholds={"hub/orders": {"max_age_seconds": 5}}), "thresholds.hub/orders: the key must be"),
    (lambda c: c.pop("collector_site"), "collector_site: missing"),
], ids=["missing", "type", "list-item", "port-type", "unreadable-creds", "threshold-key", "collector-site"])
def test_a_bad_config_field_stops_the_exporter_naming_the_field(tmp_path, change, field):
    (tmp_path / "pki").mkdir()
    config, _client, _stranger = _exporter_config(tmp_path, CA(tmp_path / "pki"), free_port())
    change(config)
    path = tmp_path / "exporter.json"
    path.write_text(json.dumps(config))
    proc = subprocess.run([EXPORTER, "--config", str(path)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2 and field in proc.stderr, (proc.returncode, proc.stderr)
    assert proc.stdout == ""


def test_an_unreadable_or_broken_config_file_is_named(tmp_path):
    missing = subprocess.run([EXPORTER, "--config", str(tmp_path / "none.json")], capture_output=True, text=True,
                             timeout=30, check=False)
    assert missing.returncode == 2 and "none.json: cannot read it" in missing.stderr, missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"listen": ')
    proc = subprocess.run([EXPORTER, "--config", str(broken), "--check"], capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 2 and "broken.json: not JSON" in proc.stderr, proc.stderr
