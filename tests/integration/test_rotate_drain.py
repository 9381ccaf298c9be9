"""rotate_creds revokes a replaced key only once no client connects with it: against a real
server, a client still on the old key stops the play (named, nothing revoked), a client
on the new key does not, and the play goes on once the old one has gone."""

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import free_port, operator_mode_conf, run_playbook

HOLD = textwrap.dedent("""
    import asyncio, sys, nats
    async def main():
        clients = []
        for name, creds in zip(sys.argv[2::2], sys.argv[3::2]):
            clients.append(await nats.connect(sys.argv[1], user_credentials=creds, name=name, allow_reconnect=False))
        for nc in clients:
            await nc.flush()
        print("connected", flush=True)
        await asyncio.sleep(120)
    asyncio.run(main())
""")

DRAIN = """
- name: The rotation's last play, up to the revocation
  ansible.builtin.include_role:
    name: nats_edge.fleet.nats_fleet
    tasks_from: rotate_drain
  vars:
    nats_server_http_port: {http}
    nats_fleet_wait_seconds: 2
    _nats_fleet_rotate_moved: {moved}
    _nats_fleet_rotate_issued: {issued}
"""


@pytest.fixture
def server(nats_binary, start_server, module, tmp_path):
    binary, _version = nats_binary
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = module("nsc_operator", dict(base))
    port, http = free_port(), free_port()
    started = start_server(binary, operator_mode_conf(tmp_path, operator, port, http), "op", http)
    started.wait(lambda: started.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    assert not module("nsc_account", dict(base, name="APP", push=True, servers=[url], timeout=2.0)).get("failed")
    return dict(base=base, url=url, http=http)


def hold(url, *clients):
    """A process holding a connection per (name, creds file) until killed."""
    args = [sys.executable, "-c", HOLD, url] + [part for client in clients for part in client]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "connected", line + proc.stdout.read()
    return proc


def drain(tmp_path, url, tasks, *clients):
    """The drain tasks run while connections of ``clients`` (name, creds file) are open."""
    held = hold(url, *clients)
    try:
        return run_playbook(tmp_path, tasks)
    finally:
        held.kill()
        held.wait()


def test_a_client_on_a_replaced_key_stops_the_revocation_and_is_named(server, module, tmp_path):
    first = module("nsc_user", dict(server["base"], account="APP", name="orders"))
    kept = str(tmp_path / "kept.creds")
    with open(first["creds_file"]) as src, open(kept, "w") as dest:
        dest.write(src.read())
    rotated = module("nsc_user", dict(server["base"], account="APP", name="orders", rotate=True))
    assert rotated["previous_keys"] == [first["user_public_key"]], rotated
    tasks = DRAIN.format(http=server["http"], moved=json.dumps(dict(moved=["APP/orders"], pending=["APP/orders"])),
                         issued=json.dumps(dict(results=[dict(item=dict(key="APP/orders"),
                                                              previous_keys=[first["user_public_key"]])])))

    stopped = drain(tmp_path, server["url"], tasks, ("orders-old", kept), ("orders-new", rotated["creds_file"]))
    assert stopped.returncode != 0, stopped.stdout
    assert "1 connection(s) still authenticate with a key about to be revoked: orders-old from 127.0.0.1" in \
        " ".join(stopped.stdout.split()), stopped.stdout
    assert "orders-new" not in stopped.stdout
    # nothing was revoked: the old creds still get in
    still = hold(server["url"], ("orders-old", kept))
    still.kill()
    still.wait()

    passed = drain(tmp_path, server["url"], tasks, ("orders-new", rotated["creds_file"]))
    assert passed.returncode == 0, passed.stdout


def test_a_client_a_replaced_signing_key_issued_stops_its_retirement(server, module, tmp_path):
    """The user's key is the same before and after: only the key that issued it tells the connections apart."""
    push = dict(push=True, servers=[server["url"]], timeout=2.0)
    assert not module("nsc_account", dict(server["base"], name="SIGNED", signing_key=True, **push)).get("failed")
    first = module("nsc_user", dict(server["base"], account="SIGNED", name="orders"))
    kept = str(tmp_path / "kept.creds")
    with open(first["creds_file"]) as src, open(kept, "w") as dest:
        dest.write(src.read())
    rotated = module("nsc_account", dict(server["base"], name="SIGNED", signing_key=True, rotate_signing_key=True,
                                         **push))
    assert rotated["previous_signing_keys"] == [first["issuer"]], rotated
    tasks = DRAIN.format(http=server["http"], issued=json.dumps(dict(results=[])), moved=json.dumps(dict(
        moved=["SIGNED/orders"], pending=[], retiring=dict(SIGNED=rotated["previous_signing_keys"]))))

    stopped = drain(tmp_path, server["url"], tasks, ("orders-old", kept), ("orders-new", first["creds_file"]))
    assert stopped.returncode != 0, stopped.stdout
    assert "1 connection(s) still authenticate with a key about to be revoked: orders-old from 127.0.0.1" in \
        " ".join(stopped.stdout.split()), stopped.stdout

    passed = drain(tmp_path, server["url"], tasks, ("orders-new", first["creds_file"]))
    assert passed.returncode == 0, passed.stdout
