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
    ({"accounts": [{"name": "A"}, {"name": "A"}]}, "nats_accounts[1] (A): listed twice, first at nats_accounts[0]"),
    ({"exports": [{"account": "A", "name": "x", "subject": "x", "type": "strem"}]}, "nats_exports[0] (A x)"),
    ({"streams": [{"name": "s", "replicas": "three"}]}, "nats_streams[0] (s)"),
    ({"streams": [{"name": "s", "max_age": "forever"}]}, "nats_streams[0] (s)"),
    ({"accounts": [{"name": "A"}], "streams": [{"name": "s", "account": "B"}]}, "'B' is not in nats_accounts"),
    ({"consumers": [{"stream": "s", "name": "c", "ack_policy": "sometimes"}]}, "nats_consumers[0] (c)"),
    ({"accounts": [{"name": "A", "jetstream": {"tiers": {"R1": {"disk_max_stream_bytes": "lots"}}}}]},
     "jetstream.tiers.R1.disk_max_stream_bytes"),
    ({"accounts": [{"name": "A", "mappings": [{"subject": "a", "to": [{"subject": "b", "weight": 101}]}]}]},
     "mappings[0] (a).to[0].weight: 101 is not a percentage from 1 to 100"),
    ({"accounts": [{"name": "A", "users": [{"name": "u", "allowed_connection_types": ["CLIENT"]}]}]},
     "nats_accounts[0] (A).users[0] (u)"),
    ({"accounts": [{"name": "A", "scoped_signing_keys": [{"role": "r"}], "users": [
        {"name": "u", "signing_role": "w"}]}]},
     "nats_accounts[0] (A).users[0] (u).signing_role: 'w' is not a role of the account's scoped_signing_keys (r)"),
])
def test_check_names_the_item_and_the_field(fleet, message):
    with pytest.raises(_fleet.FleetError, match=re.escape(message)):
        _fleet.check(fleet.get("accounts"), fleet.get("exports"), fleet.get("streams"), fleet.get("consumers"))


def test_check_accepts_account_and_user_policy():
    assert _fleet.check([{"name": "A", "jetstream": {"tiers": {"R1": {"disk_storage": "1GiB", "max_ack_pending": 10}}},
                          "scoped_signing_keys": [{"role": "r", "template": {"pub": {"allow": ["a.>"]}}}],
                          "mappings": [{"subject": "a", "to": [{"subject": "b"}]}],
                          "users": [{"name": "u", "signing_role": "r"},
                                    {"name": "leaf", "allowed_connection_types": ["LEAFNODE"], "src": ["10.0.0.0/8"]}]}],
                        []) == 3


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
    _fleet.check(fleet["nats_accounts"], fleet["nats_exports"], default_account=fleet["nats_fleet_default_account"])
    admins = _fleet.admin_users(fleet["nats_accounts"])
    for group in ("hub", "spoke1", "spoke2"):
        site = yaml.safe_load(open(os.path.join(base, group + ".yml")))
        _fleet.check(fleet["nats_accounts"], None, site.get("nats_streams"), site.get("nats_consumers"),
                     default_account=fleet["nats_fleet_default_account"])
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
    site = {"nats_accounts": [{"name": "TEST", "users": [{"name": "u"}]}], "nats_fleet_default_account": "TEST",
            "nats_streams": [{"name": "test", "subjects": ["test.>"]}], "inventory_dir": "/inv"}
    hostvars = dict(("s%d" % i, dict(site, nats_server_jetstream_domain="spoke-%d" % i)) for i in range(1, 8))
    hostvars["h1"] = {"nats_server_jetstream_domain": "hub"}
    hosts = sorted(hostvars)
    calls = []
    checked = _fleet._checked
    monkeypatch.setattr(_fleet, "_checked", lambda *args: calls.append(args[2]) or checked(*args))
    # seven sites with their own domains and the same group's data: checked once, and the hub
    assert _fleet.check_hosts(hostvars, hosts) == dict(dict.fromkeys(hosts, 3), h1=0)
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


