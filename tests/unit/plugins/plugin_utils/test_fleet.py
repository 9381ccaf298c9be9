"""The fleet play's data model: items checked against their modules' options,
leaf remotes resolved from names, and the per-domain plans; and the lab
inventory, which must pass the same checks."""

import glob
import re
import os

import pytest
import yaml

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _fleet

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
KEY = "A" + "B" * 55
SYS = "A" + "C" * 55


@pytest.mark.parametrize("fleet, message", [
    ({"accounts": [{"name": "A", "jetstrem": {}}]}, "nats_accounts[0] (A): unknown option jetstrem; nsc_account takes"),
    ({"accounts": [{"name": "A", "users": [{"name": "u", "permissions": {"pub": {"alow": ["x"]}}}]}]},
     "nats_accounts[0] (A).users[0] (u)"),
    ({"accounts": [{"name": "A", "users": [{"name": "u"}], "admin_user": "v"}]}, "admin_user: 'v'"),
    ({"accounts": [{"name": "A"}, {"name": "A"}]}, "declared twice"),
    ({"exports": [{"account": "A", "name": "x", "subject": "x", "type": "strem"}]}, "nats_exports[0] (x)"),
    ({"streams": [{"name": "s", "replicas": "three"}]}, "nats_streams[0] (s)"),
    ({"streams": [{"name": "s", "max_age": "forever"}]}, "nats_streams[0] (s)"),
    ({"accounts": [{"name": "A"}], "streams": [{"name": "s", "account": "B"}]}, "'B' is not in nats_accounts"),
    ({"consumers": [{"stream": "s", "name": "c", "ack_policy": "sometimes"}]}, "nats_consumers[0] (c)"),
])
def test_check_names_the_item_and_the_field(fleet, message):
    with pytest.raises(_fleet.FleetError, match=re.escape(message)):
        _fleet.check(fleet.get("accounts"), fleet.get("exports"), fleet.get("streams"), fleet.get("consumers"))


def test_check_accepts_the_fleet_keys():
    assert _fleet.check([{"name": "A", "jetstream": {}, "users": [{"name": "u"}], "admin_user": "u"}], [],
                        [{"name": "s", "account": "A", "subjects": ["s"]}],
                        [{"stream": "s", "name": "c", "account": "A"}]) == 4


def lab_vars():
    base = os.path.join(ROOT, "inventories/lab/group_vars")
    merged = {}
    for path in sorted(glob.glob(base + "/all/*.yml")):
        merged.update(yaml.safe_load(open(path)))
    return base, merged


def test_the_lab_inventory_passes_the_checks():
    base, fleet = lab_vars()
    _fleet.check(fleet["nats_accounts"], fleet["nats_exports"])
    admins = _fleet.admin_users(fleet["nats_accounts"])
    for group in ("hub", "spoke1", "spoke2"):
        site = yaml.safe_load(open(os.path.join(base, group + ".yml")))
        _fleet.check(fleet["nats_accounts"], None, site.get("nats_streams"), site.get("nats_consumers"))
        batches = _fleet.stream_batches(site["nats_streams"], fleet["nats_fleet_default_account"], "/c", admins)
        assert all(b["creds"] == "/c/%s/%s.creds" % (b["account"], admins[b["account"]]) for b in batches)


def test_leaf_remotes_resolve_names_to_keys_and_creds():
    out = _fleet.leaf_remotes(
        [{"hub_group": "hub", "system_account": True}, {"hub_group": "hub", "account": "TEST", "user": "leaf"},
         {"hub_group": "hub", "account": KEY, "credentials": "/etc/x.creds"}],
        {"TEST": KEY, "SYS": SYS}, SYS, "/fleet/creds")
    assert out[0] == {"hub_group": "hub", "system_account": True, "account": SYS,
                      "credentials_src": "/fleet/creds/SYS/sys.creds"}
    assert out[1] == {"hub_group": "hub", "account": KEY, "credentials_src": "/fleet/creds/TEST/leaf.creds"}
    assert out[2] == {"hub_group": "hub", "account": KEY, "credentials": "/etc/x.creds"}
    # resolved remotes resolve to themselves (the servers stage may run twice in a play)
    assert _fleet.leaf_remotes(out, {"TEST": KEY, "SYS": SYS}, SYS, "/fleet/creds") == out


