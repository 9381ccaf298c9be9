"""The checks before anything changes refuse a certificate its peers would refuse, with nothing changed: an expired
one, one due within renew_before, one not valid for a name the host is reached by, a key of another certificate, a
CA file that is missing, a certificate of another CA, one that routes cannot present (no client use), each named
with the host, the file and the name or date; files on the host and files on the controller alike. New variables
of the wrong type are refused by the role's argument checks, and the fleet refuses a CA key open to others.

Each row is a host of one play (local connection) running the role's read of the host and its checks, as main.yml
runs them before install, config and service."""

import hashlib
import json
import os
import sys

import pki
from test_bad_input import FACTS, run_play

NAMES = ("localhost", "10.0.0.1")


ROLE_CHECKS = """\
    - name: The role's read of the host
      ansible.builtin.include_role:
        name: nats_edge.fleet.nats_server
        tasks_from: state
    - name: The role's checks
      ansible.builtin.include_role:
        name: nats_edge.fleet.nats_server
        tasks_from: preflight
"""


def tree(folder):
    """{path: (sha256, mode)} of every file under ``folder``."""
    found = {}
    for root, _dirs, files in os.walk(str(folder)):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                found[path] = (hashlib.sha256(handle.read()).hexdigest(), os.stat(path).st_mode)
    return found


def test_the_checks_refuse_a_certificate_its_peers_would_refuse_and_change_nothing(tmp_path):
    folder = tmp_path / "pki"
    folder.mkdir()
    ca = pki.CA(folder)
    stranger = pki.CA(folder, name="stranger")
    good = ca.issue("good", sans=NAMES)
    due = ca.issue("due", sans=NAMES, days=10)
    expired = ca.issue("expired", sans=NAMES, days=-3, ago=60)
    named = ca.issue("named", sans=("localhost",))
    foreign = stranger.issue("foreign", sans=NAMES)
    server_only = ca.issue("server-only", sans=NAMES, usages=("server",))

    def on_host(cert, key, ca_file=ca.path):
        return dict(nats_server_tls_cert_file=cert, nats_server_tls_key_file=key, nats_server_tls_ca_file=ca_file)

    cluster = dict(nats_server_cluster_routes=["nats-route://peer:6222"], nats_server_cluster_name="c",
                   nats_server_cluster_password="p" * 20)
    rows = [
        ("expired", on_host(*expired), "certificate %s expired on " % expired[0]),
        ("due", on_host(*due), "certificate %s expires on " % due[0]),
        ("due-margin-lowered", dict(on_host(*due), nats_server_tls_renew_before=5), None),
        ("wrong-name", on_host(*named), "certificate %s is not valid for 10.0.0.1, a name peers or clients reach" % named[0]),
        ("wrong-name-listed", dict(on_host(*good), nats_server_tls_names=["nats.example.net"]),
         "certificate %s is not valid for nats.example.net" % good[0]),
        ("leaf-advertise", dict(on_host(*good), nats_server_leafnodes_port=7422,
                                nats_server_leafnodes_advertise="hub.example.net:7422"),
         "is not valid for hub.example.net"),
        ("key-mismatch", on_host(good[0], due[1]), "%s does not match the certificate's public key" % due[1]),
        ("ca-missing", on_host(good[0], good[1], str(tmp_path / "gone.pem")), "%s: no such file" % (tmp_path / "gone.pem")),
        ("ca-other", on_host(foreign[0], foreign[1]), "%s does not verify against %s" % (foreign[0], ca.path)),
        ("route-server-only", dict(on_host(*server_only), **cluster),
         "%s is not accepted as a client's certificate by a peer that trusts %s" % (server_only[0], ca.path)),
        ("client-server-only", on_host(*server_only), None),  # clients only: a server certificate is enough
        ("src-key-mismatch", dict(nats_server_tls_cert_src=good[0], nats_server_tls_key_src=due[1],
                                  nats_server_tls_ca_src=ca.path),
         "%s (on the controller) does not match the certificate's public key" % due[1]),
        ("src-expired", dict(nats_server_tls_cert_src=expired[0], nats_server_tls_key_src=expired[1],
                             nats_server_tls_ca_src=ca.path),
         "certificate %s (on the controller) expired on " % expired[0]),
        ("valid", on_host(*good), None),
        ("valid-src", dict(nats_server_tls_cert_src=good[0], nats_server_tls_key_src=good[1],
                           nats_server_tls_ca_src=ca.path, **cluster), None),
    ]
    hosts = {}
    for row_id, variables, _fragment in rows:
        hosts[row_id] = dict(FACTS, ansible_connection="local", ansible_python_interpreter=sys.executable,
                             nats_server_allow_anonymous=True, nats_server_advertise_host="10.0.0.1",
                             nats_server_config_dir=str(tmp_path / "hosts" / row_id),
                             nats_server_install_method="binary", nats_server_binary_src="/bin/true",
                             nats_server_binary_path=str(tmp_path / "hosts" / row_id / "nats-server"),
                             nats_server_service_name="nats-tls-check-%s" % row_id, **variables)
    before = tree(folder)
    report, failures = run_play(tmp_path, ROLE_CHECKS, {"all": {"hosts": hosts}})
    wrong = []
    for row_id, _variables, fragment in rows:
        if fragment is None and row_id in failures:
            wrong.append("%s: expected no failure, got %r" % (row_id, failures[row_id]))
        elif fragment is not None and fragment not in (failures.get(row_id) or ""):
            wrong.append("%s: expected a failure with %r, got %r" % (row_id, fragment, failures.get(row_id)))
    assert not wrong, "\n".join(wrong)
    # each message names the host too, and nothing was written anywhere
    assert failures["expired"].startswith("nats_server on expired: certificate ")
    assert tree(folder) == before
    assert not (tmp_path / "hosts").exists()
    # the key given from the controller is checked on the host, and never shown
    with open(good[1]) as handle:
        key_body = handle.read().splitlines()[1]
    assert key_body not in json.dumps(report)