def inventory_vars(inventory):
    """(the hosts of nats_servers, {host: its variables}) of an example inventory, as Ansible reads them (group
    precedence, inventory_dir), unrendered: what the preflight's filters get."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager
    loader = DataLoader()
    hosts_file = os.path.join(ROOT, "inventories", inventory, "hosts.yml")
    manager = InventoryManager(loader=loader, sources=[hosts_file])
    variables = VariableManager(loader=loader, inventory=manager)
    hosts = [host.name for host in manager.get_hosts("nats_servers")]
    return hosts, dict((host, variables.get_vars(host=manager.get_host(host), include_hostvars=False)) for host in hosts)


@pytest.mark.parametrize("inventory", ["lab", "edge-fleet", "cross-region"])
def test_example_inventories_pass_the_preflight(inventory):
    """Each example inventory passes what the fleet play's preflight runs (roles/nats_fleet/tasks/preflight.yml):
    the accounts and exports, then every host's streams, consumers, KV buckets, object stores and fetches."""
    hosts, hostvars = inventory_vars(inventory)
    first = hostvars[hosts[0]]
    assert _fleet.check(first.get("nats_accounts"), first.get("nats_exports"),
                        default_account=first.get("nats_fleet_default_account") or "",
                        operator=first.get("nats_fleet_operator"),
                        system_account=first.get("nats_fleet_system_account")) == sum(
        1 + len(account.get("users") or []) for account in first.get("nats_accounts") or []) + len(
        first.get("nats_exports") or [])
    checked = _fleet.check_hosts(hostvars, hosts)
    domains = list(dict.fromkeys(hostvars[host].get("nats_server_jetstream_domain") or "" for host in hosts))
    copying = _fleet.aggregating(hostvars, hosts)
    for host in hosts:
        items = sum(len(hostvars[host].get(var) or []) for arg, var in _fleet.HOST_DATA
                    if arg not in ("accounts", "streams", "consumers"))
        items += len(_fleet.host_streams(hostvars[host], domains)[0])  # with the streams of its aggregates
        items += len(_fleet.host_consumers(hostvars[host], copying, domains))  # and the consumers durable ones read
        assert checked[host] == items + sum(1 + len(a.get("users") or []) for a in hostvars[host].get("nats_accounts") or [])
    # what the inventories show is checked: each kind the fleet converges appears in one of them
    if inventory == "lab":
        kinds = set(var for host in hosts for _arg, var in _fleet.HOST_DATA if hostvars[host].get(var))
        assert set(var for _arg, var in _fleet.HOST_DATA) <= kinds


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
ACCOUNTS = [{"name": "A", "users": [{"name": "u"}]}, {"name": "B", "users": [{"name": "v"}]}]