@pytest.mark.parametrize("remote, message", [
    ({"account": "NOPE", "user": "u"}, r"spoke1: nats_server_leafnode_remotes\[0\].account: no account 'NOPE'"),
    ({"account": "TEST", "user": "u", "credentials_src": "x"}, "either user or credentials"),
    ({"user": "u"}, "needs the account"),
])
def test_leaf_remote_errors(remote, message):
    with pytest.raises(_fleet.FleetError, match=message):
        _fleet.leaf_remotes([remote], {"TEST": KEY}, SYS, "/c", host="spoke1")


def test_domains_and_push_targets():
    hostvars = {h: {"nats_server_jetstream_domain": d, "_nats_fleet_url": "nats://%s:4222" % h}
                for h, d in (("h1", "hub"), ("h2", "hub"), ("s1", "spoke-1"))}
    domains = _fleet.domains(hostvars, ["h1", "h2", "s1"])
    assert domains["hub"] == {"hosts": ["h1", "h2"], "urls": ["nats://h1:4222", "nats://h2:4222"], "leader": "h1"}
    assert _fleet.push_targets(domains, "hub", "hub") == [
        {"domain": "hub", "urls": ["nats://h1:4222", "nats://h2:4222"], "expected": 3}]
    assert [t["expected"] for t in _fleet.push_targets(domains, "site")] == [2, 1]
    with pytest.raises(_fleet.FleetError, match="site or hub"):
        _fleet.push_targets(domains, "everywhere")


def test_check_hosts_checks_each_distinct_data_once_and_names_the_domains(monkeypatch):
    site = {"nats_accounts": [{"name": "TEST"}], "nats_streams": [{"name": "test", "subjects": ["test.>"]}],
            "inventory_dir": "/inv"}
    hostvars = dict(("s%d" % i, dict(site, nats_server_jetstream_domain="spoke-%d" % i)) for i in range(1, 8))
    hostvars["h1"] = {"nats_server_jetstream_domain": "hub"}
    hosts = sorted(hostvars)
    calls = []
    check = _fleet.check
    monkeypatch.setattr(_fleet, "check", lambda *args, **kwargs: calls.append(args[2]) or check(*args, **kwargs))
    # seven sites with their own domains and the same group's data: checked once, and the hub
    assert _fleet.check_hosts(hostvars, hosts) == dict(dict.fromkeys(hosts, 2), h1=0)
    assert len(calls) == 2
    # every distinct data's first problem in one error, named with the domains that hold it
    for host in hosts[1:]:
        hostvars[host]["nats_streams"] = [{"name": "test", "max_age": "forever"}]
    hostvars["h1"]["nats_consumers"] = [{"stream": "s", "name": "c", "ack_policy": "sometimes"}]
    with pytest.raises(_fleet.FleetError) as raised:
        _fleet.check_hosts(hostvars, hosts)
    lines = str(raised.value).splitlines()
    assert len(lines) == 2 and lines[0].startswith("hub: nats_consumers[0] (c)"), lines
    assert lines[1].startswith("spoke-1, spoke-2, spoke-3, spoke-4, spoke-5 and 2 more: nats_streams[0] (test)"), lines


def test_stream_batches_put_origins_before_copies():
    batches = _fleet.stream_batches(
        [{"name": "cnc", "subjects": ["cnc"]}, {"name": "agg", "sources": [{"name": "test", "domain": "s"}]},
         {"name": "x", "account": "IMP", "mirror": {"name": "agg"}}], "TEST", "/c", {"TEST": "leaf", "IMP": "i"})
    assert batches == [
        {"account": "TEST", "creds": "/c/TEST/leaf.creds", "origins": [{"name": "cnc", "subjects": ["cnc"]}],
         "copies": [{"name": "agg", "sources": [{"name": "test", "domain": "s"}]}]},
        {"account": "IMP", "creds": "/c/IMP/i.creds", "origins": [], "copies": [{"name": "x", "mirror": {"name": "agg"}}]}]
    with pytest.raises(_fleet.FleetError, match="no user to converge"):
        _fleet.stream_batches([{"name": "s", "account": "NOUSERS"}], "TEST", "/c", {})