def test_new_variables_of_the_wrong_type_are_refused_before_any_task(tmp_path):
    variables = dict(nats_server_tls_renew_before="soon", nats_server_tls_names={"a": 1},
                     nats_server_tls_verify_clients="maybe", nats_server_tls_handshake_first="perhaps",
                     nats_server_insecure_plaintext={"client": True}, nats_server_allow_anonymous="sometimes",
                     nats_server_tls_timeout="soon", nats_server_leafnodes_tls_verify="often",
                     nats_server_tls_allow_non_tls="both", nats_server_gateway=["east"],
                     nats_server_http_tls="maybe")
    host = dict(FACTS, ansible_connection="local", ansible_python_interpreter=sys.executable,
                nats_server_config_dir=str(tmp_path / "host"), **variables)
    report, failures = run_play(tmp_path, "    - name: The role\n      ansible.builtin.include_role:\n"
                                "        name: nats_edge.fleet.nats_server\n", {"all": {"hosts": {"h": host}}}, "--check")
    message = failures["h"]
    assert message.startswith("Validation of arguments failed"), message
    missing = [name for name in variables if name not in message]
    assert not missing, "not named: %s in %r" % (missing, message)
    tasks = [task["task"]["name"] for task in report["plays"][0]["tasks"]]
    assert len(tasks) == 2 and "Validating arguments" in tasks[1], tasks  # the argument check, nothing after it
    assert not (tmp_path / "host").exists()


def test_the_fleet_refuses_a_ca_key_open_to_others_and_leaves_it_as_it_was(tmp_path):
    fleet_dir = tmp_path / "fleet"
    (fleet_dir / "tls").mkdir(parents=True)
    ca = pki.CA(fleet_dir / "tls", name="ca")  # ca.pem, ca-key.pem
    os.chmod(ca.key_path, 0o644)
    before = tree(fleet_dir)
    host = dict(ansible_connection="local", ansible_python_interpreter=sys.executable)
    group = dict(nats_fleet_dir=str(fleet_dir), nats_accounts=[{"name": "TEST", "users": [{"name": "u"}]}],
                 nats_fleet_default_account="TEST")

    (tmp_path / "site.yml").write_text(
        "- ansible.builtin.import_playbook: nats_edge.fleet.preflight\n"
        "- hosts: nats_servers\n  gather_facts: false\n  tasks:\n"
        "    - name: After the checks\n      ansible.builtin.debug:\n        msg: on\n")

    def preflight(variables):
        inventory = {"all": {"vars": variables, "children": {"nats_servers": {"hosts": {"h1": host, "h2": host}}}}}
        return run_play(tmp_path, "", inventory, playbook=str(tmp_path / "site.yml"))

    report, failures = preflight(group)
    assert list(failures) == ["h1"], failures  # the check runs once, for the fleet
    assert "the fleet CA key %s is open to others (mode 0644)" % ca.key_path in failures["h1"]
    assert "chmod 600 %s" % ca.key_path in failures["h1"]
    # and no host of the fleet goes on to a later play of the run
    after = [task["hosts"] for play in report["plays"] for task in play["tasks"]
             if task["task"]["name"] == "After the checks"]
    assert not any(after), after
    assert tree(fleet_dir) == before
    assert preflight(dict(group, nats_fleet_tls="own"))[1] == {}  # no CA of the fleet's own to look at
    os.chmod(ca.key_path, 0o600)
    assert preflight(group)[1] == {}
