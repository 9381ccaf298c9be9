"""A leaf remote's creds file is read at each connect: once it is replaced, nats_leaf_reconnect
(2.12+) brings the link back on the new creds before the old key is revoked; older servers
reconnect with the new file only when the revocation closes the link."""

import os
import shutil
import signal
import threading
import time

from conftest import free_port, operator_mode_conf


def _conf(tmp_path, operator, name, port, http, leaf_listen=None, remote=None):
    conf = operator_mode_conf(tmp_path / name, operator, port, http, domain=name).replace(
        'server_name: "n1"', 'server_name: "%s"' % name)
    if leaf_listen:
        conf += 'leafnodes { listen: "127.0.0.1:%d" }\n' % leaf_listen
    if remote:
        conf += 'leafnodes { remotes: [ { urls: ["nats-leaf://127.0.0.1:%d"], account: "%s", credentials: "%s" } ] }\n' % remote
    return conf


def _replace(src, dest):
    shutil.copy(src, dest + ".new")
    os.replace(dest + ".new", dest)


def _ids(server):
    return [leaf.get("id") for leaf in server.get("leafz").get("leafs") or []]


def _a_link_that_is_down_is_waited_for(module, base, hub, live, good, reconnect):
    """A link that is down when the module starts (here: creds of an account the hub does not know) is
    waited for, then reopened; one that stays down fails the task once the wait is over, naming it."""
    module("nsc_account", dict(base, name="STRAY"))
    stray = module("nsc_user", dict(base, account="STRAY", name="stray"))
    _replace(stray["creds_file"], live)
    failed = module("nats_leaf_reconnect", dict(reconnect, wait=3))
    assert failed.get("failed") and "did not come back within 3s" in failed["msg"], failed
    assert _ids(hub) == []
    still_down = module("nats_leaf_reconnect", dict(reconnect, wait=2))
    assert still_down.get("failed") and "came up within 2s" in still_down["msg"], still_down
    assert reconnect["accounts"][0] in still_down["msg"]
    fixed = threading.Timer(2.0, _replace, (good, live))
    fixed.start()
    try:
        back = module("nats_leaf_reconnect", reconnect)
    finally:
        fixed.join()
    assert back["changed"] and back["links"][0]["before"] and back["links"][0]["after"], back
    hub.wait(lambda: len(_ids(hub)) == 1, 10)


def test_a_replaced_creds_file_is_used_at_the_next_connect(nats_binary, start_server, module, tmp_path):
    binary, version = nats_binary
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = module("nsc_operator", dict(base))
    hub_port, hub_http, leaf_port, edge_port, edge_http = (free_port() for _port in range(5))
    for name in ("hub", "edge"):
        (tmp_path / name).mkdir()
    hub = start_server(binary, _conf(tmp_path, operator, "hub", hub_port, hub_http, leaf_listen=leaf_port), "hub", hub_http)
    hub.wait(lambda: hub.get("healthz")["status"] == "ok")
    hub_url = "nats://127.0.0.1:%d" % hub_port
    account = module("nsc_account", dict(base, name="APP", push=True, servers=[hub_url], timeout=2.0, expected_servers=1))
    first = module("nsc_user", dict(base, account="APP", name="leaf"))
    live = str(tmp_path / "leaf.creds")
    shutil.copy(first["creds_file"], live)
    edge = start_server(binary, _conf(tmp_path, operator, "edge", edge_port, edge_http,
                                      remote=(leaf_port, account["account_id"], live)), "edge", edge_http)
    edge.wait(lambda: edge.get("healthz")["status"] == "ok")
    edge_url = "nats://127.0.0.1:%d" % edge_port
    assert not module("nsc_account", dict(base, name="APP", push=True, servers=[edge_url], timeout=2.0, expected_servers=1)).get("failed")
    hub.wait(lambda: len(_ids(hub)) == 1, 30)
    connection = dict(servers=[edge_url], creds=os.path.join(base["keys_dir"], "creds", "fleet", "SYS", "sys.creds"))
    reconnect = dict(connection, server_name="edge", accounts=[account["account_id"]], wait=20)

    rotated = module("nsc_user", dict(base, account="APP", name="leaf", rotate=True))
    _replace(rotated["creds_file"], live)
    edge.proc.send_signal(signal.SIGHUP)  # a reload does not reconnect the link
    time.sleep(1)
    assert len(_ids(hub)) == 1 and module("nsc_user", dict(base, account="APP", name="leaf"))["previous_keys"]

    if tuple(int(part) for part in version.split(".")[:2]) >= (2, 12):
        checked = module("nats_leaf_reconnect", reconnect, check_mode=True)
        assert checked["changed"] and checked["links"][0]["after"] == [], checked
        done = module("nats_leaf_reconnect", reconnect)
        assert done["changed"] and done["links"][0]["before"] != done["links"][0]["after"], done
        _a_link_that_is_down_is_waited_for(module, base, hub, live, rotated["creds_file"], reconnect)
        # the same from the hub's side, as for an edge server older than 2.12
        from_hub = module("nats_leaf_reconnect", dict(connection, servers=[hub_url], remote_name="edge",
                                                      accounts=[account["account_id"]], wait=20))
        assert from_hub["changed"] and from_hub["links"][0]["before"] != from_hub["links"][0]["after"], from_hub
        link = _ids(hub)
        revoked = module("nsc_user", dict(base, account="APP", name="leaf", revoke_previous=True, push=True,
                                          servers=[hub_url], timeout=2.0, expected_servers=1))
        assert revoked["revoked_keys"] == [first["user_public_key"]], revoked
        time.sleep(2)
        assert _ids(hub) == link  # already on the new key: the revocation closed nothing
    else:
        refused = module("nats_leaf_reconnect", reconnect)
        assert refused.get("failed") and "2.12 or newer" in refused["msg"], refused
        module("nsc_user", dict(base, account="APP", name="leaf", revoke_previous=True, push=True,
                                servers=[hub_url], timeout=2.0, expected_servers=1))
        # the revocation closes the old link; the edge connects again with the file's new creds
        hub.wait(lambda: len(_ids(hub)) == 1 and "Credentials Revoked" in open(hub.log.name).read(), 20)
    time.sleep(1.5)
    assert len(_ids(hub)) == 1
