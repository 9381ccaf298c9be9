import os

import pytest
from ansible.vars.hostvars import HostVars

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

HOSTVARS = {
    "hub1": {"ansible_default_ipv4": {"address": "10.0.0.1"}},
    "hub2": {"ansible_default_ipv4": {"address": "10.0.0.2"}, "nats_server_cluster_port": 6333},
    "hub3": {"nats_server_advertise_host": "hub3.example.net"},
    "edge1": {"ansible_host": "192.0.2.7"},
}
GROUPS = {"hub": ["hub1", "hub2", "hub3"], "edge": ["edge1"]}
ROUTE_PASSWORD = "p" * 24
GATEWAY_PASSWORD = "gw-0123456789abcdef"
ROUTE_AUTH = "route:%s@" % ROUTE_PASSWORD


def settings(**over):
    s = {
        "name": "hub1", "inventory_hostname": "hub1", "groups": GROUPS, "hostvars": HOSTVARS,
        "config_dir": "/etc/nats-server", "listen_host": "0.0.0.0", "port": 4222,
        "http_host": "127.0.0.1", "http_port": 8222, "cluster_port": 6222,
        "jetstream_enabled": True, "jetstream_store_dir": "/var/lib/nats-server",
        # TLS has tests of its own (TLS below); route authentication is always on
        "insecure_plaintext": ["all"], "cluster_password": ROUTE_PASSWORD, "gateway_password": GATEWAY_PASSWORD,
        # authentication has tests of its own (below)
        "allow_anonymous": True,
    }
    s.update(over)
    return s


def test_minimal_config_has_listeners_and_jetstream():
    conf = sc.build_config(settings())
    assert conf["server_name"] == "hub1"
    assert conf["listen"] == "0.0.0.0:4222"
    assert conf["http"] == "127.0.0.1:8222"
    assert conf["jetstream"] == {"store_dir": "/var/lib/nats-server"}
    assert "cluster" not in conf and "leafnodes" not in conf


def test_cluster_routes_come_from_the_group_at_each_peers_address_and_port():
    conf = sc.build_config(settings(cluster_group="hub", cluster_name="hub"))
    assert conf["cluster"]["name"] == "hub"
    assert conf["cluster"]["listen"] == "0.0.0.0:6222"
    assert conf["cluster"]["routes"] == [
        "nats-route://%s10.0.0.2:6333" % ROUTE_AUTH, "nats-route://%shub3.example.net:6222" % ROUTE_AUTH]


class PeersOnly(HostVars):
    """Every host's variables, as ansible-core's lazy hostvars: reading one host's is fine, walking all
    of them (rendering every host's variables, for every host of the play) is what the filter must not do."""

    def __init__(self, data):  # pylint: disable=super-init-not-called
        self.data = data

    def __contains__(self, name):
        return name in self.data

    def __getitem__(self, name):
        return self.data[name]

    def __iter__(self):
        raise AssertionError("every host's variables were walked")

    def __len__(self):
        return len(self.data)  # counting the hosts reads no variables


def test_the_config_filter_reads_only_the_peers_variables():
    from ansible_collections.nats_edge.fleet.plugins.filter.nats_server import nats_server_config
    conf = nats_server_config(settings(cluster_group="hub", cluster_name="hub", hostvars=PeersOnly(HOSTVARS)))
    assert conf["cluster"]["routes"] == [
        "nats-route://%s10.0.0.2:6333" % ROUTE_AUTH, "nats-route://%shub3.example.net:6222" % ROUTE_AUTH]


def test_unknown_cluster_group_names_the_field():
    with pytest.raises(sc.ConfigError, match="nats_server_cluster_group: group 'nope'"):
        sc.build_config(settings(cluster_group="nope", cluster_name="x"))


def test_leaf_remote_from_hub_group_with_pushed_credentials():
    conf = sc.build_config(settings(
        name="edge1", inventory_hostname="edge1", jetstream_domain="edge",
        leafnode_remotes=[{"hub_group": "hub", "account": "EDGE", "credentials_src": "files/edge.creds"},
                          {"url": "nats-leaf://hub.example.net:7422", "credentials": "/x/y.creds"}],
    ))
    first, second = conf["leafnodes"]["remotes"]
    assert first["urls"] == ["nats-leaf://10.0.0.1:7422", "nats-leaf://10.0.0.2:7422",
                             "nats-leaf://hub3.example.net:7422"]
    assert first["account"] == "EDGE"
    assert first["credentials"] == "/etc/nats-server/creds/EDGE.creds"
    assert second == {"urls": ["nats-leaf://hub.example.net:7422"], "credentials": "/x/y.creds"}
    assert conf["jetstream"]["domain"] == "edge"


def test_leaf_remote_rejects_unknown_option():
    with pytest.raises(sc.ConfigError, match=r"nats_server_leafnode_remotes\[0\]: unknown option\(s\) acount"):
        sc.build_config(settings(leafnode_remotes=[{"url": "nats-leaf://h:7422", "acount": "A"}]))


def test_leaf_remote_without_urls_is_an_error():
    with pytest.raises(sc.ConfigError, match=r"remotes\[0\]: no urls"):
        sc.build_config(settings(leafnode_remotes=[{"account": "A"}]))


def test_extra_config_merges_deeply_and_null_removes():
    conf = sc.build_config(settings(
        extra_config={"jetstream": {"max_outstanding_catchup": "64MB"}, "http": None, "ping_interval": "20s"}))
    assert conf["jetstream"]["max_outstanding_catchup"] == "64MB"
    assert conf["jetstream"]["store_dir"] == "/var/lib/nats-server"
    assert "http" not in conf
    assert conf["ping_interval"] == "20s"


@pytest.mark.parametrize("value,expected", [
    (1024, 1024), ("1K", 1000), ("1KB", 1024), ("2GiB", 2 * 1024**3), ("512MB", 512 * 1024**2),
    ("1.5G", 1500 * 1000**2), (-1, -1),
])
def test_sizes_follow_the_server_parser(value, expected):
    assert sc.parse_size(value) == expected


