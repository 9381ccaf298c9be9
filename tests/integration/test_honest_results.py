"""Results that say what happened: a push that fails after the store changed
reports the change, removing an account others import from needs force and
then warns, and input that is valid but probably wrong gets a warning."""

import os

from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store

from conftest import free_port, jetstream, operator_mode_conf, run_module
from test_nsc_modules import tree_hash


def store_with(tmp_path, *accounts):
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = run_module("nsc_operator", dict(base, signing_key=True))
    for name in accounts:
        assert run_module("nsc_account", dict(base, name=name, signing_key=True))["changed"]
    return base, operator


def test_a_failed_push_reports_the_store_change_and_the_next_run_pushes_it(nats_binary, start_server, tmp_path):
    binary, _version = nats_binary
    base, operator = store_with(tmp_path, "APP")
    dead = "nats://127.0.0.1:%d" % free_port()
    failed = run_module("nsc_account", dict(base, name="APP", signing_key=True, limits={"conn": 10}, push=True,
                                            servers=[dead], timeout=1.0))
    assert failed.get("failed") and failed["changed"] is True, failed
    assert failed["unconfirmed"] == ["(no server was reached)"], failed
    assert "the store holds the new JWT, but cannot connect" in failed["msg"], failed
    assert "the next run pushes it again" in failed["msg"]
    _token, claims = Store(base["store_dir"], base["keys_dir"], "fleet").read_account("APP")
    assert claims["nats"]["limits"]["conn"] == 10  # the store kept the change

    port, http = free_port(), free_port()
    server = start_server(binary, operator_mode_conf(tmp_path, operator, port, http), "op", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    again = run_module("nsc_account", dict(base, name="APP", signing_key=True, limits={"conn": 10}, push=True,
                                           servers=["nats://127.0.0.1:%d" % port], timeout=2.0))
    assert again["changed"] and again["push_needed"] and again["unconfirmed"] == [], again


def test_removing_an_account_others_import_from_needs_force_and_warns(tmp_path):
    base, _operator = store_with(tmp_path, "HUB", "SPOKE")
    assert run_module("nsc_export", dict(base, account="SPOKE", name="telemetry", subject="telemetry.>",
                                         importers=[{"account": "HUB"}]))["changed"]
    before = tree_hash(base["store_dir"], base["keys_dir"])
    refused = run_module("nsc_account", dict(base, name="SPOKE", state="absent"))
    assert refused.get("failed") and "HUB (stream telemetry.>)" in refused["msg"] and not refused["changed"]
    assert tree_hash(base["store_dir"], base["keys_dir"]) == before
    checked = run_module("nsc_account", dict(base, name="SPOKE", state="absent", force=True), check_mode=True)
    assert checked["changed"] and tree_hash(base["store_dir"], base["keys_dir"]) == before
    forced = run_module("nsc_account", dict(base, name="SPOKE", state="absent", force=True))
    assert forced["changed"] and any("dangle" in w and "HUB" in w for w in forced["warnings"]), forced
    assert not os.path.exists(os.path.join(base["store_dir"], "fleet", "accounts", "SPOKE"))
    # removing an account nobody imports from needs no force
    assert run_module("nsc_account", dict(base, name="HUB", state="absent"))["changed"]


def test_probable_mistakes_are_warned_about(hub_and_leaf, tmp_path):
    base, _operator = store_with(tmp_path, "APP")
    past = run_module("nsc_user", dict(base, account="APP", name="old", expires="2020-01-01T00:00:00Z"))
    assert past["changed"] and any("already past" in w for w in past["warnings"]), past

    os.chmod(base["keys_dir"], 0o777)
    try:
        loose = run_module("nsc_user", dict(base, account="APP", name="old", expires="2020-01-01T00:00:00Z"))
    finally:
        os.chmod(base["keys_dir"], 0o700)
    assert any("group- and world-writable" in w and base["keys_dir"] in w for w in loose["warnings"]), loose

    hub = dict(servers=[hub_and_leaf["hub"]], timeout=2.0)
    nanos = run_module("jetstream_stream", dict(hub, name="DEDUP", subjects=["dedup"], duplicate_window=5000000))
    assert nanos["changed"] and any("duplicate_window: 5000000 is read as seconds (57d20h53m20s)" in w
                                    for w in nanos["warnings"]), nanos
    spelled = run_module("jetstream_stream", dict(hub, name="DEDUP", subjects=["dedup"],
                                                  duplicate_window="57d20h53m20s"))
    assert not spelled["changed"] and not spelled.get("warnings"), spelled
    consumer = run_module("jetstream_consumer", dict(hub, stream="DEDUP", name="slow", ack_wait=3000000))
    assert any("ack_wait: 3000000 is read as seconds" in w for w in consumer["warnings"]), consumer

    orphan = run_module("jetstream_stream", dict(hub, domain="leaf", name="copy", mirror={"name": "nothing",
                                                                                          "domain": "hub"}))
    assert orphan["changed"] and any("its origin stream 'nothing' does not exist" in w and "mirror" in w
                                     for w in orphan["warnings"]), orphan
    nowhere = run_module("jetstream_stream", dict(hub, domain="hub", name="agg", sources=[
        {"name": "test", "domain": "nowhere"}]))
    assert any("could not be looked up" in w for w in nowhere["warnings"]), nowhere
    with jetstream(hub_and_leaf["hub"], "hub") as js:
        js.call("STREAM.CREATE.origin", {"name": "origin", "subjects": ["origin"]})
    found = run_module("jetstream_stream", dict(hub, domain="leaf", name="copy2", mirror={"name": "origin",
                                                                                          "domain": "hub"}))
    assert found["changed"] and not found.get("warnings"), found
    # an origin created by the same run, before its copies, is no mistake
    together = run_module("jetstream_stream", dict(hub, streams=[{"name": "ORDERS", "subjects": ["orders.>"]},
                                                                 {"name": "ARCHIVE", "sources": [{"name": "ORDERS"}]}]))
    assert together["changed"] and not together.get("warnings"), together
