"""Leaf remote options of nats-server 2.12 to 2.15, feature flags, and reload versus restart for remotes."""

import json

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

from test_server_config import settings

HUB_WS = "ws://hub.example.net:8080"


def remote_conf(version=None, **remote):
    remote.setdefault("url", HUB_WS)
    conf = sc.build_config(settings(leafnode_remotes=[remote]))
    if version:
        conf, _dropped = sc.prune_for_version(conf, version)
    return conf["leafnodes"]["remotes"][0]


# --------------------------------------------------------------------------
# feature flags


def test_feature_flags_render_sorted_on_a_server_that_knows_them():
    conf = sc.build_config(settings(feature_flags={"js_raft_delete_range": False, "js_ack_fc_v2": True}))
    assert list(conf["feature_flags"].items()) == [("js_ack_fc_v2", True), ("js_raft_delete_range", False)]
    assert "feature_flags {\n  js_ack_fc_v2: true\n  js_raft_delete_range: false\n}" in sc.render(conf)
    assert sc.prune_for_version(conf, "2.14.0") == (conf, [])


@pytest.mark.parametrize("version, kept, dropped", [
    ("2.9.10", None, ["feature_flags (needs nats-server 2.14.0)"]),
    ("2.12.4", None, ["feature_flags (needs nats-server 2.14.0)"]),
    ("2.14.5", {"js_ack_fc_v2": True}, ["feature_flags.js_snapshot_sources (needs nats-server 2.15.0)"]),
    ("2.15.1", {"js_ack_fc_v2": True, "js_snapshot_sources": True}, []),
])
def test_feature_flags_are_left_out_for_a_server_too_old_for_them(version, kept, dropped):
    conf = sc.build_config(settings(feature_flags={"js_ack_fc_v2": True, "js_snapshot_sources": True}))
    pruned, found = sc.prune_for_version(conf, version)
    assert pruned.get("feature_flags") == kept
    assert found == dropped