@pytest.mark.parametrize("value", ["lots", "12XB", True, -5])
def test_bad_sizes_name_the_field(value):
    with pytest.raises(sc.ConfigError, match="max_file_store"):
        sc.parse_size(value, "max_file_store")


def test_durations_must_be_strings():
    assert sc.check_duration("1h30m") == "1h30m"
    assert sc.duration_seconds("1m30s") == 90
    with pytest.raises(sc.ConfigError, match="lame_duck_duration"):
        sc.build_config(settings(lame_duck_duration=120))


@pytest.mark.parametrize("value", ["10s", "29s", "29999ms", "0s"])
def test_a_lame_duck_shorter_than_the_server_accepts_is_refused(value):
    with pytest.raises(sc.ConfigError, match=r"nats_server_lame_duck_duration: '%s' is below 30s" % value):
        sc.build_config(settings(lame_duck_duration=value))


@pytest.mark.parametrize("value", ["30s", "30000ms", "2m", "1h"])
def test_a_lame_duck_of_30s_or_more_passes(value):
    assert sc.build_config(settings(lame_duck_duration=value))["lame_duck_duration"] == value


@pytest.mark.parametrize("arch,expected", [
    ("x86_64", "amd64"), ("aarch64", "arm64"), ("armv7l", "arm7"), ("armv6l", "arm6"), ("s390x", "s390x"),
    # nats_server_arch may name the upstream build itself
    ("arm64", "arm64"), ("arm7", "arm7"), ("arm6", "arm6"), ("amd64", "amd64"),
])
def test_architectures_map_to_upstream_builds(arch, expected):
    assert sc.upstream_arch(arch) == expected


def test_unknown_architecture_is_named():
    with pytest.raises(sc.ConfigError, match="'sparc64'"):
        sc.upstream_arch("sparc64")


def test_versions_parse_from_server_output():
    assert sc.parse_version("nats-server: v2.9.10") == (2, 9, 10)
    assert sc.parse_version("2.11.0-RC.1") == (2, 11, 0)


def test_old_server_loses_newer_options_and_says_which():
    conf = sc.build_config(settings(
        jetstream_sync_interval="2m",
        leafnodes_port=7422,
        leafnode_remotes=[{"url": "nats-leaf://h:7422", "compression": "s2_auto"}],
        extra_config={"jetstream": {"max_buffered_msgs": 10000}, "cluster": {"name": "c", "pool_size": 3}},
    ))
    old, dropped = sc.prune_for_version(conf, "2.9.10")
    assert "sync_interval" not in old["jetstream"] and "max_buffered_msgs" not in old["jetstream"]
    assert "compression" not in old["leafnodes"]["remotes"][0]
    assert "pool_size" not in old["cluster"]
    assert "jetstream.sync_interval (needs nats-server 2.10.0)" in dropped
    assert "leafnodes.remotes.0.compression (needs nats-server 2.10.0)" in dropped
    new, dropped_new = sc.prune_for_version(conf, "2.15.1")
    assert new == conf and dropped_new == []
    assert "sync_interval" in conf["jetstream"], "pruning must not touch the input"


def test_restart_fingerprint_ignores_reloadable_settings():
    base = sc.build_config(settings(cluster_group="hub", cluster_name="hub", leafnodes_port=7422))
    fp = sc.restart_fingerprint(base)
    for reloadable in ({"debug": True}, {"server_tags": ["az:1"]}, {"accounts": {"A": {}}},
                       {"cluster": {"routes": ["nats-route://x:6222"]}}, {"max_payload": 2048}):
        assert sc.restart_fingerprint(sc.deep_merge(base, reloadable)) == fp, reloadable
    for restart in ({"server_name": "other"}, {"listen": "0.0.0.0:4223"}, {"jetstream": {"domain": "x"}},
                    {"leafnodes": {"tls": {"ca_file": "/ca.pem"}}},
                    {"cluster": {"listen": "0.0.0.0:6223"}}, {"http": "127.0.0.1:8223"},
                    {"leafnodes": {"remotes": [{"urls": ["nats-leaf://h:7422"]}]}},
                    {"system_account": "SYS"}, {"lame_duck_duration": "30s"}):
        assert sc.restart_fingerprint(sc.deep_merge(base, restart)) != fp, restart


def test_the_leafnode_listeners_tls_timeout_restarts_its_files_reload():
    # nats-server derives the listener's auth timeout from it, and refuses a reload that changes that
    def fingerprint(timeout, cert):
        return sc.restart_fingerprint(sc.build_config(settings(
            leafnodes_port=7422, insecure_plaintext=[], tls_cert_file=cert, tls_key_file="/k.pem",
            tls_ca_file="/ca.pem", tls_timeout=timeout)))

    assert fingerprint(3, "/c.pem") != fingerprint(5, "/c.pem")
    assert fingerprint(5, "/new.pem") == fingerprint(5, "/c.pem")


def test_leaf_remote_tls_change_reloads_but_url_change_restarts():
    conf = {"leafnodes": {"remotes": [{"urls": ["nats-leaf://a:7422"], "tls": {"ca_file": "/1"}}]}}
    tls = {"leafnodes": {"remotes": [{"urls": ["nats-leaf://a:7422"], "tls": {"ca_file": "/2"}}]}}
    url = {"leafnodes": {"remotes": [{"urls": ["nats-leaf://b:7422"], "tls": {"ca_file": "/1"}}]}}
    assert sc.restart_fingerprint(conf) == sc.restart_fingerprint(tls)
    assert sc.restart_fingerprint(conf) != sc.restart_fingerprint(url)
    # TLS coming or going on a remote, or its timeout, is refused by a reload (the remote's TLS timeout changes)
    plain = {"leafnodes": {"remotes": [{"urls": ["nats-leaf://a:7422"]}]}}
    timeout = {"leafnodes": {"remotes": [{"urls": ["nats-leaf://a:7422"], "tls": {"ca_file": "/1", "timeout": 5}}]}}
    assert sc.restart_fingerprint(conf) != sc.restart_fingerprint(plain)
    assert sc.restart_fingerprint(conf) != sc.restart_fingerprint(timeout)


