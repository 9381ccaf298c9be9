"""Edges that pull: the bundle the controller makes of a host's nats_server inputs, and what the host takes of it."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _pull

INPUTS = {
    "nats_server_operator_jwt_src": "/fleet/nsc/stores/OP/OP.jwt",
    "nats_server_system_account": "ASYS",
    "nats_server_resolver_preload": {"ASYS": "eyJ.sys.jwt"},
    "nats_server_leafnode_remotes": [
        {"hub_group": "hub", "account": "ATEST", "credentials_src": "/fleet/creds/TEST/leaf.creds"},
        {"hub_group": "hub", "account": "ASYS", "system_account": True, "credentials_src": "/fleet/creds/SYS/leafmon.creds"},
        {"urls": ["nats-leaf://other:7422"]}],
    "nats_server_tls_cert_src": "/fleet/tls/hosts/edge-1.pem",
    "nats_server_tls_ca_src": "/fleet/tls/ca.pem",
    "nats_server_tls_key_file": "/etc/nats-server/tls/server-key.pem",
    "nats_server_tls_renew_before": 30,
}
SECRETS = ["/fleet/secrets/edge-route.password"]


def contents():
    return {path: "text of %s\n" % path for path in _pull.files(INPUTS, SECRETS)}


def test_the_bundle_carries_the_files_its_inputs_name_and_no_others():
    assert _pull.files(INPUTS, SECRETS) == [
        "/fleet/nsc/stores/OP/OP.jwt", "/fleet/tls/hosts/edge-1.pem", "/fleet/tls/ca.pem",
        "/fleet/creds/TEST/leaf.creds", "/fleet/creds/SYS/leafmon.creds", "/fleet/secrets/edge-route.password"]
    made = _pull.bundle(INPUTS, contents(), "edge-1", SECRETS)
    assert made["host"] == "edge-1"
    assert made["files"] == {
        "creds/SYS/leafmon.creds": {"content": "text of /fleet/creds/SYS/leafmon.creds\n", "mode": "0600"},
        "creds/TEST/leaf.creds": {"content": "text of /fleet/creds/TEST/leaf.creds\n", "mode": "0600"},
        "operator.jwt": {"content": "text of /fleet/nsc/stores/OP/OP.jwt\n", "mode": "0644"},
        "secrets/edge-route.password": {"content": "text of /fleet/secrets/edge-route.password\n", "mode": "0600"},
        "tls/ca.pem": {"content": "text of /fleet/tls/ca.pem\n", "mode": "0644"},
        "tls/cert.pem": {"content": "text of /fleet/tls/hosts/edge-1.pem\n", "mode": "0644"}}
    # the inputs themselves are left alone (the controller's run goes on with them)
    assert INPUTS["nats_server_leafnode_remotes"][0]["credentials_src"] == "/fleet/creds/TEST/leaf.creds"


def test_the_host_places_the_inputs_under_its_bundle_directory():
    made = _pull.bundle(INPUTS, contents(), "edge-1", SECRETS)
    placed = _pull.placed(_pull.check(made, "edge-1")["vars"], "/var/lib/nats-edge-pull/bundle/")
    assert placed == {
        "nats_server_operator_jwt_src": "/var/lib/nats-edge-pull/bundle/operator.jwt",
        "nats_server_system_account": "ASYS",
        "nats_server_resolver_preload": {"ASYS": "eyJ.sys.jwt"},
        "nats_server_leafnode_remotes": [
            {"hub_group": "hub", "account": "ATEST",
             "credentials_src": "/var/lib/nats-edge-pull/bundle/creds/TEST/leaf.creds"},
            {"hub_group": "hub", "account": "ASYS", "system_account": True,
             "credentials_src": "/var/lib/nats-edge-pull/bundle/creds/SYS/leafmon.creds"},
            {"urls": ["nats-leaf://other:7422"]}],
        "nats_server_tls_cert_src": "/var/lib/nats-edge-pull/bundle/tls/cert.pem",
        "nats_server_tls_ca_src": "/var/lib/nats-edge-pull/bundle/tls/ca.pem",
        "nats_server_tls_key_file": "/etc/nats-server/tls/server-key.pem",
        "nats_server_tls_renew_before": 30,
        "nats_server_secrets_dir": "/var/lib/nats-edge-pull/bundle/secrets"}


def test_what_a_server_without_operator_mode_or_fleet_tls_gets():
    made = _pull.bundle({"nats_server_leafnode_remotes": [{"urls": ["nats-leaf://hub:7422"]}]}, {}, "edge-2")
    assert made == {"host": "edge-2", "files": {},
                    "vars": {"nats_server_leafnode_remotes": [{"urls": ["nats-leaf://hub:7422"]}]}}


@pytest.mark.parametrize("value, message", [
    ({"host": "edge-2", "vars": {}, "files": {}}, "the bundle was made for 'edge-2'; each edge takes only its own"),
    ({"host": "edge-1", "vars": {}}, "is not one nats_edge.fleet.pull_publish made"),
    ("not a bundle", "is not one nats_edge.fleet.pull_publish made"),
    ({"host": "edge-1", "vars": {}, "files": {"../../etc/passwd": {}}}, "'../../etc/passwd' would land outside"),
    ({"host": "edge-1", "vars": {}, "files": {"/etc/passwd": {}}}, "'/etc/passwd' would land outside"),
])
def test_a_host_refuses_a_bundle_not_made_for_it(value, message):
    with pytest.raises(_pull.PullError) as caught:
        _pull.check(value, "edge-1")
    assert message in str(caught.value) and str(caught.value).startswith("edge-1: ")


def test_a_file_that_was_not_read_is_named():
    with pytest.raises(_pull.PullError, match="edge-1: the bundle needs /fleet/tls/ca.pem, which was not read"):
        _pull.bundle(INPUTS, {p: "" for p in _pull.files(INPUTS) if p != "/fleet/tls/ca.pem"}, "edge-1")