def test_a_pass_is_every_accounts_items_with_their_creds():
    streams = _fleet.stream_batches(
        [{"name": "cnc", "subjects": ["cnc"]}, {"name": "x", "account": "IMP", "mirror": {"name": "agg"}},
         {"name": "y", "account": "IMP", "subjects": ["y"]}], "TEST", "/c", {"TEST": "leaf", "IMP": "i"})
    assert _fleet.pass_items(streams, "origins") == [{"name": "cnc", "subjects": ["cnc"], "creds": "/c/TEST/leaf.creds"},
                                                     {"name": "y", "subjects": ["y"], "creds": "/c/IMP/i.creds"}]
    assert _fleet.pass_items(streams, "copies") == [{"name": "x", "mirror": {"name": "agg"}, "creds": "/c/IMP/i.creds"}]
    assert _fleet.pass_items(None, "origins") == []


def test_contexts_one_per_domain_and_sys():
    domains = {"hub": {"hosts": ["h1"], "urls": ["nats://h1:4222"], "leader": "h1"},
               "spoke-1": {"hosts": ["s1"], "urls": ["nats://s1:4222"], "leader": "s1"}}
    out = _fleet.contexts(domains, "TEST", "/c", {"TEST": "leaf", "SYS": "sys"}, "SYS", "sys",
                          [{"name": "importer", "domain": "hub", "account": "IMP", "user": "i"}])
    assert [(c["name"], c["url"], c["creds"]) for c in out] == [
        ("hub", "nats://h1:4222", "/c/TEST/leaf.creds"), ("spoke-1", "nats://s1:4222", "/c/TEST/leaf.creds"),
        ("sys", "nats://h1:4222", "/c/SYS/sys.creds"), ("importer", "nats://h1:4222", "/c/IMP/i.creds")]


def _group_vars(inventory):
    """{file: its variables} of an example inventory's group_vars (files and directories alike)."""
    base = os.path.join(ROOT, "inventories", inventory, "group_vars")
    out = {}
    for path in sorted(glob.glob(base + "/*.yml") + glob.glob(base + "/*/*.yml")):
        with open(path) as handle:
            out[os.path.relpath(path, base)] = yaml.safe_load(handle) or {}
    return out


@pytest.mark.parametrize("inventory", ["lab", "edge-fleet", "cross-region"])
def test_example_inventories_pass_the_checks(inventory):
    """Every list the fleet play converges, in every group_vars file of each example inventory, passes the
    preflight's checks: accounts and exports, streams, consumers, KV buckets, object stores and fetches."""
    files = _group_vars(inventory)
    accounts = [a for data in files.values() for a in data.get("nats_accounts") or []]
    exports = [e for data in files.values() for e in data.get("nats_exports") or []]
    per_accounts = sum(1 + len(a.get("users") or []) for a in accounts)  # check() counts them at each call
    checked = _fleet.check(accounts, exports) if accounts or exports else 0
    expected = (per_accounts + len(exports)) if accounts or exports else 0
    for name, data in files.items():
        lists = {arg: data.get(var) for arg, var in _fleet.HOST_DATA if arg != "accounts" and data.get(var)}
        checked += _fleet.check(accounts, None, where="%s: " % name,
                                files_dir=os.path.join(ROOT, "inventories", inventory), **lists)
        expected += per_accounts + sum(len(items) for items in lists.values())
    assert checked == expected > 0
    # what the inventories show is checked: each kind the fleet converges appears in one of them
    if inventory == "lab":
        kinds = set(var for data in files.values() for _arg, var in _fleet.HOST_DATA if data.get(var))
        assert {"nats_streams", "nats_consumers", "nats_kv_buckets", "nats_object_stores", "nats_accounts"} <= kinds


# --- push order ---------------------------------------------------------------

def _names(accounts):
    return [a["name"] for a in accounts]


def test_exporters_are_pushed_before_their_importers():
    accounts = [{"name": "IMPORTER"}, {"name": "TEST"}, {"name": "ANALYTICS"}, {"name": "TELEMETRY"}]
    exports = [{"share_stream": {"stream": "aggregate", "from_account": "TEST", "to_account": "IMPORTER"}},
               {"account": "TELEMETRY", "subject": "t.>", "importers": [{"account": "ANALYTICS"}]}]
    assert _names(_fleet.push_order(accounts, exports)) == ["TEST", "TELEMETRY", "IMPORTER", "ANALYTICS"]