def test_two_listeners_on_one_port_are_reported_with_their_variables():
    conf = sc.build_config(settings(cluster_group="hub", cluster_name="hub", cluster_port=4222))
    problems = sc.listener_conflicts(conf)
    assert problems == ["port 4222 is used by both the client listener (nats_server_port) "
                        "and the cluster listener (nats_server_cluster_port)"]
    assert sc.listener_conflicts(sc.build_config(settings())) == []


def test_mqtt_port_conflict_is_found_in_its_block():
    conf = sc.build_config(settings(mqtt={"port": 8222}))
    assert "monitoring listener" in sc.listener_conflicts(conf)[0]


def test_bad_port_is_named():
    with pytest.raises(sc.ConfigError, match="nats_server_port: 70000"):
        sc.build_config(settings(port=70000))


MOUNTS = [
    {"mount": "/", "size_total": 8 * 1024**3},
    {"mount": "/var/lib", "size_total": 100 * 1024**3},
    {"mount": "/var/lib/nats-serverX", "size_total": 1},
]


def test_auto_profile_derives_from_ram_and_the_store_filesystem():
    p = sc.resource_profile(1024, MOUNTS, "/var/lib/nats-server")
    assert p["gomemlimit"] == 614 * 1024**2 and p["gomemlimit_env"] == "614MiB"
    assert p["max_memory_store"] == 256 * 1024**2
    assert p["max_file_store"] == 50 * 1024**3


def test_explicit_and_disabled_limits_win_over_auto():
    p = sc.resource_profile(1024, MOUNTS, "/srv/js", memory_limit="300MiB", max_memory_store="",
                            max_file_store="2G")
    assert p["gomemlimit_env"] == "300MiB"
    assert p["max_memory_store"] is None
    assert p["max_file_store"] == 2 * 1000**3


def test_profile_lands_in_the_jetstream_block():
    profile = sc.resource_profile(512, MOUNTS, "/var/lib/nats-server")
    conf = sc.build_config(settings(profile=profile))
    assert conf["jetstream"]["max_memory_store"] == 128 * 1024**2
    assert conf["jetstream"]["max_file_store"] == 50 * 1024**3


def test_render_quotes_strings_and_keys_that_need_it():
    text = sc.render({
        "server_name": "hub1", "port": 4222, "jetstream": {"domain": "hub", "max_file_store": 1024},
        "accounts": {"$SYS": {"users": [{"user": "sys", "password": "p\"w"}]}, "A": {"jetstream": True}},
        "server_tags": ["az:1"], "lame_duck_duration": "2m", "x": [],
    }, header="managed")
    assert text.startswith("# managed\n")
    assert 'server_name: "hub1"' in text
    assert "port: 4222" in text
    assert '"$SYS" {' in text
    assert '"password": "p\\"w"' not in text and 'password: "p\\"w"' in text
    assert 'lame_duck_duration: "2m"' in text
    assert "jetstream: true" in text
    assert "x: []" in text


def test_timestamps_with_nanoseconds_and_offsets():
    assert sc.parse_timestamp("1970-01-01T00:00:01.5Z") == 1.5
    assert sc.parse_timestamp("2026-11-22T18:00:00+01:00") == sc.parse_timestamp("2026-11-22T17:00:00Z")
    assert sc.parse_timestamp("2000-03-01T00:00:00Z") == 951868800


def test_operator_mode_renders_operator_full_resolver_and_preload():
    conf = sc.build_config(settings(operator_jwt="/etc/nats-server/operator.jwt", system_account="ASYS",
                                    resolver_preload={"ASYS": "eyJ.sys.jwt", "AAPP": "eyJ.app.jwt"}))
    assert conf["operator"] == "/etc/nats-server/operator.jwt"
    assert conf["system_account"] == "ASYS"
    assert conf["resolver"] == {"type": "full", "dir": "/var/lib/nats-server/jwt", "allow_delete": False,
                                "interval": "2m"}
    assert list(conf["resolver_preload"]) == ["AAPP", "ASYS"]
    override = sc.build_config(settings(operator_jwt="/o.jwt", resolver={"allow_delete": True, "interval": "30s"}))
    assert override["resolver"]["allow_delete"] is True and override["resolver"]["interval"] == "30s"
    assert "operator" in sc.restart_fingerprint(conf) and "resolver" in sc.restart_fingerprint(conf)


def test_operator_mode_refuses_static_accounts_and_bad_resolvers():
    with pytest.raises(sc.ConfigError, match="nats_server_accounts cannot be used in operator mode"):
        sc.build_config(settings(operator_jwt="/o.jwt", accounts={"A": {}}))
    with pytest.raises(sc.ConfigError, match="nats_server_resolver.type: 'url'"):
        sc.build_config(settings(operator_jwt="/o.jwt", resolver={"type": "url"}))
    with pytest.raises(sc.ConfigError, match="nats_server_resolver.interval"):
        sc.build_config(settings(operator_jwt="/o.jwt", resolver={"interval": 120}))


def test_a_leaf_remote_on_the_system_account_must_be_asked_for():
    remote = {"url": "nats-leaf://hub:7422", "account": "ASYS", "credentials": "/c/sys.creds"}
    with pytest.raises(sc.ConfigError, match=r"remotes\[0\]: account ASYS is the system account"):
        sc.build_config(settings(system_account="ASYS", leafnode_remotes=[remote]))
    conf = sc.build_config(settings(system_account="ASYS", leafnode_remotes=[dict(remote, system_account=True)]))
    assert conf["leafnodes"]["remotes"][0]["account"] == "ASYS"
    assert "system_account" not in conf["leafnodes"]["remotes"][0]


