"""The client port's TLS handshake first (nats_server_client_tls_handshake_first): rendered, refused where it cannot
work, and refused on servers older than 2.10.4."""

import json

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

from test_server_config import TLS, settings, tls


@pytest.mark.parametrize("value, rendered", [
    (True, "handshake_first: true"),
    ("true", "handshake_first: true"),
    ("300ms", 'handshake_first: "300ms"'),
    ("1s", 'handshake_first: "1s"'),
    ("auto", 'handshake_first: "auto"'),
    ("Auto_Fallback", 'handshake_first: "auto"'),
])
def test_the_client_tls_block_starts_with_the_handshake(value, rendered):
    conf = sc.build_config(settings(client_tls_handshake_first=value, **TLS))
    text = sc.render(conf)
    assert "tls {\n  cert_file" in text and "  " + rendered + "\n}" in text
    # only the client port: the leaf, websocket and route listeners have their own
    conf = sc.build_config(settings(client_tls_handshake_first=value, leafnodes_port=7422, websocket={"port": 8443},
                                    cluster_group="hub", cluster_name="hub", **TLS))
    assert all("handshake_first" not in conf[block]["tls"] for block in ("leafnodes", "websocket", "cluster"))


@pytest.mark.parametrize("value", [False, None, "", "false", "no"])
def test_false_leaves_it_out(value):
    assert "handshake_first" not in sc.build_config(settings(client_tls_handshake_first=value, **TLS))["tls"]
    assert "handshake_first" not in sc.build_config(settings(**TLS))["tls"]


@pytest.mark.parametrize("value, message", [
    ("soon", "nats_server_client_tls_handshake_first: 'soon' is not true, false, auto or a fallback delay"),
    (300, "nats_server_client_tls_handshake_first: 300 is not true, false, auto or a fallback delay"),
    ("0s", "nats_server_client_tls_handshake_first: '0s' is no fallback delay; set true"),
    (["true"], "nats_server_client_tls_handshake_first: ['true'] is not true"),
])
def test_values_it_cannot_be_are_refused(value, message):
    with pytest.raises(sc.ConfigError) as error:
        sc.build_config(settings(client_tls_handshake_first=value, **TLS))
    assert str(error.value).startswith(message)


def test_a_plaintext_client_port_refuses_it():
    with pytest.raises(sc.ConfigError, match=r"^nats_server_client_tls_handshake_first: the client listener runs in "
                                             r"plaintext \('client' is listed in nats_server_insecure_plaintext\)"):
        sc.build_config(settings(client_tls_handshake_first=True, **tls(insecure_plaintext=["client"])))
    with pytest.raises(sc.ConfigError, match="runs in plaintext"):
        sc.build_config(settings(client_tls_handshake_first="auto", **tls(insecure_plaintext=["all"])))


def test_true_refuses_plaintext_clients_beside_tls_and_a_fallback_delay_takes_them():
    with pytest.raises(sc.ConfigError, match=r"^nats_server_client_tls_handshake_first: true makes every client start "
                                             r"with the TLS handshake, which overrides nats_server_tls_allow_non_tls"):
        sc.build_config(settings(client_tls_handshake_first=True, tls_allow_non_tls=True, **TLS))
    conf = sc.build_config(settings(client_tls_handshake_first="300ms", tls_allow_non_tls=True, **TLS))
    assert conf["tls"]["handshake_first"] == "300ms" and conf["allow_non_tls"] is True


@pytest.mark.parametrize("version", ["2.9.10", "2.10.0", "2.10.3"])
@pytest.mark.parametrize("value", [True, "300ms"])
def test_a_server_older_than_2_10_4_refuses_it_naming_the_version(version, value):
    conf = sc.build_config(settings(client_tls_handshake_first=value, **TLS))
    expected = ("nats_server_client_tls_handshake_first needs nats-server 2.10.4 or later, and this host runs %s; "
                "without it the client port would send its INFO in plaintext first" % version)
    assert [p[:len(expected)] for p in sc.version_problems(conf, version)] == [expected]
    with pytest.raises(sc.ConfigError) as error:
        sc.prune_for_version(conf, version)
    assert str(error.value).startswith(expected)


@pytest.mark.parametrize("version", ["2.10.4", "2.12.4", "2.15.1"])
def test_it_is_kept_from_2_10_4(version):
    conf = sc.build_config(settings(client_tls_handshake_first="auto", **TLS))
    assert sc.version_problems(conf, version) == []
    assert sc.prune_for_version(conf, version) == (conf, [])


def test_without_it_no_version_is_a_problem():
    conf = sc.build_config(settings(**TLS))
    assert sc.version_problems(conf, "2.9.10") == []


def test_changing_it_reloads():
    before = sc.restart_fingerprint(sc.build_config(settings(**TLS)), "2.15.1")
    for value in (True, "300ms"):
        after = sc.restart_fingerprint(sc.build_config(settings(client_tls_handshake_first=value, **TLS)), "2.15.1")
        assert not sc.fingerprint_needs_restart(json.dumps(before), after)