def test_an_import_cycle_pushes_the_leaf_bound_account_last():
    # the exchange pattern: EXCACC imports from LEAFACC and HUBACC, HUBACC from EXCACC;
    # EXCACC is bound on the leaf remotes, so the spokes load it as soon as it lands
    accounts = [{"name": "EXCACC"}, {"name": "LEAFACC"}, {"name": "HUBACC"}]
    exports = [{"account": "LEAFACC", "subject": "a.>", "importers": [{"account": "EXCACC"}]},
               {"account": "HUBACC", "subject": "b.>", "importers": [{"account": "EXCACC"}]},
               {"account": "EXCACC", "subject": "c.>", "importers": [{"account": "HUBACC"}]}]
    assert _names(_fleet.push_order(accounts, exports, last=["EXCACC"])) == ["LEAFACC", "HUBACC", "EXCACC"]
    assert _names(_fleet.push_order(accounts, exports)) == ["LEAFACC", "EXCACC", "HUBACC"]


def test_push_order_keeps_every_account_once():
    accounts = [{"name": "A"}, {"name": "B"}]
    exports = [{"account": "A", "subject": "x", "importers": [{"account": "A"}, {"account": "NOT-DECLARED"}]}]
    assert _names(_fleet.push_order(accounts, exports)) == ["A", "B"]


# --- object stores and what hosts fetch from them -------------------------------

STORE = {"name": "files", "objects": [{"name": "a.csv", "content": "x"}]}


@pytest.mark.parametrize("stores, fetch, message", [
    ([{"name": "files", "replica": 3}], None, "nats_object_stores[0] (files): unknown option replica; jetstream_object_store takes"),
    ([{"name": "fi.les"}], None, "nats_object_stores[0] (fi.les).name: object store bucket name: 'fi.les' is not valid"),
    ([{"name": "files", "objects": [{"name": "a", "src": "a", "content": "b"}]}], None,
     "nats_object_stores[0] (files): parameters are mutually exclusive: src|content found in objects"),
    ([{"name": "files", "objects": [{"name": "a"}]}], None, "nats_object_stores[0] (files): one of the following is required"),
    ([{"name": "files", "objects": [{"name": "a", "src": "missing.bin"}]}], None,
     "nats_object_stores[0] (files).objects[0] (a).src: /inv/missing.bin is not a file on the controller"),
    ([{"name": "files", "mirror": {"name": "files", "domain": "hub"}, "objects": []}], None,
     "nats_object_stores[0] (files).objects: a mirror is read-only; put the objects in its origin 'files'"),
    ([{"name": "files", "objects": [{"name": "a", "content": ""}, {"name": "a", "content": "b"}]}], None,
     "nats_object_stores[0] (files).objects[1] (a): object 'a' is listed twice"),
    ([STORE, STORE], None, "nats_object_stores[1] (files): object store 'files' is declared twice in this domain"),
    ([{"name": "files", "account": "B"}], None, "nats_object_stores[0] (files).account: 'B' is not in nats_accounts"),
    ([STORE], [{"bucket": "files", "name": "a.csv"}], "nats_object_fetch[0] (files/a.csv): missing required arguments: dest"),
    ([STORE], [{"bucket": "files", "name": "a.csv", "dest": "a.csv"}], "nats_object_fetch[0] (files/a.csv).dest: 'a.csv' is not "
     "an absolute path"),
    ([STORE], [{"bucket": "files", "name": "a.csv", "dest": "/a", "mode": "rw"}], "nats_object_fetch[0] (files/a.csv).mode: 'rw'"),
    ([STORE], [{"bucket": "file", "name": "a.csv", "dest": "/a"}], "nats_object_fetch[0] (file/a.csv).bucket: 'file' is not in "
     "this domain's nats_object_stores (files)"),
    ([STORE], [{"bucket": "files", "name": "a.csv", "dest": "/a", "own": "x"}],
     "nats_object_fetch[0] (files/a.csv): unknown option own; jetstream_object_fetch takes bucket, dest, mode, name, account, group, owner"),
])
def test_object_store_checks_name_the_item_and_the_field(stores, fetch, message):
    with pytest.raises(_fleet.FleetError, match=re.escape("hub: " + message)):
        _fleet.check([{"name": "A"}], None, None, None, where="hub: ", object_stores=stores, object_fetch=fetch,
                     files_dir="/inv")