@pytest.mark.parametrize("stores, fetch, message", [
    ([{"name": "files", "replica": 3}], None, "nats_object_stores[0] (files): unknown option replica; jetstream_object_store takes"),
    ([{"name": "fi.les"}], None, "nats_object_stores[0] (fi.les): object store bucket name: 'fi.les' is not valid"),
    ([{"name": "files", "objects": [{"name": "a", "src": "a", "content": "b"}]}], None,
     "nats_object_stores[0] (files): parameters are mutually exclusive: src|content found in objects"),
    ([{"name": "files", "objects": [{"name": "a"}]}], None, "nats_object_stores[0] (files): one of the following is required"),
    ([{"name": "files", "objects": [{"name": "a", "src": "missing.bin"}]}], None,
     "nats_object_stores[0] (files): bucket 'files': objects[0].src: /inv/missing.bin is not a file (object 'a')"),
    ([{"name": "files", "mirror": {"name": "files", "domain": "hub"}, "objects": []}], None,
     "nats_object_stores[0] (files): bucket 'files': objects: a mirror is read-only; put the objects in its origin 'files'"),
    ([{"name": "files", "objects": [{"name": "a", "content": ""}, {"name": "a", "content": "b"}]}], None,
     "nats_object_stores[0] (files): bucket 'files': objects[1]: 'a' is listed twice"),
    ([STORE, STORE], None, "nats_object_stores[1] (files): stream 'OBJ_files' in account 'A' is declared more than once"),
    ([{"name": "files", "account": "C"}], None, "nats_object_stores[0] (files).account: 'C' is not in nats_accounts"),
    ([STORE], [{"bucket": "files", "name": "a.csv"}], "nats_object_fetch[0] (files/a.csv): missing required arguments: dest"),
    ([STORE], [{"bucket": "files", "name": "a.csv", "dest": "a.csv"}], "nats_object_fetch[0] (files/a.csv).dest: 'a.csv' is not "
     "an absolute path"),
    ([STORE], [{"bucket": "files", "name": "a.csv", "dest": "/a", "mode": "rw"}], "nats_object_fetch[0] (files/a.csv): mode: 'rw'"),
    ([STORE], [{"bucket": "file", "name": "a.csv", "dest": "/a"}], "nats_object_fetch[0] (file/a.csv).bucket: 'file' is not in "
     "this domain's nats_object_stores in account 'A' (files)"),
    ([STORE, dict(STORE, name="other", account="B")], [{"bucket": "other", "name": "a.csv", "dest": "/a"}],
     "nats_object_fetch[0] (other/a.csv).bucket: 'other' is not in this domain's nats_object_stores in account 'A' (files)"),
    ([STORE], [{"bucket": "files", "name": "a.csv", "dest": "/opt/a"}, {"bucket": "files", "name": "b", "dest": "/opt/./a"}],
     "nats_object_fetch[1] (files/b): dest /opt/a (the file an object is written to) is declared twice, also at "
     "nats_object_fetch[0] (files/a.csv)"),
    ([STORE], [{"bucket": "files", "name": "a.csv", "dest": "/a", "own": "x"}],
     "nats_object_fetch[0] (files/a.csv): unknown option own; jetstream_object_fetch takes bucket, dest, mode, name, account, group, owner"),
])
def test_object_store_checks_name_the_item_and_the_field(stores, fetch, message):
    with pytest.raises(_fleet.FleetError, match=re.escape("hub: " + message)):
        _fleet.check(ACCOUNTS, None, None, None, where="hub: ", object_stores=stores, object_fetch=fetch,
                     files_dir="/inv", default_account="A")


def test_object_store_checks_accept_good_items(tmp_path):
    (tmp_path / "files").mkdir()
    (tmp_path / "files/fw.bin").write_bytes(b"\0" * 10)
    stores = [{"name": "files", "account": "A", "replicas": 3, "objects": [
        {"name": "fw.bin", "src": "files/fw.bin", "metadata": {"board": "x"}}, {"name": "CHANNEL", "content": "stable"}]},
        {"name": "copy", "mirror": {"name": "files", "domain": "hub"}}]
    fetch = [{"bucket": "copy", "name": "fw.bin", "dest": "/opt/fw.bin", "mode": 0o640, "owner": "app", "group": "app"},
             {"bucket": "files", "name": "CHANNEL", "dest": "/etc/channel", "account": "A"}]
    assert _fleet.check(ACCOUNTS, None, None, None, object_stores=stores, object_fetch=fetch,
                        files_dir=str(tmp_path), default_account="A") == 4 + 2 + 2


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
        "s3": {"nats_object_fetch": [{"bucket": "files", "name": "models/v2.onnx", "dest": "/srv/m.onnx", "mode": "640"}]},
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
        "s2": [dict(file, src=model, dest="/srv/m.onnx", path="/srv/m.onnx", mode="0644")],
        # three digits are the four a host's mode is read as: the copy converges
        "s3": [dict(file, src=model, dest="/srv/m.onnx", path="/srv/m.onnx", mode="0640")]}
    with pytest.raises(_fleet.FleetError, match=re.escape("s1: nats_object_fetch (files/x).account: account 'B' has no user")):
        _fleet.object_fetches({"s1": {"nats_object_fetch": [{"bucket": "files", "name": "x", "dest": "/x", "account": "B"}]}},
                              ["s1"], "TEST", "/c", {"TEST": "leaf"}, "/o")