def test_a_hub_advertises_its_leaf_listener_at_the_address_given():
    def advertised(value, port=7422):
        return sc.build_config(settings(leafnodes_port=port, leafnodes_advertise=value))["leafnodes"].get("advertise")

    assert advertised("hub-1") == "hub-1:7422"
    assert advertised("hub-1.example.net:17422") == "hub-1.example.net:17422"
    assert advertised("10.0.0.5", port=7423) == "10.0.0.5:7423"
    assert advertised("fd00::5") == "[fd00::5]:7422"
    assert advertised("[fd00::5]:7000") == "[fd00::5]:7000"
    assert advertised("") is None
    # a leaf node alone (no listener) advertises nothing
    assert "leafnodes" not in sc.build_config(settings(leafnodes_advertise="hub-1"))
    for bad in ("hub-1:0", "hub-1:99999", "hub 1", "hub-1:port", "[fd00::5", "nats-leaf://hub-1:7422"):
        try:
            advertised(bad)
        except sc.ConfigError as exc:
            assert "nats_server_leafnodes_advertise" in str(exc) and repr(bad) in str(exc), str(exc)
        else:
            raise AssertionError("accepted %r" % bad)


def test_a_cluster_member_advertises_its_route_listener_by_name():
    """Its peers open implicit routes to the address it advertises and verify the certificate against it: a name
    the certificate states keeps verifying when the host's address changes."""
    def advertised(value, port=6222):
        return sc.build_config(settings(cluster_group="hub", cluster_name="hub", cluster_port=port,
                                        cluster_advertise=value))["cluster"].get("advertise")

    assert advertised("hub1") == "hub1:6222"
    assert advertised("hub1.example.net", port=16222) == "hub1.example.net:16222"
    assert advertised("fd00::5") == "[fd00::5]:6222"
    assert advertised("") is None
    with pytest.raises(sc.ConfigError, match="nats_server_cluster_advertise: 'hub 1' is not a host"):
        advertised("hub 1")
    # a changed advertise reloads (server/reload.go: cluster.advertise is reloadable)
    base = sc.build_config(settings(cluster_group="hub", cluster_name="hub", cluster_advertise="hub1"))
    moved = sc.build_config(settings(cluster_group="hub", cluster_name="hub", cluster_advertise="hub1.example.net"))
    assert base != moved and sc.restart_fingerprint(base) == sc.restart_fingerprint(moved)


def test_a_changed_leaf_advertise_restarts():
    # server/reload.go: of the leaf node options only tls, compression and handshake_first reload
    base = sc.build_config(settings(leafnodes_port=7422, leafnodes_advertise="hub-1"))
    moved = sc.build_config(settings(leafnodes_port=7422, leafnodes_advertise="hub-1.example.net"))
    assert sc.restart_fingerprint(base) != sc.restart_fingerprint(moved)


# --------------------------------------------------------------------------
# TLS and route authentication

def tls(**over):
    """TLS's settings with some changed."""
    out = dict(TLS)
    out.update(over)
    return out


TLS = {"insecure_plaintext": [], "tls_cert_file": "/etc/nats-server/tls/server.pem",
       "tls_key_file": "/etc/nats-server/tls/server-key.pem", "tls_ca_file": "/etc/nats-server/tls/ca.pem"}


def test_every_listener_runs_tls_by_default_and_routes_verify_their_peers():
    conf = sc.build_config(settings(cluster_group="hub", cluster_name="hub", leafnodes_port=7422,
                                    websocket={"port": 8443}, mqtt={"port": 1883}, tls_timeout=5, **TLS))
    server = {"cert_file": TLS["tls_cert_file"], "key_file": TLS["tls_key_file"], "ca_file": TLS["tls_ca_file"],
              "timeout": 5.0}
    assert conf["tls"] == server
    assert conf["cluster"]["tls"] == dict(server, verify=True)
    assert conf["leafnodes"]["tls"] == server
    assert conf["websocket"]["tls"] == server and conf["mqtt"]["tls"] == server
    assert conf["cluster"]["authorization"] == {"user": "route", "password": ROUTE_PASSWORD}
    assert all(route.startswith("nats-route://" + ROUTE_AUTH) for route in conf["cluster"]["routes"])


def test_a_listener_without_a_certificate_is_refused_naming_the_variables():
    with pytest.raises(sc.ConfigError) as error:
        sc.build_config(settings(insecure_plaintext=[]))
    assert "the client listener runs TLS" in str(error.value)
    assert "nats_server_tls_cert_src" in str(error.value) and "nats_server_insecure_plaintext" in str(error.value)
    with pytest.raises(sc.ConfigError, match="cluster listener runs TLS verifying its peers against the CA, and no CA is given"):
        sc.build_config(settings(cluster_group="hub", cluster_name="hub", **tls(tls_ca_file="")))


def test_the_opt_out_runs_only_the_listeners_it_names_in_plaintext():
    conf = sc.build_config(settings(cluster_group="hub", cluster_name="hub", leafnodes_port=7422,
                                    websocket={"port": 8443}, **tls(insecure_plaintext=["client", "websocket"])))
    assert "tls" not in conf and conf["websocket"] == {"port": 8443, "no_tls": True}
    assert conf["cluster"]["tls"]["verify"] is True and "tls" in conf["leafnodes"]
    with pytest.raises(sc.ConfigError, match=r"unknown listener\(s\) routes \(known: .*gateway, all\)"):
        sc.build_config(settings(insecure_plaintext=["routes"]))
    with pytest.raises(sc.ConfigError, match="nats_server_websocket.no_tls"):
        sc.build_config(settings(websocket={"port": 8443, "no_tls": True}, **TLS))