def test_object_store_checks_accept_good_items(tmp_path):
    (tmp_path / "files").mkdir()
    (tmp_path / "files/fw.bin").write_bytes(b"\0" * 10)
    stores = [{"name": "files", "account": "A", "replicas": 3, "objects": [
        {"name": "fw.bin", "src": "files/fw.bin", "metadata": {"board": "x"}}, {"name": "CHANNEL", "content": "stable"}]},
        {"name": "copy", "mirror": {"name": "files", "domain": "hub"}}]
    fetch = [{"bucket": "copy", "name": "fw.bin", "dest": "/opt/fw.bin", "mode": 0o640, "owner": "app", "group": "app"},
             {"bucket": "files", "name": "CHANNEL", "dest": "/etc/channel", "account": "A"}]
    assert _fleet.check([{"name": "A"}], None, None, None, object_stores=stores, object_fetch=fetch,
                        files_dir=str(tmp_path)) == 1 + 2 + 2


def test_object_store_batches_find_relative_sources_under_the_inventory():
    batches = _fleet.stream_batches(
        [{"name": "files", "objects": [{"name": "a", "src": "files/a"}, {"name": "b", "src": "/abs/b"},
                                       {"name": "c", "content": "c"}]},
         {"name": "copy", "account": "A", "mirror": {"name": "files", "domain": "hub"}}],
        "TEST", "/c", {"TEST": "leaf", "A": "u"}, kind="objects", files_dir="/inv")
    assert batches == [
        {"account": "TEST", "creds": "/c/TEST/leaf.creds", "copies": [],
         "origins": [{"name": "files", "objects": [
             {"name": "a", "src": "/inv/files/a"}, {"name": "b", "src": "/abs/b"}, {"name": "c", "content": "c"}]}]},
        # an object store's copy is kept in the stream OBJ_<store>
        {"account": "A", "creds": "/c/A/u.creds", "origins": [],
         "copies": [{"name": "copy", "mirror": {"name": "files", "domain": "hub"}}]}]
    with pytest.raises(_fleet.FleetError, match=re.escape("nats_object_stores[0] (files): no account")):
        _fleet.stream_batches([{"name": "files"}], "", "/c", {}, kind="objects")


def test_object_fetches_read_each_object_once_per_domain_and_copy_it_to_every_host():
    hostvars = {
        "s1": {"nats_object_fetch": [{"bucket": "files", "name": "models/v2.onnx", "dest": "/opt/m.onnx"},
                                     {"bucket": "files", "name": "CHANNEL", "dest": "/etc/ch", "mode": "0600", "owner": "app"}]},
        "s2": {"nats_object_fetch": [{"bucket": "files", "name": "models/v2.onnx", "dest": "/srv/m.onnx", "mode": 0o644}]},
        "s3": {},
    }
    plan = _fleet.object_fetches(hostvars, ["s1", "s2", "s3"], "TEST", "/f/creds", {"TEST": "leaf"}, "/f/objects", "spoke-1")
    model = "/f/objects/spoke-1/TEST/files/models%2Fv2.onnx"
    creds = "/f/creds/TEST/leaf.creds"
    channel = "/f/objects/spoke-1/TEST/files/CHANNEL"
    assert plan["fetches"] == [
        {"account": "TEST", "creds": creds, "bucket": "files", "name": "models/v2.onnx", "cache": model,
         "args": {"bucket": "files", "name": "models/v2.onnx", "dest": model, "mode": "0600", "creds": creds}},
        {"account": "TEST", "creds": creds, "bucket": "files", "name": "CHANNEL", "cache": channel,
         "args": {"bucket": "files", "name": "CHANNEL", "dest": channel, "mode": "0600", "creds": creds}}]
    file = {"kind": "file", "owner": None, "group": None}
    assert plan["copies"] == {
        "s1": [dict(file, src=model, dest="/opt/m.onnx", path="/opt/m.onnx", mode="0644"),
               dict(file, src="/f/objects/spoke-1/TEST/files/CHANNEL", dest="/etc/ch", path="/etc/ch", mode="0600",
                    owner="app")],
        # a mode written unquoted in YAML, read as a number, is the octal string a host's state is compared with
        "s2": [dict(file, src=model, dest="/srv/m.onnx", path="/srv/m.onnx", mode="0644")]}
    with pytest.raises(_fleet.FleetError, match=re.escape("s1: nats_object_fetch (files/x).account: account 'B' has no user")):
        _fleet.object_fetches({"s1": {"nats_object_fetch": [{"bucket": "files", "name": "x", "dest": "/x", "account": "B"}]}},
                              ["s1"], "TEST", "/c", {"TEST": "leaf"}, "/o")