def test_the_lab_object_stores_pass_the_checks():
    base, fleet = lab_vars()
    hub = yaml.safe_load(open(os.path.join(base, "hub.yml")))
    spokes = yaml.safe_load(open(os.path.join(base, "spokes.yml")))
    default = fleet["nats_fleet_default_account"]
    assert _fleet.check(fleet["nats_accounts"], None, None, None, object_stores=hub["nats_object_stores"],
                        default_account=default) >= 1
    assert _fleet.check(fleet["nats_accounts"], None, None, None, object_stores=spokes["nats_object_stores"],
                        object_fetch=spokes["nats_object_fetch"], default_account=default) >= 2
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


# --- the preflight's promise: a mistake in any item fails before the first change -----------------------------

FLEET_ACCOUNTS = [{"name": "TEST", "users": [{"name": "u"}]}, {"name": "OTHER", "users": [{"name": "o"}]}]
ORDERS = {"name": "orders", "subjects": ["orders.>"]}
FW = {"name": "fw", "objects": [{"name": "a", "content": "a"}, {"name": "b", "content": "b"}]}


@pytest.mark.parametrize("fleet, message", [
    # each item as the module that converges it checks it
    (dict(kv_buckets=[{"name": "a.b"}]), "nats_kv_buckets[0] (a.b): key-value bucket name: 'a.b' is not valid"),
    (dict(kv_buckets=[{"name": "cfg", "history": 65}]), "nats_kv_buckets[0] (cfg): bucket 'cfg': history: 65"),
    (dict(kv_buckets=[{"name": "cfg", "entries": {"bad key": 1}}]),
     "nats_kv_buckets[0] (cfg): bucket 'cfg': entries: 'bad key' is not a valid key"),
    (dict(kv_buckets=[{"name": "cfg", "ttl": "a week"}]), "nats_kv_buckets[0] (cfg): bucket 'cfg': ttl: 'a week' is not"),
    (dict(streams=[ORDERS], consumers=[{"stream": "orders", "name": "c", "max_deliver": 0}]),
     "nats_consumers[0] (c): consumer 'c' on stream 'orders': max_deliver: 0 is not allowed"),
    (dict(streams=[ORDERS], consumers=[{"stream": "orders", "name": "c", "ack_wait": "30s", "backoff": ["1s"]}]),
     "nats_consumers[0] (c): consumer 'c' on stream 'orders': ack_wait: the server replaces it with the first backoff"),
    (dict(streams=[ORDERS], consumers=[{"stream": "orders", "name": "c", "filter_subject": "a", "filter_subjects": ["b"]}]),
     "nats_consumers[0] (c): parameters are mutually exclusive: filter_subject|filter_subjects"),
    (dict(object_stores=[FW], object_fetch=[{"bucket": "fw", "name": "a", "dest": "/a", "mode": -1}]),
     "nats_object_fetch[0] (fw/a): mode: -1"),
    (dict(accounts=[{"name": "BAD NAME", "users": [{"name": "u"}]}]),
     "nats_accounts[0] (BAD NAME): account 'BAD NAME' of operator 'OP': account name: 'BAD NAME' is not a valid name"),
    (dict(accounts=[{"name": "TEST", "users": [{"name": "u", "permissions": {"pub": {"allow": ["a..b"]}}}]}]),
     "nats_accounts[0] (TEST).users[0] (u): user 'u' of account 'TEST': permissions.pub.allow: 'a..b' is not a subject"),
    (dict(accounts=[{"name": "TEST", "limits": {"conn": -5}}]),
     "nats_accounts[0] (TEST): account 'TEST' of operator 'OP': limits.conn: -5: use -1 for unlimited"),
    # each list as a whole
    (dict(streams=[{"name": "a", "subjects": ["a.>"]}, {"name": "b", "subjects": ["a.b"]}]),
     "nats_streams[1] (b): stream 'b': subjects: 'a.b' overlaps 'a.>' of stream 'a'"),
    (dict(streams=[{"name": "a", "subjects": ["a"]}, {"name": "a", "subjects": ["b"]}]),
     "nats_streams[1] (a): stream 'a' in account 'TEST' is declared more than once"),
    (dict(streams=[{"name": "KV_cfg", "subjects": ["c"]}], kv_buckets=[{"name": "cfg"}]),
     "nats_kv_buckets[0] (cfg): stream 'KV_cfg' in account 'TEST' is declared more than once"),
    (dict(streams=[ORDERS], consumers=[{"stream": "orders", "name": "c"}, {"stream": "orders", "name": "c", "max_deliver": 2}]),
     "nats_consumers[1] (c): consumer 'c' on stream 'orders' in account 'TEST' is declared twice, also at nats_consumers[0]"),
    (dict(object_stores=[FW], object_fetch=[{"bucket": "fw", "name": "a", "dest": "/a"},
                                            {"bucket": "fw", "name": "b", "dest": "/a"}]),
     "nats_object_fetch[1] (fw/b): dest /a (the file an object is written to) is declared twice, also at "
     "nats_object_fetch[0] (fw/a)"),
    (dict(accounts=[{"name": "TEST", "users": [{"name": "u"}, {"name": "u"}]}]),
     "nats_accounts[0] (TEST).users[1] (u): listed twice, first at nats_accounts[0] (TEST).users[0]"),
    (dict(accounts=FLEET_ACCOUNTS + [{"name": "OTHER"}]), "nats_accounts[2] (OTHER): listed twice, first at nats_accounts[1]"),
    (dict(streams=[{"name": "a", "mirror": {"name": "b"}}, {"name": "b", "sources": [{"name": "a"}]}]),
     "nats_streams[1] (b): sources[0]: copies in a cycle: stream 'b' in account 'TEST' copies from stream 'a' in account "
     "'TEST', which copies from stream 'b' in account 'TEST'"),
    # what the items name is declared
    (dict(exports=[{"account": "TEST", "name": "e", "subject": "e.>", "importers": [{"account": "NOPE"}]}]),
     "nats_exports[0] (TEST e): operator 'OP': importers[0]: account 'NOPE' is not in the store"),
    (dict(default_account="NOPE"), "nats_fleet_default_account: 'NOPE' is not in nats_accounts (TEST, OTHER)"),
    (dict(streams=[dict(ORDERS, account="NOPE")]), "nats_streams[0] (orders).account: 'NOPE' is not in nats_accounts"),
    (dict(accounts=FLEET_ACCOUNTS + [{"name": "EMPTY"}], kv_buckets=[{"name": "cfg", "account": "EMPTY"}]),
     "nats_kv_buckets[0] (cfg).account: account 'EMPTY' has no user to converge its streams with"),
    (dict(streams=[ORDERS], consumers=[{"stream": "order", "name": "c"}]),
     "nats_consumers[0] (c).stream: 'order' is not a stream this domain declares present in account 'TEST'"),
    (dict(streams=[ORDERS], consumers=[{"stream": "orders", "name": "c", "account": "OTHER"}]),
     "nats_consumers[0] (c).stream: 'orders' is not a stream this domain declares present in account 'OTHER'"),
    (dict(object_stores=[FW], object_fetch=[{"bucket": "fw", "name": "a", "dest": "/a", "account": "OTHER"}]),
     "nats_object_fetch[0] (fw/a).bucket: 'fw' is not in this domain's nats_object_stores in account 'OTHER' (none)"),
])
def test_a_mistake_in_any_item_fails_before_the_first_change(fleet, message):
    """What a module would refuse (the same functions), and what a later stage needs, refused by the preflight."""
    fleet = dict(dict(accounts=FLEET_ACCOUNTS, default_account="TEST", operator="OP", system_account="SYS"), **fleet)
    with pytest.raises(_fleet.FleetError) as raised:
        _fleet.check(fleet.pop("accounts"), fleet.pop("exports", None), where="hub: ", files_dir="/inv", **fleet)
    assert str(raised.value).startswith("hub: " + message), str(raised.value)