def test_routes_always_authenticate_with_a_long_password():
    for password in ("", None, "short"):
        with pytest.raises(sc.ConfigError, match="nats_server_cluster_password"):
            sc.build_config(settings(cluster_group="hub", cluster_name="hub", cluster_password=password))
    conf = sc.build_config(settings(cluster_routes=["nats-route://other:6222", "nats-route://u:p@named:6222"],
                                    cluster_name="c", cluster_user="r@1", cluster_password="a/b" * 8))
    assert conf["cluster"]["routes"] == ["nats-route://r%401:" + "a%2Fb" * 8 + "@other:6222",
                                         "nats-route://u:p@named:6222"]


def test_leaf_remotes_verify_the_hub_and_present_their_own_certificate():
    remote = {"url": "nats-leaf://hub:7422", "tls": {"timeout": 9}}
    conf = sc.build_config(settings(leafnode_remotes=[remote], tls_handshake_first=True, **TLS))
    assert conf["leafnodes"]["remotes"][0]["tls"] == {
        "ca_file": TLS["tls_ca_file"], "cert_file": TLS["tls_cert_file"], "key_file": TLS["tls_key_file"],
        "handshake_first": True, "timeout": 9}
    with pytest.raises(sc.ConfigError, match="always verified"):
        sc.build_config(settings(leafnode_remotes=[{"url": "nats-leaf://hub:7422", "tls": {"insecure": True}}],
                                 **TLS))
    plain = sc.build_config(settings(leafnode_remotes=[{"url": "nats-leaf://hub:7422"}],
                                     **tls(insecure_plaintext=["leafnodes", "client"])))
    assert "tls" not in plain["leafnodes"]["remotes"][0]


def test_handshake_first_is_left_out_for_a_server_that_does_not_know_it():
    conf = sc.build_config(settings(leafnodes_port=7422, tls_handshake_first=True,
                                    leafnode_remotes=[{"url": "nats-leaf://hub:7422"}], **TLS))
    pruned, dropped = sc.prune_for_version(conf, "2.9.10")
    assert "handshake_first" not in pruned["leafnodes"]["tls"]
    assert "handshake_first" not in pruned["leafnodes"]["remotes"][0]["tls"]
    assert len([d for d in dropped if "handshake_first" in d]) == 2


def test_certificates_and_route_credentials_change_by_reload_not_restart():
    before = sc.build_config(settings(cluster_group="hub", cluster_name="hub", leafnodes_port=7422, **TLS))
    after = sc.build_config(settings(cluster_group="hub", cluster_name="hub", leafnodes_port=7422,
                                     cluster_password="q" * 24, **tls(tls_ca_file="/new/ca.pem")))
    assert sc.restart_fingerprint(before) == sc.restart_fingerprint(after)


def test_clients_authenticate_unless_anonymous_access_is_asked_for():
    with pytest.raises(sc.ConfigError, match="clients would connect without authenticating.*allow_anonymous"):
        sc.build_config(settings(allow_anonymous=False))
    for auth in ({"operator_jwt": "/etc/nats-server/operator.jwt"},
                 {"accounts": {"A": {"users": [{"user": "a", "password": "b"}]}}},
                 {"authorization": {"token": "t" * 20}}):
        assert sc.build_config(settings(allow_anonymous=False, **auth))
    with pytest.raises(sc.ConfigError, match="without authenticating"):
        sc.build_config(settings(allow_anonymous=False, accounts={"A": {"jetstream": "enabled"}}))


def test_the_client_port_takes_plaintext_too_only_when_asked_and_that_restarts():
    plain = sc.build_config(settings(**TLS))
    both = sc.build_config(settings(tls_allow_non_tls=True, **TLS))
    assert "allow_non_tls" not in plain and both["allow_non_tls"] is True
    assert sc.restart_fingerprint(plain) != sc.restart_fingerprint(both)
    assert "allow_non_tls" not in sc.build_config(settings(tls_allow_non_tls=True, **tls(insecure_plaintext=["client"])))


# --------------------------------------------------------------------------
# gateways

GATEWAY_HOSTVARS = dict(HOSTVARS, **{
    "eu1": {"nats_server_advertise_host": "eu1.example.net", "nats_server_gateway": {"port": 7333}},
    "eu2": {"ansible_default_ipv4": {"address": "10.1.0.2"}},
})
GATEWAY_GROUPS = dict(GROUPS, eu=["eu1", "eu2"])


def gateway_settings(gateway=None, **over):
    """hub1 of cluster hub with TLS, its gateway reaching cluster eu."""
    gateway = {"port": 7222, "gateways": [{"name": "eu", "urls": ["nats://eu.example.net:7222"]}]} \
        if gateway is None else gateway
    return settings(**dict(dict(TLS, cluster_group="hub", cluster_name="hub", gateway=gateway, groups=GATEWAY_GROUPS,
                                hostvars=GATEWAY_HOSTVARS), **over))


def test_a_gateway_runs_mutual_tls_against_the_ca_like_routes():
    conf = sc.build_config(gateway_settings(tls_timeout=5))
    assert conf["gateway"] == {
        "name": "hub", "listen": "0.0.0.0:7222",
        "tls": {"cert_file": TLS["tls_cert_file"], "key_file": TLS["tls_key_file"], "ca_file": TLS["tls_ca_file"],
                "verify": True, "timeout": 5.0},
        "authorization": {"user": "gateway", "password": GATEWAY_PASSWORD},
        "gateways": [{"name": "eu", "urls": ["nats://gateway:%s@eu.example.net:7222" % GATEWAY_PASSWORD]}]}
    assert conf["gateway"]["tls"] == conf["cluster"]["tls"]


def test_a_gateway_without_a_ca_is_refused_naming_the_variables():
    with pytest.raises(sc.ConfigError, match="nats_server_tls_ca_file: the gateway listener runs TLS verifying its "
                                             "peers against the CA, and no CA is given.*list 'gateway' in "
                                             "nats_server_insecure_plaintext"):
        sc.build_config(gateway_settings(cluster_group="", tls_ca_file="", gateway={"name": "hub", "port": 7222}))


