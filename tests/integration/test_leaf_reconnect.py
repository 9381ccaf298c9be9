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


def _linked(nats_binary, start_server, module, tmp_path):
    """A hub and an edge server in operator mode, the edge's leaf remote bound to account APP with the creds file
    ``live``; the system user's connection to the edge."""
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
    return dict(version=version, base=base, hub=hub, edge=edge, hub_url=hub_url, edge_url=edge_url, live=live,
                account=account, first=first, connection=connection,
                reconnect=dict(connection, server_name="edge", accounts=[account["account_id"]], wait=20))


def _at_least_2_12(version):
    return tuple(int(part) for part in version.split(".")[:2]) >= (2, 12)


def test_a_replaced_creds_file_is_used_at_the_next_connect(nats_binary, start_server, module, tmp_path):
    linked = _linked(nats_binary, start_server, module, tmp_path)
    version, base, hub, edge, hub_url = (linked[key] for key in ("version", "base", "hub", "edge", "hub_url"))
    live, account, first, connection, reconnect = (
        linked[key] for key in ("live", "account", "first", "connection", "reconnect"))

    rotated = module("nsc_user", dict(base, account="APP", name="leaf", rotate=True))
    _replace(rotated["creds_file"], live)
    edge.proc.send_signal(signal.SIGHUP)  # a reload does not reconnect the link
    time.sleep(1)
    assert len(_ids(hub)) == 1 and module("nsc_user", dict(base, account="APP", name="leaf"))["previous_keys"]

    if _at_least_2_12(version):
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


def _timed(module, args, check_mode=False):
    started = time.monotonic()
    result = module("nats_leaf_reconnect", args, check_mode=check_mode)
    return result, time.monotonic() - started


def test_accounts_are_public_keys_as_the_server_names_them(nats_binary, start_server, module, tmp_path):
    """accounts: in operator mode the accounts' public keys, not their names. A name is refused at once, in check
    mode as in a real run, with the key to write instead; the link is left as it was."""
    linked = _linked(nats_binary, start_server, module, tmp_path)
    hub, key = linked["hub"], linked["account"]["account_id"]
    link = _ids(hub)
    for check_mode in (True, False):
        refused, seconds = _timed(module, dict(linked["reconnect"], accounts=["APP"], wait=30), check_mode)
        assert refused.get("failed") and not refused.get("changed"), refused
        assert refused["msg"] == ("leaf links of edge: accounts: APP is an account name; accounts takes account public "
                                  "keys (A...): APP is %s" % key), refused
        assert seconds < 15, seconds
    user = module("nsc_user", dict(linked["base"], account="APP", name="leaf"))["user_public_key"]
    refused, seconds = _timed(module, dict(linked["reconnect"], accounts=[key, user], wait=30))
    assert refused.get("failed") and "accounts: %s is a user public key; accounts takes account public keys (A...)" % (
        user) in refused["msg"], refused
    assert seconds < 15, seconds
    assert _ids(hub) == link


def test_a_remote_name_no_server_has_is_refused_at_once(nats_binary, start_server, module, tmp_path):
    """remote_name: a name no server has a leaf connection from is refused at once (in check mode too), naming the
    servers the links come from; a hub older than 2.12, which does not name them, is refused for its version."""
    linked = _linked(nats_binary, start_server, module, tmp_path)
    hub = linked["hub"]
    link = _ids(hub)
    args = dict(linked["connection"], servers=[linked["hub_url"]], remote_name="edge-9",
                accounts=[linked["account"]["account_id"]], wait=30)
    for check_mode in (True, False):
        refused, seconds = _timed(module, args, check_mode)
        assert refused.get("failed") and not refused.get("changed"), refused
        if _at_least_2_12(linked["version"]):
            assert refused["msg"] == ("leaf links of the hub side of edge-9: remote_name: no server named 'edge-9' has a "
                                      "leaf connection to these servers; their leaf connections come from: edge"), refused
        else:
            assert "remote_name: hub (%s) do not name the servers their leaf connections come from" % (
                linked["version"]) in refused["msg"] and "2.12 or newer" in refused["msg"], refused
        assert seconds < 15, seconds
    assert _ids(hub) == link


def test_check_mode_runs_the_checks_of_a_real_run(nats_binary, start_server, module, tmp_path):
    """check_mode: what a real run refuses, check mode refuses with the same message - here a link that is down and
    stays down for the whole wait - instead of predicting a change."""
    linked = _linked(nats_binary, start_server, module, tmp_path)
    if not _at_least_2_12(linked["version"]):
        checked = module("nats_leaf_reconnect", linked["reconnect"], check_mode=True)
        real = module("nats_leaf_reconnect", linked["reconnect"])
        assert checked.get("failed") and "2.12 or newer" in checked["msg"] and checked["msg"] == real["msg"], checked
        return
    base, hub, reconnect = linked["base"], linked["hub"], linked["reconnect"]
    module("nsc_account", dict(base, name="STRAY"))
    _replace(module("nsc_user", dict(base, account="STRAY", name="stray"))["creds_file"], linked["live"])
    dropped = module("nats_leaf_reconnect", dict(reconnect, wait=3))
    assert dropped.get("failed") and "did not come back within 3s" in dropped["msg"], dropped
    assert _ids(hub) == []
    checked = module("nats_leaf_reconnect", dict(reconnect, wait=2), check_mode=True)
    real = module("nats_leaf_reconnect", dict(reconnect, wait=2))
    assert checked.get("failed") and not checked.get("changed"), checked
    assert "no leaf connection bound to %s came up within 2s" % reconnect["accounts"][0] in checked["msg"], checked
    assert checked["msg"] == real["msg"], (checked, real)
