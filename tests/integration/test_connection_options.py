"""The connection options every JetStream module takes, against a real server: ``inbox_prefix`` for a user who may
only subscribe below its own prefix (with the default _INBOX its requests get no reply), ``connection_name`` as the
server sees it (its trace of the CONNECT), and a prefix that cannot be one refused before anything is sent; creds,
CA, client certificate and key given as text (from a vault) rather than files: the connection works, nothing of them
reaches the output, and the private files they need for the connection are gone after it."""

import json
import os
import re

from conftest import free_port, operator_mode_conf, run_module
from pki import CA


def conf(tmp_path, port, http):
    return "\n".join([
        'server_name: "s"', 'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http,
        'jetstream { store_dir: "%s" }' % (tmp_path / "js"),
        'trace: true', 'logfile: "%s"' % (tmp_path / "server.log"),
        # the automation's user may subscribe only below its own reply prefix
        'authorization { users: [ { user: ops, password: secret, permissions: {'
        ' publish: ">", subscribe: "_INBOX_ops.>" } } ] }']) + "\n"


def test_inbox_prefix_and_connection_name(nats_binary, start_server, tmp_path):
    binary, _version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, conf(tmp_path, port, http), "s", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    task = dict(servers=["nats://127.0.0.1:%d" % port], user="ops", password="secret", timeout=2.0,
                name="ORDERS", subjects=["orders.>"])

    denied = run_module("jetstream_stream", task)
    assert denied.get("failed"), denied  # its replies would come on _INBOX.>, which it may not subscribe to

    made = run_module("jetstream_stream", dict(task, inbox_prefix="_INBOX_ops", connection_name="fleet-ci"))
    assert made.get("changed") and not made.get("failed"), made
    again = run_module("jetstream_stream", dict(task, inbox_prefix="_INBOX_ops"))
    assert not again.get("changed") and not again.get("failed"), again
    log = (tmp_path / "server.log").read_text()
    names = re.findall(r'"name": ?"([^"]*)", "no_responders"', log)  # each CONNECT the server traced
    assert "fleet-ci" in names and "ansible nats_edge.fleet" in names, names

    for bad in ("_INBOX.*", "a..b", "with space", "trailing."):
        refused = run_module("jetstream_stream", dict(task, name="OTHER", subjects=["other"], inbox_prefix=bad))
        assert refused.get("failed") and "inbox_prefix: %r is not a subject prefix" % bad in refused["msg"], refused
    assert '"OTHER"' not in (tmp_path / "server.log").read_text()  # refused before anything was sent


def private_tmp(tmp_path):
    """A temporary directory of the test's own for the module runs (TMPDIR): the lanes run side by side and
    share the system's, so only an own directory shows what one run left behind."""
    path = tmp_path / "tmpdir"
    path.mkdir()
    return path, {"TMPDIR": str(path)}


def test_certificates_and_key_given_as_text(nats_binary, start_server, tmp_path):
    binary, _version = nats_binary
    ca = CA(tmp_path)
    cert, key = ca.issue("server")
    client_cert, client_key = ca.issue("client", usages=("client",))
    port, http = free_port(), free_port()
    text = "\n".join([
        'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http,
        'jetstream { store_dir: "%s" }' % (tmp_path / "js"),
        'tls { cert_file: "%s", key_file: "%s", ca_file: "%s", verify: true, timeout: 2 }' % (cert, key, ca.path)])
    server = start_server(binary, text + "\n", "s", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    scratch, env = private_tmp(tmp_path)

    def read(path):
        with open(path) as handle:
            return handle.read()

    task = dict(servers=["tls://127.0.0.1:%d" % port], timeout=3.0, name="ORDERS", subjects=["orders.>"],
                tls_ca_data=read(ca.path))
    refused = run_module("jetstream_stream", task, env=env)  # the server asks for a client certificate
    assert refused.get("failed"), refused
    made = run_module("jetstream_stream", dict(task, tls_cert_data=read(client_cert), tls_key_data=read(client_key)),
                      env=env)
    assert made.get("changed") and not made.get("failed"), made
    assert "PRIVATE KEY" not in json.dumps(made)
    assert os.listdir(scratch) == []  # the private files went with the connection

    bad = run_module("jetstream_stream", dict(task, tls_cert_data=read(client_cert), tls_key_data="not a key"))
    assert bad.get("failed") and "tls_key_data: the text given holds no PEM private key" in bad["msg"], bad
    both = run_module("jetstream_stream", dict(task, tls_ca=ca.path))
    assert both.get("failed") and "mutually exclusive" in both["msg"] and "tls_ca" in both["msg"], both


def test_creds_given_as_text(nats_binary, start_server, tmp_path):
    binary, _version = nats_binary
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = run_module("nsc_operator", base)
    port, http = free_port(), free_port()
    server = start_server(binary, operator_mode_conf(tmp_path, operator, port, http), "s", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    with open(operator["sys_creds"]) as handle:
        creds = handle.read()
    scratch, env = private_tmp(tmp_path)
    account = dict(base, name="APP", jetstream=dict(disk_storage="64MiB", mem_storage="8MiB"), push=True,
                   servers=["nats://127.0.0.1:%d" % port], timeout=3.0, creds_data=creds)
    pushed = run_module("nsc_account", account, env=env)
    assert pushed.get("changed") and not pushed.get("failed") and not pushed.get("unconfirmed"), pushed
    assert "SUAB" not in json.dumps(pushed) and creds.split("\n")[1] not in json.dumps(pushed)  # no JWT, no seed
    assert os.listdir(scratch) == []
    refused = run_module("nsc_account", dict(account, creds_data="not creds"))
    assert refused.get("failed") and "creds_data: the text given is" in refused["msg"], refused
    assert "not creds" not in refused["msg"]

    # the same user's JWT and seed as two files (natscli --jwt, --seed)
    token, seed = re.findall(r"-+BEGIN [A-Z ]+-+\s*\n\s*(\S+)", creds)
    (tmp_path / "sys.jwt").write_text(token + "\n")
    (tmp_path / "sys.nk").write_text(seed + "\n")
    split = dict((k, v) for k, v in account.items() if k != "creds_data")
    split.update(user_jwt=str(tmp_path / "sys.jwt"), nkey_seed=str(tmp_path / "sys.nk"),
                 jetstream=dict(disk_storage="32MiB", mem_storage="8MiB"))
    pushed = run_module("nsc_account", split)
    assert pushed.get("changed") and not pushed.get("failed") and not pushed.get("unconfirmed"), (
        pushed.get("msg"), pushed.get("unconfirmed"), pushed.get("push"))
    alone = run_module("nsc_account", dict((k, v) for k, v in split.items() if k != "nkey_seed"))
    assert alone.get("failed") and "is given without nkey_seed" in alone["msg"], alone
    mismatch = run_module("nsc_account", dict(split, nkey_seed=operator["sys_creds"]))
    assert mismatch.get("failed") and "nkey_seed" in mismatch["msg"], mismatch