def test_the_gateway_runs_in_plaintext_only_when_listed_and_then_warns(monkeypatch):
    import ansible.utils.display

    from ansible_collections.nats_edge.fleet.plugins.filter import nats_server as filters

    for opt_out in (["gateway"], ["all"]):
        conf = sc.build_config(gateway_settings(insecure_plaintext=opt_out))
        assert "tls" not in conf["gateway"], opt_out
    assert "tls" in sc.build_config(gateway_settings(insecure_plaintext=["cluster", "client"]))["gateway"]
    warnings = []

    class Recorder(object):
        def warning(self, text):
            warnings.append(text)

    monkeypatch.setattr(ansible.utils.display, "Display", Recorder)
    filters.nats_server_config(gateway_settings(insecure_plaintext=["gateway"]))
    assert warnings[0] == ("nats_server on hub1: the gateway listener(s) run in plaintext "
                           "(nats_server_insecure_plaintext): anyone on the network reads and alters what they carry")


@pytest.mark.parametrize("where", ["gateway", "remote"])
def test_a_gateway_tls_that_connects_to_peers_unverified_is_refused(where):
    gateway = {"port": 7222, "gateways": [{"name": "eu", "url": "nats://eu:7222"}]}
    if where == "gateway":
        gateway["tls"] = {"insecure": True}
        name = r"nats_server_gateway\.tls\.insecure"
    else:
        gateway["gateways"][0]["tls"] = {"insecure": True}
        name = r"nats_server_gateway\.gateways\[0\]\.tls\.insecure"
    with pytest.raises(sc.ConfigError, match=name + ".*list 'gateway' in nats_server_insecure_plaintext"):
        sc.build_config(gateway_settings(gateway))
    # run in plaintext, the user's own tls is theirs
    plain = sc.build_config(gateway_settings(gateway, insecure_plaintext=["gateway"]))
    assert plain["gateway"].get("tls", {}) == gateway.get("tls", {})


def test_a_gateway_tls_of_ones_own_is_merged_over_the_roles():
    gateway = {"port": 7222, "tls": {"timeout": 9, "cipher_suites": ["TLS_AES_128_GCM_SHA256"]},
               "gateways": [{"name": "eu", "url": "nats://eu:7222", "tls": {"ca_file": "/eu-ca.pem"}}]}
    conf = sc.build_config(gateway_settings(gateway))
    assert conf["gateway"]["tls"] == {"cert_file": TLS["tls_cert_file"], "key_file": TLS["tls_key_file"],
                                      "ca_file": TLS["tls_ca_file"], "verify": True, "timeout": 9,
                                      "cipher_suites": ["TLS_AES_128_GCM_SHA256"]}
    # a remote's own tls replaces the gateway's for its connections: it still presents the host's certificate
    assert conf["gateway"]["gateways"][0]["tls"] == {"cert_file": TLS["tls_cert_file"],
                                                     "key_file": TLS["tls_key_file"], "ca_file": "/eu-ca.pem"}


def test_extra_config_gateway_gets_tls_too_and_null_removes_the_gateway():
    extra = {"gateway": {"name": "hub", "port": 7222, "gateways": [{"name": "eu", "urls": ["nats://eu:7222"]}]}}
    conf = sc.build_config(gateway_settings({}, extra_config=extra))
    assert conf["gateway"]["tls"]["verify"] is True and conf["gateway"]["tls"]["ca_file"] == TLS["tls_ca_file"]
    assert conf["gateway"]["listen"] == "0.0.0.0:7222" and "port" not in conf["gateway"]
    # merged over nats_server_gateway, once: what the role made of it is not replaced by the raw block
    merged = sc.build_config(gateway_settings(extra_config={"gateway": {"reject_unknown_cluster": True},
                                                            "ping_interval": "20s"}))
    assert merged["gateway"]["reject_unknown_cluster"] is True and merged["ping_interval"] == "20s"
    assert merged["gateway"]["listen"] == "0.0.0.0:7222" and "tls" in merged["gateway"]
    assert "gateway" not in sc.build_config(gateway_settings(extra_config={"gateway": None}))
    plain = sc.build_config(gateway_settings({}, extra_config=extra, insecure_plaintext=["gateway"]))
    assert "tls" not in plain["gateway"]


def test_remote_gateways_from_an_inventory_group_at_their_own_gateway_port():
    conf = sc.build_config(gateway_settings({"port": 7222, "advertise": "hub1.example.net", "gateways": [
        {"name": "eu", "group": "eu", "urls": ["nats://eu-lb.example.net:7222"]}]}))
    assert conf["gateway"]["advertise"] == "hub1.example.net:7222"
    assert conf["gateway"]["gateways"] == [{"name": "eu", "urls": [
        "nats://gateway:%s@%s" % (GATEWAY_PASSWORD, address)
        for address in ("eu-lb.example.net:7222", "eu1.example.net:7333", "10.1.0.2:7222")]}]


def test_gateways_authenticate_with_the_super_clusters_password_also_in_plaintext():
    """Like routes: the gateway takes only connections with the password (TLS against the CA proves the host, the
    password that it belongs to this super-cluster), and connects with it; in plaintext too."""
    for opt_out in ([], ["gateway"]):
        conf = sc.build_config(gateway_settings(gateway_user="gw", insecure_plaintext=opt_out))["gateway"]
        assert conf["authorization"] == {"user": "gw", "password": GATEWAY_PASSWORD}, opt_out
        assert conf["gateways"][0]["urls"] == ["nats://gw:%s@eu.example.net:7222" % GATEWAY_PASSWORD], opt_out
    # a URL with credentials of its own keeps them; a password with URL characters is quoted in the URLs
    given = sc.build_config(gateway_settings(
        {"port": 7222, "gateways": [{"name": "eu", "urls": ["nats://u:p@eu:7222", "nats://eu2:7222"]}]},
        gateway_password="p@ss/word:0123456789"))["gateway"]
    assert given["authorization"]["password"] == "p@ss/word:0123456789"
    assert given["gateways"][0]["urls"] == ["nats://u:p@eu:7222", "nats://gateway:p%40ss%2Fword%3A0123456789@eu2:7222"]


