"""JWTs from module_utils/_jwt.py, accepted by real servers in operator mode."""

import asyncio
import os

import nats

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt

from conftest import free_port


def test_operator_account_and_user_jwts_work_on_a_real_server(nats_binary, start_server, tmp_path):
    binary, _version = nats_binary
    op_seed, sys_seed, acc_seed, user_seed = (jwt.new_seed(k) for k in ("operator", "account", "account", "user"))
    op_signing = jwt.new_seed("operator")
    sys_pub, acc_pub = jwt.public_key(sys_seed), jwt.public_key(acc_seed)
    operator = jwt.encode(jwt.operator_claims("OP", jwt.public_key(op_seed), system_account=sys_pub,
                                              signing_keys=[jwt.public_key(op_signing)]), op_seed)
    system = jwt.encode(jwt.account_claims("SYS", sys_pub), op_signing)
    account = jwt.encode(jwt.account_claims("APP", acc_pub, jetstream={
        "disk_storage": 1024 * 1024, "mem_storage": -1, "streams": 3, "consumer": -1}), op_seed)
    user = jwt.encode(jwt.user_claims("app", jwt.public_key(user_seed)), acc_seed)
    (tmp_path / "op.jwt").write_text(operator)
    creds = tmp_path / "app.creds"
    creds.write_text(jwt.creds(user, user_seed))
    os.chmod(creds, 0o600)
    port, http = free_port(), free_port()
    conf = "\n".join([
        'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http,
        'jetstream { store_dir: "%s" }' % (tmp_path / "js"),
        'operator: "%s"' % (tmp_path / "op.jwt"), 'system_account: "%s"' % sys_pub,
        "resolver: MEMORY", "resolver_preload: { %s: \"%s\", %s: \"%s\" }" % (sys_pub, system, acc_pub, account),
    ]) + "\n"
    server = start_server(binary, conf, "op", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")

    async def use():
        nc = await nats.connect("nats://127.0.0.1:%d" % port, user_credentials=str(creds), allow_reconnect=False)
        try:
            sub = await nc.subscribe("hello")
            await nc.publish("hello", b"world")
            msg = await sub.next_msg(timeout=2)
            info = await nc.request("$JS.API.INFO", b"", timeout=2)
            return msg.data, info.data
        finally:
            await nc.close()

    data, info = asyncio.run(use())
    assert data == b"world"
    assert b'"max_storage":1048576' in info and b'"max_streams":3' in info