def test_what_is_right_passes_and_what_is_not_given_is_not_checked():
    assert _fleet.check(FLEET_ACCOUNTS, [{"account": "SYS", "name": "e", "subject": "e.>", "importers": [{"account": "TEST"}]}],
                        [ORDERS, dict(ORDERS, account="OTHER"), {"name": "agg", "sources": [
                            {"name": "orders", "filter_subject": "orders.a"}], "subjects": ["agg"]}],
                        [{"stream": "orders", "name": "c"}, {"stream": "KV_cfg", "name": "c"}, {"stream": "OBJ_fw", "name": "c"}],
                        kv_buckets=[{"name": "cfg"}], object_stores=[FW],
                        object_fetch=[{"bucket": "fw", "name": "a", "dest": "/a"},
                                      {"bucket": "fw", "name": "a", "dest": "/b"}],
                        default_account="TEST", system_account="SYS") == 4 + 1 + 3 + 3 + 1 + 1 + 2
    # the streams stage alone checks without the default account (stream_batches resolves it with the real one)
    assert _fleet.check(FLEET_ACCOUNTS, None, [ORDERS], [{"stream": "orders", "name": "c", "account": "TEST"}],
                        object_stores=[FW], object_fetch=[{"bucket": "fw", "name": "a", "dest": "/a", "account": "TEST"}]
                        ) == 4 + 4
    # no account declared at all: the accounts the items name are not known
    assert _fleet.check([], None, [ORDERS], default_account="") == 1