def test_a_gateway_authorization_of_ones_own_replaces_the_password():
    own = {"user": "gw", "password": "theirs-0123456789"}
    conf = sc.build_config(gateway_settings({"port": 7222, "authorization": own, "gateways": [
        {"name": "eu", "urls": ["nats://gw:theirs-0123456789@eu:7222"]}]}, gateway_password=""))["gateway"]
    assert conf["authorization"] == own
    assert conf["gateways"][0]["urls"] == ["nats://gw:theirs-0123456789@eu:7222"]


@pytest.mark.parametrize("password,message", [
    ("", r"nats_server_gateway_password: the gateways of cluster hub must authenticate; set a password shared by "
         r"every cluster's gateways"),
    (None, r"nats_server_gateway_password: the gateways of cluster hub must authenticate"),
    ("short", r"nats_server_gateway_password: the gateways of cluster hub need a password of at least 16 characters"),
])
def test_a_gateway_without_a_fit_password_is_refused(password, message):
    with pytest.raises(sc.ConfigError, match=message):
        sc.build_config(gateway_settings(gateway_password=password))
    # without a gateway, no gateway password is needed
    assert "gateway" not in sc.build_config(settings(gateway_password=password))


@pytest.mark.parametrize("field,value", [("gateway_password", {"secret": 1}), ("gateway_user", ["gw"]),
                                         ("cluster_password", ["p" * 20]), ("cluster_user", {"u": 1})])
def test_link_credentials_of_the_wrong_type_are_refused(field, value):
    with pytest.raises(sc.ConfigError, match=r"nats_server_%s: expected a string, got " % field):
        sc.build_config(gateway_settings(**{field: value}))


def test_a_new_gateway_password_restarts_the_server():
    """nats-server reloads nothing of a gateway but its TLS ("config reload not supported for Gateway")."""
    before = sc.restart_fingerprint(sc.build_config(gateway_settings()))
    assert sc.restart_fingerprint(sc.build_config(gateway_settings(gateway_password="q" * 20))) != before


def test_the_gateway_binds_where_the_other_listeners_do_unless_told():
    assert sc.build_config(gateway_settings(listen_host="10.0.0.1"))["gateway"]["listen"] == "10.0.0.1:7222"
    told = sc.build_config(gateway_settings({"name": "hub", "listen": "127.0.0.1:7444"}))["gateway"]
    assert told["listen"] == "127.0.0.1:7444"
    host = sc.build_config(gateway_settings({"name": "hub", "host": "10.9.9.9", "port": 7444}))["gateway"]
    assert (host["host"], host["port"]) == ("10.9.9.9", 7444) and "listen" not in host


@pytest.mark.parametrize("gateway,over,message", [
    ({"port": 7222}, {"cluster_group": "", "cluster_name": ""}, r"nats_server_gateway\.name must be set"),
    ({"name": "other", "port": 7222}, {}, r"nats_server_gateway\.name: 'other' is not the cluster's name 'hub'"),
    ({"name": "hub"}, {}, r"nats_server_gateway\.port must be set"),
    ({"port": "lots"}, {}, r"nats_server_gateway\.port: 'lots' is not a port number"),
    ({"port": 70000}, {}, r"nats_server_gateway\.port: 70000 is not a port number"),
    ({"port": 7222, "advertise": "hub 1"}, {}, r"nats_server_gateway\.advertise: 'hub 1'"),
    ({"port": 7222, "gateways": {"name": "eu"}}, {}, r"nats_server_gateway\.gateways: expected a list"),
    ({"port": 7222, "gateways": ["nats://eu:7222"]}, {}, r"gateways\[0\]: expected a mapping"),
    ({"port": 7222, "gateways": [{"url": "nats://eu:7222"}]}, {}, r"gateways\[0\]: no name"),
    ({"port": 7222, "gateways": [{"name": "eu"}]}, {}, r"gateways\[0\]: no urls \(set urls, url or group\)"),
    ({"port": 7222, "gateways": [{"name": "eu", "urls": ["nats://eu:7222"], "hosts": "x"}]}, {},
     r"gateways\[0\]: unknown option\(s\) hosts"),
    ({"port": 7222, "gateways": [{"name": "eu", "group": "asia"}]}, {},
     r"nats_server_gateway\.gateways\[0\]\.group: group 'asia' is not in the inventory"),
    ("hub:7222", {}, r"nats_server_gateway: expected a mapping"),
])
def test_bad_gateway_settings_name_the_field(gateway, over, message):
    with pytest.raises(sc.ConfigError, match=message):
        sc.build_config(gateway_settings(gateway, **over))


def test_a_gateway_port_conflict_names_the_gateway_variable():
    conf = sc.build_config(gateway_settings({"port": 6222}))
    assert sc.listener_conflicts(conf) == ["port 6222 is used by both the cluster listener (nats_server_cluster_port) "
                                           "and the gateway listener (nats_server_gateway.port)"]


def test_gateway_options_newer_than_the_server_are_left_out():
    gateway = {"port": 7222, "connect_backoff": True, "write_deadline": "10s", "connect_retries": 3}
    conf = sc.build_config(gateway_settings(gateway))
    for version, dropped_keys in (("2.9.10", {"connect_backoff", "write_deadline"}),
                                  ("2.12.0", {"write_deadline"}), ("2.12.1", set()), ("2.15.1", set())):
        pruned, dropped = sc.prune_for_version(conf, version)
        assert {d.split(" ")[0] for d in dropped} == {"gateway." + k for k in dropped_keys}, version
        assert pruned["gateway"]["connect_retries"] == 3 and "tls" in pruned["gateway"]


