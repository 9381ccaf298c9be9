"""No secret reaches Ansible's output: every module runs through
ansible-playbook at -vvv with --diff, authenticating with creds, an nkey
seed, user/password, a token and credentials written inside server URLs,
and the whole output is searched for seeds, passwords, tokens and the
content of creds files."""

import json
import re

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt

from conftest import SERVERS, Server, free_port, operator_mode_conf, run_playbook

PASSWORD = "pw-Sw33p-4f9c2e"
TOKEN = "tk-Sw33p-8d1b7a"
SEED = re.compile(r"S[OAU][A-Z2-7]{56}")


def start(tmp_path, name, auth, started):
    port, http = free_port(), free_port()
    conf = tmp_path / ("%s.conf" % name)
    conf.write_text("\n".join([
        'server_name: "%s"' % name, 'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http,
        'jetstream { store_dir: "%s", max_memory_store: 67108864, max_file_store: 268435456 }' % (tmp_path / name),
        auth]) + "\n")
    server = Server(SERVERS["pypi"], str(conf), http)
    started.append(server)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    return port


def test_no_secret_in_verbose_diff_output_of_any_module(tmp_path):
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    nkey_seed = jwt.new_seed("user")
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(nkey_seed)
    started = []
    try:
        password_port = start(tmp_path, "pw", 'authorization { users: [ {user: alice, password: "%s"}, '
                                              '{nkey: "%s"} ] }' % (PASSWORD, jwt.public_key(nkey_seed)), started)
        token_port = start(tmp_path, "tk", 'authorization { token: "%s" }' % TOKEN, started)

        # the operator's store comes first: the operator-mode server needs its JWT
        store = json.dumps(base)
        operator_args = json.dumps(dict(base, signing_key=True))
        prepare = run_playbook(tmp_path, """
            - name: Operator
              nats_edge.fleet.nsc_operator: %s
              register: op
            - name: Keep it
              ansible.builtin.copy:
                content: "{{ op | to_json }}"
                dest: %s/operator.json
                mode: "0600"
        """ % (operator_args, tmp_path))
        assert prepare.returncode == 0, prepare.stdout
        operator = json.loads((tmp_path / "operator.json").read_text())
        op_port, op_http = free_port(), free_port()
        (tmp_path / "op.conf").write_text(operator_mode_conf(tmp_path, operator, op_port, op_http))
        server = Server(SERVERS["pypi"], str(tmp_path / "op.conf"), op_http)
        started.append(server)
        server.wait(lambda: server.get("healthz")["status"] == "ok")

        op_url = "nats://127.0.0.1:%d" % op_port
        pw_url = "nats://127.0.0.1:%d" % password_port
        tk_url = "nats://127.0.0.1:%d" % token_port
        # ansible-core quotes the playbook lines above a failed task: the deliberate failure comes first
        proc = run_playbook(tmp_path, """
            - name: A failure with credentials in the URL
              nats_edge.fleet.jetstream_stream: {servers: ["nats://alice:%(password)s@127.0.0.1:%(dead)d"],
                                                 name: S5, timeout: 1}
              ignore_errors: true
            - name: Operator again, by its other name
              nats_edge.fleet.nsc_operator: {name: fleet, store_dir: %(store_dir)s, keys_dir: %(keys_dir)s,
                                             signing_key: true}
            - name: Accounts, pushed with the system user's creds
              nats_edge.fleet.nsc_account:
                <<: %(store)s
                name: "{{ item }}"
                signing_key: true
                jetstream: {disk_storage: 64MiB, mem_storage: 8MiB}
                push: true
                servers: ["%(op)s"]
              loop: [APP, OTHER]
            - name: A user
              nats_edge.fleet.nsc_user:
                <<: %(store)s
                account: APP
                name: app
                permissions: {pub: {allow: [">"]}, sub: {allow: [">"]}}
              register: user
            - name: An export, pushed with explicit system creds
              nats_edge.fleet.nsc_export:
                <<: %(store)s
                account: APP
                name: events
                subject: events.>
                importers: [{account: OTHER}]
                push: true
                servers: ["%(op)s"]
                creds: "%(sys_creds)s"
            - name: The store
              nats_edge.fleet.nsc_info: %(store)s
            - name: The whole store in one run, a user more
              nats_edge.fleet.nsc_store:
                <<: %(store)s
                signing_key: true
                accounts:
                  - {name: APP, signing_key: true, jetstream: {disk_storage: 64MiB, mem_storage: 8MiB}}
                users:
                  - {account: APP, name: app, permissions: {pub: {allow: [">"]}, sub: {allow: [">"]}}}
                  - {account: APP, name: second}
            - name: A stream with creds
              nats_edge.fleet.jetstream_stream: {servers: ["%(op)s"], creds: "{{ user.creds_file }}", name: S1,
                                                 subjects: [s1.>], max_age: 1d}
            - name: A consumer with creds
              nats_edge.fleet.jetstream_consumer: {servers: ["%(op)s"], creds: "{{ user.creds_file }}", stream: S1,
                                                   name: c1, ack_wait: 10s}
            - name: A report with creds
              nats_edge.fleet.jetstream_info: {servers: ["%(op)s"], creds: "{{ user.creds_file }}"}
            - name: A stream with user and password
              nats_edge.fleet.jetstream_stream: {servers: ["%(pw)s"], user: alice, password: "%(password)s",
                                                 name: S2, subjects: [s2.>]}
            - name: A stream with an nkey seed
              nats_edge.fleet.jetstream_stream: {servers: ["%(pw)s"], nkey_seed: "%(seed_file)s", name: S3,
                                                 subjects: [s3.>]}
            - name: A stream with a token
              nats_edge.fleet.jetstream_stream: {servers: ["%(tk)s"], token: "%(token)s", name: S4, subjects: [s4.>]}
            - name: A report with user and password in the URL
              nats_edge.fleet.jetstream_info: {servers: ["nats://alice:%(password)s@127.0.0.1:%(pw_port)d"]}
            - name: A consumer with a token in the URL
              nats_edge.fleet.jetstream_consumer: {servers: ["nats://%(token)s@127.0.0.1:%(tk_port)d"], stream: S4,
                                                   name: c4}
        """ % dict(store=store, op=op_url, pw=pw_url, tk=tk_url, password=PASSWORD, token=TOKEN,
                   seed_file=seed_file, sys_creds=operator["sys_creds"], pw_port=password_port, tk_port=token_port,
                   dead=free_port(), **base), verbosity=3, extra_args=["--diff"])
    finally:
        for server in started:
            server.stop()
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:]
    assert "ok=15" in out and "failed=0" in out and "ignored=1" in out, out[-3000:]
    assert "module_args" in out  # the invocation really is in the output

    creds_files = [operator["sys_creds"]] + [str(tmp_path / "keys" / "creds" / "fleet" / "APP" / name)
                                             for name in ("app.creds", "second.creds")]
    leaks = []
    if SEED.search(out):
        leaks.append("a seed: %s..." % SEED.search(out).group(0)[:6])
    for secret, what in [(PASSWORD, "the password"), (TOKEN, "the token"), (nkey_seed.decode(), "the nkey seed")]:
        if secret in out:
            leaks.append(what)
    for path in creds_files:
        token, _claims, seed = jwt.parse_creds(open(path).read())
        for part, what in [(token, "the JWT of %s" % path), (seed, "the seed of %s" % path)]:
            if part in out:
                leaks.append(what)
    assert not leaks, leaks