def test_copies_in_a_cycle_across_domains_are_refused_with_their_domains():
    hostvars = {
        "hub-1": {"nats_server_jetstream_domain": "hub", "nats_streams": [
            {"name": "agg", "sources": [{"name": "t", "domain": "s1"}], "subjects": ["agg"]}]},
        "s1-1": {"nats_server_jetstream_domain": "s1", "nats_streams": [
            {"name": "t", "subjects": ["t"], "sources": [{"name": "agg", "domain": "hub"}]}]},
    }
    for host in hostvars:
        hostvars[host].update(nats_accounts=FLEET_ACCOUNTS, nats_fleet_default_account="TEST")
    with pytest.raises(_fleet.FleetError) as raised:
        _fleet.check_hosts(hostvars, ["hub-1", "s1-1"])
    assert str(raised.value) == (
        "s1: nats_streams[0] (t): sources[0]: copies in a cycle: stream 't' in domain 's1' copies from stream 'agg' in "
        "domain 'hub', which copies from stream 't' in domain 's1'; make one of them copy from outside the cycle "
        "(nats-server refuses a cycle of copies)")
    # a source filtered to subjects the copy does not hold takes nothing round it; another account's stream is
    # another stream
    hostvars["s1-1"]["nats_streams"][0]["sources"][0]["filter_subject"] = "agg.x"
    assert _fleet.check_hosts(hostvars, ["hub-1", "s1-1"]) == {"hub-1": 5, "s1-1": 5}
    hostvars["s1-1"]["nats_streams"][0].update(sources=[{"name": "agg", "domain": "hub"}], account="OTHER")
    assert _fleet.check_hosts(hostvars, ["hub-1", "s1-1"]) == {"hub-1": 5, "s1-1": 5}