def test_gateway_certificates_reload_but_timeouts_tls_on_or_off_and_remotes_restart():
    """server/reload.go reloads a gateway's tls.Config (certificate, key, CA, verify) and refuses any other change
    of the gateway options; measured on 2.9.10 and 2.15.1: a new tls.timeout, or TLS turned off, is refused."""
    base = sc.build_config(gateway_settings())
    fingerprint = sc.restart_fingerprint(base)
    renewed = sc.build_config(gateway_settings(tls_cert_file="/new/server.pem", tls_key_file="/new/key.pem",
                                               tls_ca_file="/new/ca.pem"))
    assert sc.restart_fingerprint(renewed) == fingerprint
    remote_tls = sc.build_config(gateway_settings({"port": 7222, "gateways": [
        {"name": "eu", "urls": ["nats://eu.example.net:7222"], "tls": {"ca_file": "/eu-ca.pem"}}]}))
    remote_ca = sc.build_config(gateway_settings({"port": 7222, "gateways": [
        {"name": "eu", "urls": ["nats://eu.example.net:7222"], "tls": {"ca_file": "/eu-ca-2.pem"}}]}))
    assert sc.restart_fingerprint(remote_tls) == sc.restart_fingerprint(remote_ca)
    for restart in (gateway_settings(tls_timeout=9), gateway_settings(insecure_plaintext=["gateway"]),
                    gateway_settings({"port": 7222, "gateways": [{"name": "us", "url": "nats://us:7222"}]}),
                    gateway_settings({"port": 7223, "gateways": [{"name": "eu", "url": "nats://eu.example.net:7222"}]}),
                    gateway_settings({"port": 7222, "tls": {"verify_and_map": True}})):
        assert sc.restart_fingerprint(sc.build_config(restart)) != fingerprint, restart
    assert sc.restart_fingerprint(remote_tls) != sc.restart_fingerprint(base)


# --------------------------------------------------------------------------
# monitoring over https

def test_monitoring_stays_plain_http_on_loopback_by_default():
    conf = sc.build_config(settings(**TLS))
    assert conf["http"] == "127.0.0.1:8222" and "https" not in conf


def test_monitoring_over_https_uses_the_client_listeners_tls():
    conf = sc.build_config(settings(http_tls=True, **TLS))
    assert conf["https"] == "127.0.0.1:8222" and "http" not in conf
    # nats-server serves https monitoring with the top-level tls block
    assert conf["tls"]["cert_file"] == TLS["tls_cert_file"]
    assert "monitoring listener" in sc.listener_conflicts(sc.build_config(settings(http_tls=True, http_port=4222,
                                                                                   **TLS)))[0]


def test_monitoring_over_https_needs_the_client_listener_to_run_tls():
    with pytest.raises(sc.ConfigError, match="nats_server_http_tls: .*'client' is listed in "
                                             "nats_server_insecure_plaintext"):
        sc.build_config(settings(http_tls=True, **tls(insecure_plaintext=["client"])))
    with pytest.raises(sc.ConfigError, match="the client listener runs TLS, and no certificate"):
        sc.build_config(settings(http_tls=True, **tls(tls_cert_file="")))
    assert "http" not in sc.build_config(settings(http_tls=True, http_port=0, insecure_plaintext=["all"]))


def test_moving_monitoring_between_http_and_https_restarts():
    plain = sc.build_config(settings(**TLS))
    secure = sc.build_config(settings(http_tls=True, **TLS))
    assert sc.restart_fingerprint(plain) != sc.restart_fingerprint(secure)


def test_the_config_diff_masks_the_route_and_gateway_passwords_as_written_and_in_urls():
    s = gateway_settings(cluster_password="route/pass:0123456789", gateway_password="gate@pass 0123456789")
    conf = sc.build_config(s)
    after = sc.render(conf)
    assert "route%2Fpass%3A0123456789" in after and "gate%40pass%200123456789" in after
    from ansible_collections.nats_edge.fleet.plugins.filter import nats_server as filters

    secrets = [conf["cluster"]["authorization"]["password"], conf["gateway"]["authorization"]["password"]]
    lines = filters.nats_server_masked_diff(after, "", secrets)
    text = "\n".join(lines)
    assert "********" in text
    for needle in ("route/pass", "route%2Fpass", "gate@pass", "gate%40pass", "0123456789"):
        assert needle not in text, needle


def test_the_role_writes_its_config_without_the_templates_own_diff_when_it_holds_a_password():
    """The template module's diff would show the passwords: config_write.yml turns it off whenever the config
    holds one and shows the masked diff instead."""
    import yaml

    path = os.path.join(os.path.dirname(__file__), *[os.pardir] * 4, "roles", "nats_server", "tasks", "config_write.yml")
    with open(path) as handle:
        text = handle.read()
    tasks = yaml.safe_load(text)
    flat = []

    def walk(items):
        for task in items or []:
            flat.append(task)
            for key in ("block", "rescue", "always"):
                walk(task.get(key))

    walk(tasks)
    writes = [t for t in flat if "ansible.builtin.template" in t and "nats-server.conf" in str(t["ansible.builtin.template"])]
    assert writes and all(t.get("diff") == "{{ _nats_server_config_secrets | length == 0 }}" for t in writes)
    shown = [t for t in flat if "ansible.builtin.debug" in t and "nats-server.conf.j2" in str(t["ansible.builtin.debug"])]
    assert shown and all("nats_server_masked_diff" in str(t["ansible.builtin.debug"]) and
                         "_nats_server_config_secrets" in str(t["ansible.builtin.debug"]) for t in shown)
    with open(os.path.join(os.path.dirname(path), "..", "vars", "main.yml")) as handle:
        secrets = yaml.safe_load(handle)["_nats_server_config_secrets"]
    assert "cluster.authorization.password" in secrets and "gateway.authorization.password" in secrets