@pytest.mark.parametrize("flags, message", [
    ({"js_ack_v2": True}, "nats_server_feature_flags: unknown feature flag 'js_ack_v2' (known: js_ack_fc_v2 "
                          "(nats-server 2.14.0), js_raft_delete_range (nats-server 2.14.0), js_snapshot_sources "
                          "(nats-server 2.15.0))"),
    ({"js_ack_fc_v2": "yes"}, "nats_server_feature_flags.js_ack_fc_v2: 'yes' is not a boolean"),
    (["js_ack_fc_v2"], "nats_server_feature_flags: expected a mapping"),
])
def test_feature_flags_refuse_unknown_names_and_values(flags, message):
    with pytest.raises(sc.ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.").replace("$", r"\$")):
        sc.build_config(settings(feature_flags=flags))


def test_no_feature_flags_render_no_block():
    assert "feature_flags" not in sc.build_config(settings(feature_flags={}))


def test_feature_flags_restart_the_server():
    before = sc.restart_fingerprint(sc.build_config(settings()), "2.15.1")
    after = sc.restart_fingerprint(sc.build_config(settings(feature_flags={"js_ack_fc_v2": True})), "2.15.1")
    assert sc.fingerprint_needs_restart(json.dumps(before), after)


# --------------------------------------------------------------------------
# leaf remote options


def test_every_new_remote_option_renders_on_the_newest_server():
    out = remote_conf("2.15.1", disabled=True, ignore_discovered_servers=True, isolate_leafnode_interest=True,
                      request_isolation=True, ws_compression=True, ws_no_masking=True,
                      proxy={"url": "http://proxy:3128", "username": "u", "password": "secret", "timeout": "5s"})
    assert out == {"urls": [HUB_WS], "disabled": True, "ignore_discovered_servers": True,
                   "isolate_leafnode_interest": True, "request_isolation": True, "ws_compression": True,
                   "ws_no_masking": True,
                   "proxy": {"url": "http://proxy:3128", "username": "u", "password": "secret", "timeout": "5s"}}


def test_false_remote_options_are_the_default_and_left_out():
    out = remote_conf(None, disabled=False, ignore_discovered_servers=False, request_isolation=False,
                      ws_compression=False)
    assert out == {"urls": [HUB_WS]}


@pytest.mark.parametrize("option, value, minimum", [
    ("disabled", True, "2.12.0"),
    ("isolate_leafnode_interest", True, "2.12.0"),
    ("request_isolation", True, "2.12.0"),
    ("proxy", {"url": "http://proxy:3128"}, "2.12.1"),
    ("ignore_discovered_servers", True, "2.14.0"),
    ("dial_timeout", "5s", "2.14.5"),
])
def test_a_remote_option_a_server_is_too_old_for_is_refused_naming_the_version(option, value, minimum):
    conf = sc.build_config(settings(leafnode_remotes=[{"url": "nats-leaf://hub:7422"}, {"url": HUB_WS, option: value}]))
    older = {"2.12.0": "2.11.9", "2.12.1": "2.12.0", "2.14.0": "2.12.15", "2.14.5": "2.14.4"}[minimum]
    with pytest.raises(sc.ConfigError) as error:
        sc.prune_for_version(conf, older)
    assert str(error.value).startswith("nats_server_leafnode_remotes[1].%s needs nats-server %s or later, and this "
                                       "host runs %s" % (option, minimum, older))
    pruned, dropped = sc.prune_for_version(conf, minimum)
    assert pruned["leafnodes"]["remotes"][1][option] == value and dropped == []


def test_websocket_options_are_known_to_every_supported_server():
    out = remote_conf("2.9.10", ws_compression=True, ws_no_masking=True)
    assert out["ws_compression"] is True and out["ws_no_masking"] is True


def test_websocket_remotes_from_a_hub_group():
    conf = sc.build_config(settings(leafnode_remotes=[{"hub_group": "hub", "scheme": "wss", "port": 8443,
                                                       "ws_compression": True, "credentials_src": "files/edge.creds",
                                                       "account": "EDGE"}]))
    remote = conf["leafnodes"]["remotes"][0]
    assert remote["urls"] == ["wss://10.0.0.1:8443", "wss://10.0.0.2:8443", "wss://hub3.example.net:8443"]
    assert remote["credentials"] == "/etc/nats-server/creds/EDGE.creds" and remote["ws_compression"] is True


@pytest.mark.parametrize("remote, message", [
    ({"url": "nats-leaf://hub:7422", "ws_compression": True},
     r"nats_server_leafnode_remotes\[0\]\.ws_compression: applies to websocket connections"),
    ({"urls": [HUB_WS, "nats-leaf://hub:7422"]},
     r"nats_server_leafnode_remotes\[0\]: websocket \(ws://, wss://\) and other urls in one remote"),
    ({"url": HUB_WS, "disabled": "yes"}, r"nats_server_leafnode_remotes\[0\]\.disabled: 'yes' is not a boolean"),
    ({"url": "nats-leaf://u:pw@hub:7422", "proxy": {"url": "http://proxy:3128"}},
     r"nats_server_leafnode_remotes\[0\]\.proxy: nats-server sends only websocket connections through a proxy, "
     r"and nats-leaf://\*\*\*@hub:7422 is not"),
    ({"url": HUB_WS, "proxy": {"url": "socks5://proxy:1080"}},
     r"nats_server_leafnode_remotes\[0\]\.proxy\.url: 'socks5://proxy:1080' is not an http:// or https:// URL"),
    ({"url": HUB_WS, "proxy": {"url": "http://proxy:3128", "username": "u"}},
     r"nats_server_leafnode_remotes\[0\]\.proxy: username and password go together"),
    ({"url": HUB_WS, "proxy": {"url": "http://proxy:3128", "timeout": 5}},
     r"nats_server_leafnode_remotes\[0\]\.proxy\.timeout: 5 is not a duration"),
    ({"url": HUB_WS, "proxy": {"url": "http://proxy:3128", "user": "u"}},
     r"nats_server_leafnode_remotes\[0\]\.proxy: unknown option\(s\) user"),
    ({"url": HUB_WS, "proxy": "http://proxy:3128"}, r"nats_server_leafnode_remotes\[0\]\.proxy: expected a mapping"),
])
def test_bad_remote_options_are_refused_naming_the_remote_and_field(remote, message):
    with pytest.raises(sc.ConfigError, match="^" + message):
        sc.build_config(settings(leafnode_remotes=[remote]))


# --------------------------------------------------------------------------
# reload or restart


def fingerprint(version, remotes):
    return sc.restart_fingerprint(sc.build_config(settings(leafnode_remotes=remotes)), version)


A = {"url": "nats-leaf://hub1:7422", "account": "A"}
B = {"url": "nats-leaf://hub2:7422", "account": "B"}


@pytest.mark.parametrize("version, before, after, restart", [
    # 2.14+: a remote added or removed reloads
    ("2.14.0", [A], [A, B], False),
    ("2.15.1", [A, B], [B], False),
    ("2.15.1", [A], [], False),
    ("2.15.1", [], [A], False),
    ("2.15.1", [B, A], [A, B], False),
    # a remote's URL, account or credentials changed: removed and added
    ("2.15.1", [A], [dict(A, url="nats-leaf://hub3:7422")], False),
    # changed in place: a restart, but for disabled, compression and tls files
    ("2.15.1", [A], [dict(A, hub=True)], True),
    ("2.15.1", [A], [dict(A, deny_imports=["x.>"])], True),
    ("2.15.1", [A], [dict(A, ignore_discovered_servers=True)], True),
    ("2.15.1", [A], [dict(A, disabled=True)], False),
    ("2.15.1", [A], [dict(A, compression="s2_fast")], False),
    # older servers: any change of the list restarts
    ("2.12.15", [A], [A, B], True),
    ("2.9.10", [A, B], [A], True),
    ("2.12.15", [A], [dict(A, disabled=True)], False),
    ("2.9.10", [A], [A], False),
])
def test_remotes_added_or_removed_reload_from_2_14(version, before, after, restart):
    old, new = fingerprint(version, before), fingerprint(version, after)
    assert sc.fingerprint_needs_restart(json.dumps(old), new) is restart


def test_the_remote_keys_of_a_fingerprint_carry_no_password():
    fp = fingerprint("2.15.1", [{"url": "nats-leaf://user:hunter2@hub1:7422"}])
    key = list(fp["leafnodes"]["remotes"])[0]
    assert key.startswith("remote-") and "hunter2" not in key


def test_a_change_outside_the_remotes_restarts_even_with_remotes_added():
    old = sc.restart_fingerprint(sc.build_config(settings(leafnode_remotes=[A])), "2.15.1")
    new = sc.restart_fingerprint(sc.build_config(settings(leafnode_remotes=[A, B], jetstream_domain="x")), "2.15.1")
    assert sc.fingerprint_needs_restart(json.dumps(old), new) is True


@pytest.mark.parametrize("previous", ["", "not json", "[]", json.dumps({"leafnodes": {"remotes": []}})])
def test_no_readable_previous_fingerprint_restarts(previous):
    assert sc.fingerprint_needs_restart(previous, fingerprint("2.15.1", [A])) is True


def test_a_fingerprint_recorded_as_a_list_is_matched_remote_by_remote():
    """A fingerprint recorded for an older server, or before remotes reloaded: the same remotes need no restart."""
    old = json.dumps(fingerprint("2.12.15", [A]))
    assert sc.fingerprint_needs_restart(old, fingerprint("2.15.1", [A])) is False
    assert sc.fingerprint_needs_restart(old, fingerprint("2.15.1", [A, B])) is False
    assert sc.fingerprint_needs_restart(old, fingerprint("2.15.1", [dict(A, hub=True)])) is True


def test_version_problems_name_every_remote_option_a_version_is_too_old_for():
    conf = sc.build_config(settings(leafnode_remotes=[{"url": HUB_WS, "disabled": True, "proxy": {"url": "http://p:1"}},
                                                      {"url": HUB_WS, "account": "B", "ignore_discovered_servers": True}]))
    problems = sc.version_problems(conf, "nats-server: v2.12.0")
    named = ["nats_server_leafnode_remotes[0].proxy", "nats_server_leafnode_remotes[1].ignore_discovered_servers"]
    assert [p.split(" needs")[0] for p in problems] == named
    assert sc.version_problems(conf, "2.14.0") == []
    assert sc.version_problems(conf, "") == [] and sc.version_problems(conf, "not a version") == []


# --------------------------------------------------------------------------
# dial_timeout (nats-server 2.14.5)


def test_dial_timeout_renders_as_a_duration():
    out = remote_conf("2.15.1", url="nats-leaf://hub:7422", dial_timeout="5s")
    assert out == {"urls": ["nats-leaf://hub:7422"], "dial_timeout": "5s"}
    assert 'dial_timeout: "5s"' in sc.render({"leafnodes": {"remotes": [out]}})
    assert "dial_timeout" not in remote_conf("2.15.1", url="nats-leaf://hub:7422", dial_timeout="")


@pytest.mark.parametrize("value", [5, "5", "five seconds", True])
def test_dial_timeout_must_be_a_duration(value):
    with pytest.raises(sc.ConfigError, match=r"^nats_server_leafnode_remotes\[0\]\.dial_timeout: .* is not a "
                                             r"duration"):
        remote_conf(None, url="nats-leaf://hub:7422", dial_timeout=value)


@pytest.mark.parametrize("version", ["2.9.10", "2.12.15", "2.14.0", "2.14.4"])
def test_dial_timeout_is_refused_before_2_14_5(version):
    conf = sc.build_config(settings(leafnode_remotes=[{"url": "nats-leaf://hub:7422", "dial_timeout": "5s"}]))
    problems = sc.version_problems(conf, version)
    assert len(problems) == 1 and problems[0].startswith(
        "nats_server_leafnode_remotes[0].dial_timeout needs nats-server 2.14.5 or later, and this host runs %s"
        % version)


def test_a_changed_dial_timeout_restarts():
    remote = {"url": "nats-leaf://hub:7422"}
    before = sc.restart_fingerprint(sc.build_config(settings(leafnode_remotes=[remote])), "2.15.1")
    after = sc.restart_fingerprint(sc.build_config(settings(leafnode_remotes=[dict(remote, dial_timeout="5s")])),
                                   "2.15.1")
    assert sc.fingerprint_needs_restart(json.dumps(before), after)