def test_the_preflight_runs_the_modules_own_checks(monkeypatch):
    """The preflight's checks are the modules' functions, not copies of their rules: a check added to one of them
    is the preflight's too."""
    import functools
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import domain, object_transfer
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, bulk, export, user
    # each JetStream kind: jetstream_domain's checker of the list the streams stage puts it in, with its own check
    for kind, key, _arg in _fleet.DOMAIN_LISTS:
        preflight, module = _fleet.checker(kind), domain.item_checkers()[key]
        assert set(preflight.spec) == set(module.spec) - {"creds"} and preflight.accepted == _fleet.FLEET_KEYS[kind]
        assert preflight.validator._mutually_exclusive == module.validator._mutually_exclusive
        if kind == "fetch":  # the same function; the dest is on a host, not on the controller
            assert isinstance(preflight.then, functools.partial)
            assert preflight.then.func is module.then.func is object_transfer.checked_fetch_item
    calls = []

    def spy(owner, name):
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *args, **kwargs: calls.append((name, args, kwargs)) or real(*args, **kwargs))

    spy(domain, "checked_lists")
    spy(bulk, "checked_items")
    spy(bulk, "check_references")
    _fleet.check(FLEET_ACCOUNTS, [{"account": "TEST", "name": "e", "subject": "e.>"}], [ORDERS],
                 [{"stream": "orders", "name": "c"}], kv_buckets=[{"name": "cfg"}], object_stores=[FW],
                 object_fetch=[{"bucket": "fw", "name": "a", "dest": "/a"}], default_account="TEST", system_account="SYS")
    kinds = [(kwargs["kind"], args[2], kwargs) for name, args, kwargs in calls if name == "checked_items"]
    # nsc_store's own: each kind's spec, check_item and identity, then the references, with the system account
    assert [kind for kind, _spec, _kwargs in kinds] == [account, user, user, export]
    assert all(spec is kind.ARGUMENT_SPEC for kind, spec, _kwargs in kinds)
    assert kinds[1][2]["mutually_exclusive"] == user.CONSTRAINTS["mutually_exclusive"]
    assert [args[1] for name, args, _kwargs in calls if name == "check_references"] == [["SYS"]]
    # jetstream_domain's own checks of the lists as wholes, on the items as the streams stage gives them
    [(_name, (items, _warnings), kwargs)] = [call for call in calls if call[0] == "checked_lists"]
    assert [item["name"] for item in items["streams"]] == ["orders"] and items["fetches"][0]["mode"] == 0o644
    assert kwargs["places"]["consumers"] == ["nats_consumers[0] (c)"]


def test_jetstream_domain_runs_the_same_list_checks(monkeypatch):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import domain
    calls = []
    real = domain.checked_lists
    monkeypatch.setattr(domain, "checked_lists", lambda *args, **kwargs: calls.append(args) or real(*args, **kwargs))

    class Run(object):  # what Domain reads of its module run
        params = dict(creds=None, domain="hub")
        check_mode = False

        def warn(self, text):
            pass

    items = domain.checked_items(dict(streams=[ORDERS], kv_buckets=[], object_stores=[], consumers=[], fetches=[]))
    domain.Domain(Run(), items)
    assert calls and calls[0][0] is items


def test_an_object_of_any_name_is_cached_inside_its_stores_directory():
    fetch = {"s1": {"nats_object_fetch": [{"bucket": "fw", "name": name, "dest": "/opt/%d" % index}
                                          for index, name in enumerate(["..", ".", "a/../b", ".hidden"])]}}
    plan = _fleet.object_fetches(fetch, ["s1"], "TEST", "/c", {"TEST": "u"}, "/cache", "spoke")
    assert [f["cache"] for f in plan["fetches"]] == [
        "/cache/spoke/TEST/fw/%2E%2E", "/cache/spoke/TEST/fw/%2E", "/cache/spoke/TEST/fw/a%2F..%2Fb",
        "/cache/spoke/TEST/fw/.hidden"]
