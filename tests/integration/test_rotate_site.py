"""Key rotation at a site of several servers, as rotate_creds runs it: each server's
creds file replaced, its links reopened one server at a time (throttle 1), so the
site keeps a link to the hub at every moment; then the old key revoked. No server
restarts on the way (its /varz start stays), and the old creds are refused."""

import os
import shutil
import threading
import time

import pytest

from test_credentials_life import connects
from test_leaf_reconnect import _conf, _replace

from conftest import free_port

NODES = ("edge-a", "edge-b")


def _cluster(conf, name, port, routes):
    return conf + 'cluster { name: "edge", listen: "127.0.0.1:%d", routes: [%s] }\n' % (
        port, ", ".join('"nats-route://127.0.0.1:%d"' % route for route in routes))


class LeafSampler(threading.Thread):
    """Polls the hub's /leafz: the fewest links of the account seen at once, and each
    remote server's longest time without a link."""

    def __init__(self, hub, account):
        super().__init__(daemon=True)
        self.hub, self.account, self.stop = hub, account, threading.Event()
        self.fewest, self.samples, self.gaps, self.missing_since = None, 0, {}, {}

    def run(self):
        while not self.stop.is_set():
            try:
                leafs = self.hub.get("leafz").get("leafs") or []
            except OSError:
                continue
            now = time.monotonic()
            names = [leaf.get("name") for leaf in leafs if leaf.get("account") == self.account]
            self.samples += 1
            self.fewest = len(names) if self.fewest is None else min(self.fewest, len(names))
            for node in NODES:
                if node in names:
                    since = self.missing_since.pop(node, None)
                    if since is not None:
                        self.gaps[node] = max(self.gaps.get(node, 0.0), now - since)
                else:
                    self.missing_since.setdefault(node, now)
            time.sleep(0.05)


@pytest.fixture
def site(nats_binary, start_server, module, tmp_path):
    """A hub and a site of two clustered servers, each with a leaf remote to the hub as APP/leaf."""
    binary, version = nats_binary
    if tuple(int(part) for part in version.split(".")[:2]) < (2, 12):
        pytest.skip("reopening a server's own links needs nats-server 2.12 (older sites: from the hub's side, "
                    "tests/integration/test_leaf_reconnect.py)")
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = module("nsc_operator", dict(base))
    hub_port, hub_http, leaf_port = free_port(), free_port(), free_port()
    (tmp_path / "hub").mkdir()
    hub = start_server(binary, _conf(tmp_path, operator, "hub", hub_port, hub_http, leaf_listen=leaf_port), "hub", hub_http)
    hub.wait(lambda: hub.get("healthz")["status"] == "ok")
    hub_url = "nats://127.0.0.1:%d" % hub_port
    account = module("nsc_account", dict(base, name="APP", push=True, servers=[hub_url], timeout=2.0, expected_servers=1))
    first = module("nsc_user", dict(base, account="APP", name="leaf"))
    ports = dict((node, (free_port(), free_port(), free_port())) for node in NODES)  # client, http, route
    nodes = {}
    for node in NODES:
        (tmp_path / node).mkdir()
        live = str(tmp_path / node / "leaf.creds")
        shutil.copy(first["creds_file"], live)
        client, http, route = ports[node]
        conf = _conf(tmp_path, operator, node, client, http, remote=(leaf_port, account["account_id"], live))
        # one JetStream domain for the site's servers
        conf = conf.replace('domain: "%s"' % node, 'domain: "edge"')
        conf = _cluster(conf, node, route, [ports[other][2] for other in NODES if other != node])
        nodes[node] = dict(server=start_server(binary, conf, node, http), url="nats://127.0.0.1:%d" % client, creds=live)
    for node in NODES:
        nodes[node]["server"].wait(lambda node=node: nodes[node]["server"].get("healthz")["status"] == "ok", 30)
    pushed = module("nsc_account", dict(base, name="APP", push=True, servers=[nodes["edge-a"]["url"]], timeout=2.0,
                                        expected_servers=2))
    assert not pushed.get("failed"), pushed
    hub.wait(lambda: sorted(leaf["name"] for leaf in hub.get("leafz")["leafs"] or []
                            if leaf["account"] == account["account_id"]) == list(NODES), 30)
    return dict(base=base, hub=hub, hub_url=hub_url, account=account["account_id"], first=first, nodes=nodes)


def test_a_site_of_two_servers_keeps_a_link_at_every_moment_and_no_server_restarts(site, module):
    base, hub, nodes = site["base"], site["hub"], site["nodes"]
    started = dict((node, nodes[node]["server"].get("varz")["start"]) for node in NODES)
    kept = site["first"]["creds_file"] + ".kept"
    shutil.copy(site["first"]["creds_file"], kept)
    system = os.path.join(base["keys_dir"], "creds", "fleet", "SYS", "sys.creds")

    rotated = module("nsc_user", dict(base, account="APP", name="leaf", rotate=True))
    assert rotated["changed"] and rotated["previous_keys"] == [site["first"]["user_public_key"]], rotated
    for node in NODES:
        _replace(rotated["creds_file"], nodes[node]["creds"])
    sampler = LeafSampler(hub, site["account"])
    sampler.start()
    try:
        # one server at a time, as rotate_reconnect.yml does with throttle: 1
        for node in NODES:
            done = module("nats_leaf_reconnect", dict(servers=[nodes[node]["url"]], creds=system, server_name=node,
                                                      accounts=[site["account"]], wait=20))
            assert done["changed"] and done["links"][0]["before"] != done["links"][0]["after"], done
        revoked = module("nsc_user", dict(base, account="APP", name="leaf", revoke_previous=True, push=True,
                                          servers=[site["hub_url"]], timeout=2.0, expected_servers=1))
        assert revoked["revoked_keys"] == [site["first"]["user_public_key"]], revoked
        pushed = module("nsc_account", dict(base, name="APP", push=True, servers=[nodes["edge-a"]["url"]], timeout=2.0,
                                            expected_servers=2))
        assert not pushed.get("failed"), pushed
        time.sleep(1.5)
    finally:
        sampler.stop.set()
        sampler.join(5)
    assert sampler.samples > 20, sampler.samples
    # the site never lost its last link to the hub; each server's own link was back within seconds
    assert sampler.fewest >= 1, (sampler.fewest, sampler.gaps)
    assert not sampler.missing_since, sampler.missing_since
    assert max(sampler.gaps.values() or [0.0]) < 10, sampler.gaps
    # reopened, not restarted
    assert dict((node, nodes[node]["server"].get("varz")["start"]) for node in NODES) == started
    for url in [site["hub_url"]] + [nodes[node]["url"] for node in NODES]:
        assert not connects(url, kept), url
        assert connects(url, rotated["creds_file"]), url
