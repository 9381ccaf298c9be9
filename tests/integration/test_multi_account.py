"""One module run for the streams of several accounts: jetstream_stream items with their own creds
(streams[].creds) and jetstream_info's accounts, on a real server in operator mode."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient

from conftest import free_port, operator_mode_conf
from test_nsc_exports import build_store, publish


@pytest.fixture
def accounts(nats_binary, start_server, module, tmp_path):
    """Accounts A and B (JetStream, pushed) on one server, domain 'hub'."""
    binary, version = nats_binary
    base, operator, creds = build_store(module, tmp_path, ("A", "B"))
    port, http = free_port(), free_port()
    server = start_server(binary, operator_mode_conf(tmp_path, operator, port, http, domain="hub"), "op", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    for name in ("A", "B"):
        pushed = module("nsc_account", dict(base, name=name, signing_key=True, push=True, servers=[url], timeout=2.0,
                                            expected_servers=1, jetstream=dict(disk_storage="64MiB",
                                                                               mem_storage="8MiB", streams=10,
                                                                               consumers=20)))
        assert not pushed.get("failed") and pushed["unconfirmed"] == [], pushed
    return dict(url=url, creds=creds, version=version)


def streams_of(env, account):
    """{name: (subjects, mirror name, messages)} of the account's streams."""
    with NatsClient({"servers": [env["url"]], "creds": env["creds"][account], "timeout": 3.0}) as client:
        js = JetStream(client)
        out = {}
        for name in js.call("STREAM.NAMES").get("streams") or []:
            info = js.call("STREAM.INFO.%s" % name)
            out[name] = (info["config"].get("subjects"), (info["config"].get("mirror") or {}).get("name"),
                         info["state"]["messages"])
        return out


def test_one_run_converges_the_streams_of_two_accounts(accounts, module):
    env = accounts
    task = dict(servers=[env["url"]], creds=env["creds"]["A"], timeout=3.0, streams=[
        dict(name="test", subjects=["test"]),
        dict(name="test", creds=env["creds"]["B"], subjects=["test"]),
        dict(name="report", creds=env["creds"]["B"], mirror=dict(name="test")),
    ])
    predicted = module("jetstream_stream", task, check_mode=True)
    assert predicted["changed"] and [a["subject"] for a in predicted["actions"]] == [
        "$JS.API.STREAM.CREATE.test", "$JS.API.STREAM.CREATE.test", "$JS.API.STREAM.CREATE.report"], predicted
    assert streams_of(env, "A") == {} and streams_of(env, "B") == {}

    first = module("jetstream_stream", task)
    assert first["changed"] and not first.get("failed"), first
    assert [(e["name"], e.get("creds"), e["action"]) for e in first["streams"]] == [
        ("test", None, "create"), ("test", env["creds"]["B"], "create"), ("report", env["creds"]["B"], "create")]
    assert first["actions"] == predicted["actions"]
    # the same names, each account its own: a message published in A stays in A
    publish(env, "A", "test", 3)
    assert streams_of(env, "A") == {"test": (["test"], None, 3)}
    assert set(streams_of(env, "B")) == {"test", "report"} and streams_of(env, "B")["test"][2] == 0

    again = module("jetstream_stream", task)
    assert not again["changed"] and again["actions"] == [], again
    assert not module("jetstream_stream", task, check_mode=True)["changed"]


def test_a_change_refused_in_one_account_leaves_every_account_untouched(accounts, module):
    env = accounts
    assert module("jetstream_stream", dict(servers=[env["url"]], creds=env["creds"]["B"], name="test",
                                           subjects=["test"]))["changed"]
    refused = module("jetstream_stream", dict(servers=[env["url"]], creds=env["creds"]["A"], streams=[
        dict(name="fresh", subjects=["fresh"]),
        # storage cannot change in place: refused while planning, before A's new stream is sent
        dict(name="test", creds=env["creds"]["B"], subjects=["test"], storage="memory"),
    ]))
    assert refused.get("failed") and not refused["changed"] and refused["actions"] == [], refused
    assert "stream 'test'" in refused["msg"] and "storage" in refused["msg"], refused["msg"]
    assert "(with creds %s)" % env["creds"]["B"] in refused["msg"], refused["msg"]
    assert streams_of(env, "A") == {}


def test_info_waits_for_the_copies_of_several_accounts_in_one_run(accounts, module):
    env = accounts
    assert module("jetstream_stream", dict(servers=[env["url"]], creds=env["creds"]["A"], streams=[
        dict(name="test", subjects=["test"]), dict(name="copy", mirror=dict(name="test")),
        dict(name="test", creds=env["creds"]["B"], subjects=["test"]),
        dict(name="copy", creds=env["creds"]["B"], mirror=dict(name="test"))]))["changed"]
    publish(env, "B", "test", 4)
    task = dict(servers=[env["url"]], creds=env["creds"]["A"], domain="hub", streams=["copy"], compare_origins=True,
                accounts=[dict(name="B", creds=env["creds"]["B"], streams=["copy"])])
    for _attempt in range(30):
        info = module("jetstream_info", task)
        assert not info.get("failed"), info
        if all(row["status"] == "ok" for row in info["replication"]):
            break
    rows = dict((row["account"], row) for row in info["replication"])
    assert set(rows) == {None, "B"} and all(row["status"] == "ok" for row in rows.values()), rows
    assert rows["B"]["origin_last_seq"] == 4 and rows[None]["origin_last_seq"] == 0, rows
    assert [(s["name"], s["account"], s["messages"]) for s in info["streams"]] == [
        ("copy", None, 0), ("copy", "B", 4)], info["streams"]
    assert "Stream Report: domain hub, account B" in info["report"] and "Stream Report: domain hub" in info["report"]
    assert '"hub, account B/copy"' in info["dot"] and '"hub/copy"' in info["dot"], info["dot"]