def test_the_lab_object_stores_pass_the_checks():
    base, fleet = lab_vars()
    hub = yaml.safe_load(open(os.path.join(base, "hub.yml")))
    spokes = yaml.safe_load(open(os.path.join(base, "spokes.yml")))
    assert _fleet.check(fleet["nats_accounts"], None, None, None, object_stores=hub["nats_object_stores"]) >= 1
    assert _fleet.check(fleet["nats_accounts"], None, None, None, object_stores=spokes["nats_object_stores"],
                        object_fetch=spokes["nats_object_fetch"]) >= 2
    assert spokes["nats_object_stores"][0]["mirror"] == {"name": "fleet-files", "domain": "hub"}


def test_context_files_read_as_to_nice_json_writes_them_and_only_differing_ones_are_stale():
    import hashlib
    import json as _json
    domains = {"hub": {"urls": ["nats://h1:4222"]}}
    files = _fleet.contexts(domains, "TEST", "/c", {"TEST": "leaf"}, "SYS", "sys", context_dir="/x/context/")
    assert [f["path"] for f in files] == ["/x/context/hub.json", "/x/context/sys.json"]
    item = files[0]
    nice = _json.dumps({"description": item["description"], "url": item["url"], "creds": item["creds"]},
                       sort_keys=True, indent=4, separators=(",", ": ")) + "\n"  # what to_nice_json writes
    assert item["content"] == nice
    current = {"exists": True, "checksum": hashlib.sha1(nice.encode()).hexdigest(), "mode": "0600"}
    assert _fleet.stale_files([item], [current], "0600") == []
    assert _fleet.stale_files([item], [dict(current, mode="0644")], "0600") == [item]
    assert _fleet.stale_files([item], [dict(current, checksum="0" * 40)], "0600") == [item]
    assert _fleet.stale_files([item], [{"exists": False}], "0600") == [item]
    assert "path" not in _fleet.contexts(domains, "TEST", "/c", {"TEST": "leaf"}, "SYS", "sys")[0]
    # every context names the CA that verifies the servers (natscli's "ca")
    verified = _fleet.contexts(domains, "TEST", "/c", {"TEST": "leaf"}, "SYS", "sys", context_dir="/x", ca="/f/tls/ca.pem")
    assert all(c["ca"] == "/f/tls/ca.pem" and '"ca": "/f/tls/ca.pem"' in c["content"] for c in verified)


def test_cached_copies_take_the_checksum_the_domain_run_reported_then_the_cache_files():
    copies = [{"src": "/c/a", "dest": "/opt/a"}, {"src": "/c/b", "dest": "/opt/b"}, {"src": "/c/n", "dest": "/opt/n"}]
    states = [{"exists": True, "type": "file", "checksum": "old-a"}, {"exists": True, "checksum": "b1"},
              {"exists": False}]
    # the run reported /c/a (in check mode: the content it would fetch); /c/n would come from a store not made yet
    fetched = [{"dest": "/c/a", "checksum": "new-a"}, {"dest": "/c/n", "checksum": None}]
    assert [c["checksum"] for c in _fleet.cached_copies(copies, states, fetched)] == ["new-a", "b1", "not in the cache"]
    assert [c["checksum"] for c in _fleet.cached_copies(copies, states, None)] == ["old-a", "b1", "not in the cache"]
    assert _fleet.cached_copies(copies, states, [])[0] == {"src": "/c/a", "dest": "/opt/a", "checksum": "old-a"}
