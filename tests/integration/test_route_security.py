"""TLS and route authentication as the role renders them (``_server_config.build_config``), run by real
nats-servers on loopback: a cluster forms its route and refuses rogue servers, a leaf link verifies its hub
(and the hub its leaves), the client port refuses plaintext, and a certificate renewed in place is served
after a reload. On the PyPI build (2.15.1) and on 2.9.10, which behave alike here except where noted."""

import asyncio
import hashlib
import json
import signal
import socket
import ssl
import time
from urllib.parse import quote

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

from conftest import free_port
from pki import CA, fingerprint

FLEET_CA = "fleet"
# characters a URL must escape, as the route URLs carry the password
PASSWORD = "fleet/route:secret@0123%45+6789"
WRONG_PASSWORD = "not-the-route-secret-987654321"


def settings(ca, name, **over):
    """The role's settings for server ``name`` on loopback, with a certificate from ``ca``."""
    cert, key = ca.issue(name)
    s = {"name": name, "inventory_hostname": name, "groups": {}, "hostvars": {},
         "listen_host": "127.0.0.1", "port": free_port(), "http_host": "127.0.0.1", "http_port": free_port(),
         "tls_cert_file": cert, "tls_key_file": key, "tls_ca_file": ca.path, "tls_timeout": 2,
         "jetstream_enabled": False, "allow_anonymous": True}
    s.update(over)
    return s


def render(s, version):
    """The config the role builds from ``s`` for a server of ``version``."""
    conf, _dropped = sc.prune_for_version(sc.build_config(s), version)
    return sc.render(conf)


def start(start_server, nats_binary, s):
    """A server running the config the role builds from ``s`` for this binary's version."""
    binary, version = nats_binary
    return start_server(binary, render(s, version), s["name"], s["http_port"])


def impostor_ca(tmp_path):
    """A CA of its own with the fleet CA's name: a server's TLS client only presents a certificate whose issuer
    the peer names as acceptable, so this is what makes a rogue's certificate reach the peer's verification."""
    folder = tmp_path / "impostor"
    folder.mkdir(exist_ok=True)
    return CA(folder, FLEET_CA)


def log(server):
    with open(server.log.name) as handle:
        return handle.read()


def log_shows(server, text, since=0):
    return text in log(server)[since:]


def peers(server):
    """IDs of the servers ``server`` holds routes to (2.10+ pools several connections per peer)."""
    return sorted(set(route["remote_id"] for route in server.get("routez").get("routes") or []))


def server_id(server):
    return server.get("varz")["server_id"]


def holds(observe, expected, seconds):
    """``observe()`` returns ``expected`` at every check for ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        seen = observe()
        assert seen == expected, seen
        if time.monotonic() >= deadline:
            return
        time.sleep(0.1)


def read_info(sock):
    """The INFO line a NATS listener sends first, in plaintext."""
    line = b""
    while not line.endswith(b"\r\n"):
        chunk = sock.recv(1)
        assert chunk, "closed before INFO: %r" % line
        line += chunk
    assert line.startswith(b"INFO "), line
    return json.loads(line[5:])


def served_certificate(port, ca_path, client_cert=None, info_first=True):
    """SHA-256 (hex) of the certificate the listener at ``port`` serves, verified against ``ca_path``. The
    client and leaf node listeners send their INFO line in plaintext and then upgrade to TLS; the route
    listener starts with the TLS handshake and sends INFO inside it (2.9.10 and 2.15.1 alike)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        if info_first:
            info = read_info(raw)
            assert info.get("tls_required") or info.get("tls_available"), info
        context = ssl.create_default_context(cafile=ca_path)
        if client_cert:
            context.load_cert_chain(*client_cert)
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            if not info_first:
                assert "cluster" in read_info(tls)
            return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()


# --------------------------------------------------------------------------
# a cluster and rogues


@pytest.fixture
def fleet(nats_binary, start_server, tmp_path):
    """Two servers of cluster ``hub`` with TLS and route authentication (and a leaf node listener), their
    route up."""
    ca = CA(tmp_path, FLEET_CA)
    cluster_ports = [free_port(), free_port()]
    nodes = []
    for index, name in enumerate(("n1", "n2")):
        s = settings(ca, name, cluster_name="hub", cluster_port=cluster_ports[index], cluster_password=PASSWORD,
                     cluster_routes=["nats-route://127.0.0.1:%d" % cluster_ports[1 - index]],
                     leafnodes_port=free_port())
        nodes.append((s, start(start_server, nats_binary, s)))
    (_s1, n1), (_s2, n2) = nodes
    ids = [n1.wait(lambda: server_id(n1)), n2.wait(lambda: server_id(n2))]
    n1.wait(lambda: peers(n1) == [ids[1]], 10)
    n2.wait(lambda: peers(n2) == [ids[0]], 10)
    return {"ca": ca, "nodes": nodes, "ids": ids, "tmp_path": tmp_path}


def test_the_cluster_forms_its_route_over_tls_with_authentication(fleet):
    """Two servers built by the role route to each other over TLS verified both ways, authenticated as the
    route user: each holds a route to the other and to nobody else."""
    (_s1, n1), (_s2, n2) = fleet["nodes"]
    for server, other in ((n1, 1), (n2, 0)):
        assert peers(server) == [fleet["ids"][other]]
        cluster = server.get("varz")["cluster"]
        assert cluster["tls_required"] is True and cluster["tls_verify"] is True, cluster
    assert "Authorization Violation" not in log(n1) + log(n2)


def test_the_cluster_routes_to_the_address_a_member_advertises_and_verifies_it_by_name(
        nats_binary, start_server, tmp_path):
    """n2 and n3 each route only to n1 and learn of each other from its gossip: they open the route between them
    to the address the other advertises (``nats_server_cluster_advertise``), and verify the certificate against
    it. Advertised by name, it verifies as the name, whatever address the host has; an advertised address that
    does not lead to the server leaves that route out (a peer's address that its certificate no longer states
    does the same, after a restart gives it another)."""
    ca = CA(tmp_path, FLEET_CA)
    ports = [free_port(), free_port(), free_port()]

    def node(index, advertise):
        """n1 routes to n2, n2 and n3 to n1."""
        route = "nats-route://localhost:%d" % ports[1 if index == 0 else 0]
        return start(start_server, nats_binary, settings(
            ca, "n%d" % (index + 1), cluster_name="hub", cluster_port=ports[index], cluster_password=PASSWORD,
            cluster_routes=[route], cluster_advertise=advertise))

    # n2 and n3 advertise loopback ports nobody listens on: each learns the other's from n1 and cannot route there
    # (either of them opening the route would be enough for it to form)
    n1 = node(0, "localhost")
    n2, n3 = node(1, "127.0.0.1:%d" % free_port()), node(2, "127.0.0.1:%d" % free_port())
    ids = [n.wait(lambda n=n: server_id(n)) for n in (n1, n2, n3)]
    n1.wait(lambda: peers(n1) == sorted([ids[1], ids[2]]), 15)
    holds(lambda: (peers(n2), peers(n3)), ([ids[0]], [ids[0]]), 3)
    n3.stop()

    # n3 advertised by its name: n2 opens the route to it, and verifies its certificate as localhost
    n3 = node(2, "localhost")
    ids[2] = n3.wait(lambda: server_id(n3))
    n2.wait(lambda: peers(n2) == sorted([ids[0], ids[2]]), 15)
    n3.wait(lambda: peers(n3) == sorted([ids[0], ids[1]]), 15)
    assert "certificate is valid for" not in log(n2) + log(n3)


# name -> (the rogue's route TLS, its route credentials, what the cluster's server logs on refusing it, what the
# rogue logs then), the same on 2.9.10 and 2.15.1
ROGUES = {
    # the attack measured before the cluster had TLS and a password: a stock server that routes to the
    # cluster port with the cluster's name
    "plaintext-no-credentials": (None, None, "TLS route handshake error", "Router connection closed"),
    "untrusted-cert-no-credentials": ("impostor", None, "TLS route handshake error", "Router connection closed"),
    "fleet-cert-no-password": ("fleet", None, "authentication error", "Authorization Violation"),
    "fleet-cert-wrong-password": ("fleet", ("route", WRONG_PASSWORD), "authentication error",
                                  "Authorization Violation"),
    "password-plaintext": (None, ("route", PASSWORD), "TLS route handshake error", "Router connection closed"),
    "password-untrusted-cert": ("impostor", ("route", PASSWORD), "TLS route handshake error",
                                "Router connection closed"),
}


def rogue_conf(fleet, tls, credentials, ports):
    """A stock server (not the role's config) that routes to n1's cluster port with the cluster's name."""
    s1 = fleet["nodes"][0][0]
    userinfo = "%s:%s@" % (quote(credentials[0], safe=""), quote(credentials[1], safe="")) if credentials else ""
    cluster = {"name": s1["cluster_name"], "listen": "127.0.0.1:%d" % ports["cluster"],
               "routes": ["nats-route://%s127.0.0.1:%d" % (userinfo, s1["cluster_port"])]}
    if tls:
        ca = fleet["ca"] if tls == "fleet" else impostor_ca(fleet["tmp_path"])
        cert, key = ca.issue("rogue")
        # the rogue skips verifying the cluster's certificate: only the cluster's own checks stand
        cluster["tls"] = {"cert_file": cert, "key_file": key, "insecure": True, "timeout": 2}
    return {"server_name": "rogue", "listen": "127.0.0.1:%d" % ports["client"],
            "http": "127.0.0.1:%d" % ports["http"], "cluster": cluster}


def refused_for(seconds, n1, n2, rogue, ids):
    """For ``seconds``, at checks 0.1 s apart: the cluster's servers hold exactly their route to each other, and no
    route connection of the rogue lasts from one check to the next. (2.15.1 lists n1 among the rogue's routes for
    about a millisecond of an attempt refused for its credentials: the rogue takes n1's INFO before n1's
    'Authorization Violation' arrives; n1 never lists the rogue. 2.9.10 showed no such moment in 3,000 checks.)"""
    deadline = time.monotonic() + seconds
    before = set()
    while True:
        assert (peers(n1), peers(n2)) == ([ids[1]], [ids[0]])
        now = set(route["rid"] for route in rogue.get("routez").get("routes") or [])
        assert not before & now, rogue.get("routez")
        if time.monotonic() >= deadline:
            return
        before = now
        time.sleep(0.1)


async def deliveries(publish_url, listen_url, rogue_url, ca_path, wait=5, settle=0.2):
    """Publish from a client of ``publish_url`` until a subscriber at ``listen_url`` has a message (for up to
    ``wait`` seconds), once more, and ``settle`` seconds later return (messages that subscriber got, messages a
    subscriber on ``>`` at ``rogue_url`` got; 0 without a rogue). Shared with the gateway tests."""
    import nats

    tls = ssl.create_default_context(cafile=ca_path)
    publisher = await nats.connect(publish_url, tls=tls, allow_reconnect=False, connect_timeout=3)
    subscriber = await nats.connect(listen_url, tls=tls, allow_reconnect=False, connect_timeout=3)
    rogue = await nats.connect(rogue_url, allow_reconnect=False, connect_timeout=3) if rogue_url else None
    got = {"legit": 0, "rogue": 0}

    def counter(name):
        async def count(_msg):
            got[name] += 1
        return count

    try:
        if rogue:
            await rogue.subscribe(">", cb=counter("rogue"))
            await rogue.flush()
        await subscriber.subscribe("orders.>", cb=counter("legit"))
        await subscriber.flush()
        deadline = time.monotonic() + wait
        while not got["legit"] and time.monotonic() < deadline:
            await publisher.publish("orders.secret", b"for the fleet only")
            await publisher.flush()
            await asyncio.sleep(0.05)
        await publisher.publish("orders.secret", b"for the fleet only")
        await publisher.flush()
        await asyncio.sleep(settle)
        return got["legit"], got["rogue"]
    finally:
        for nc in (publisher, subscriber, rogue):
            if nc:
                await nc.close()


@pytest.mark.parametrize("case", sorted(ROGUES))
def test_a_rogue_server_cannot_join_the_cluster(fleet, nats_binary, start_server, case):
    """A server that lacks either a certificate from the fleet CA or the route password gets no route: the
    cluster's server logs why it refused, the cluster keeps its one route, the rogue keeps none, and a message
    published in the cluster reaches the cluster's subscriber but not one on ``>`` at the rogue."""
    tls, credentials, refusal, rogue_sees = ROGUES[case]
    (s1, n1), (s2, n2) = fleet["nodes"]
    id1, id2 = fleet["ids"]
    since = len(log(n1))
    ports = {"client": free_port(), "http": free_port(), "cluster": free_port()}
    rogue = start_server(nats_binary[0], sc.render(rogue_conf(fleet, tls, credentials, ports)), "rogue",
                         ports["http"])
    n1.wait(lambda: log_shows(n1, refusal, since), 10)
    rogue.wait(lambda: log_shows(rogue, rogue_sees), 5)
    # the rogue retries every second: a second attempt is refused too
    refused_for(1.2, n1, n2, rogue, fleet["ids"])
    rogue.wait(lambda: peers(rogue) == [], 2)
    legit, leaked = asyncio.run(deliveries("nats://127.0.0.1:%d" % s1["port"], "nats://127.0.0.1:%d" % s2["port"],
                                           "nats://127.0.0.1:%d" % ports["client"], fleet["ca"].path))
    assert legit >= 1 and leaked == 0, (legit, leaked)
    assert (peers(n1), peers(n2)) == ([id2], [id1])


# --------------------------------------------------------------------------
# leaf links


def test_a_leaf_link_verifies_the_hub_and_the_hub_verifies_its_leaves(nats_binary, start_server, tmp_path):
    """A leaf node whose remote trusts the fleet CA connects to a hub whose leaf node listener runs TLS; one
    that trusts another CA does not (it refuses the hub's certificate, though its own is from the fleet CA), and
    with leafnodes_tls_verify the hub refuses a leaf whose certificate does not come from the fleet CA."""
    ca = CA(tmp_path, FLEET_CA)
    stranger = CA(tmp_path, "stranger")
    leaf_port = free_port()
    hub = start(start_server, nats_binary, settings(ca, "hub", leafnodes_port=leaf_port, leafnodes_tls_verify=True))
    remote = [{"url": "nats-leaf://127.0.0.1:%d" % leaf_port}]
    good = start(start_server, nats_binary, settings(ca, "good", leafnode_remotes=remote))
    distrusting = start(start_server, nats_binary, settings(ca, "distrusting", leafnode_remotes=remote,
                                                            tls_ca_file=stranger.path))
    cert, key = impostor_ca(tmp_path).issue("forged")
    forged = start(start_server, nats_binary, settings(ca, "forged", leafnode_remotes=remote, tls_cert_file=cert,
                                                       tls_key_file=key))
    good.wait(lambda: good.get("leafz")["leafnodes"] == 1, 10)
    distrusting.wait(lambda: log_shows(distrusting, "certificate signed by unknown authority"), 10)
    forged.wait(lambda: log_shows(forged, "Leafnode connection closed"), 10)
    hub.wait(lambda: log_shows(hub, "certificate signed by unknown authority"), 10)
    holds(lambda: [server.get("leafz")["leafnodes"] for server in (hub, good, distrusting, forged)], [1, 1, 0, 0],
          1.2)


# --------------------------------------------------------------------------
# clients


async def _round_trip(url, tls):
    import nats

    nc = await nats.connect(url, tls=tls, allow_reconnect=False, connect_timeout=3, max_reconnect_attempts=0)
    try:
        sub = await nc.subscribe("ping")
        await nc.publish("ping", b"pong")
        return (await sub.next_msg(timeout=3)).data
    finally:
        await nc.close()


def test_the_client_port_refuses_plaintext_and_takes_clients_that_trust_the_ca(nats_binary, start_server, tmp_path):
    """The client port requires TLS: a client that answers its INFO in plaintext is disconnected without a reply,
    a client that does not trust the fleet CA fails its handshake, and one with the CA round-trips a message."""
    ca = CA(tmp_path, FLEET_CA)
    s = settings(ca, "c1")
    server = start(start_server, nats_binary, s)
    server.wait(lambda: server.get("healthz")["status"] == "ok", 10)
    url = "nats://127.0.0.1:%d" % s["port"]

    with socket.create_connection(("127.0.0.1", s["port"]), timeout=5) as raw:
        assert read_info(raw)["tls_required"] is True
        raw.sendall(b'CONNECT {"verbose":false,"pedantic":false,"tls_required":false}\r\nPING\r\n')
        reply = b""
        try:
            for chunk in iter(lambda: raw.recv(4096), b""):
                reply += chunk
        except ConnectionResetError:
            pass
    # 2.9.10 and 2.15.1 both close the connection at once, sending nothing (no PONG, no -ERR)
    assert reply == b"", reply

    # nats-py without a TLS context upgrades by itself when INFO says tls_required, with the system's roots:
    # the fleet's certificate does not verify
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(_round_trip(url, None))
    assert asyncio.run(_round_trip(url, ssl.create_default_context(cafile=ca.path))) == b"pong"


def test_while_clients_move_to_tls_the_client_port_takes_both(nats_binary, start_server, tmp_path):
    """With tls_allow_non_tls the client port serves TLS and takes plaintext clients too (on 2.9.10 as well)."""
    ca = CA(tmp_path, FLEET_CA)
    s = settings(ca, "c1", tls_allow_non_tls=True)
    server = start(start_server, nats_binary, s)
    server.wait(lambda: server.get("healthz")["status"] == "ok", 10)
    url = "nats://127.0.0.1:%d" % s["port"]
    with socket.create_connection(("127.0.0.1", s["port"]), timeout=5) as raw:
        info = read_info(raw)
        assert not info.get("tls_required") and info.get("tls_available") is True, info
        raw.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        assert raw.recv(4096).startswith(b"PONG"), "a plaintext client was refused"
    assert asyncio.run(_round_trip(url, ssl.create_default_context(cafile=ca.path))) == b"pong"
    assert served_certificate(s["port"], ca.path) == fingerprint(s["tls_cert_file"])


# --------------------------------------------------------------------------
# renewing a certificate


def test_a_certificate_renewed_in_place_is_served_after_a_reload(fleet, nats_binary, start_server):
    """Replacing a server's certificate and key at the same paths changes nothing until a reload (SIGHUP);
    after it the client, route and leaf node listeners serve the new certificate, the route stands, and a peer
    that connects afresh verifies the new certificate and routes again."""
    (s1, n1), (s2, n2) = fleet["nodes"]
    ca = fleet["ca"]
    peer_cert = (s2["tls_cert_file"], s2["tls_key_file"])
    listeners = {"client": s1["port"], "cluster": s1["cluster_port"], "leafnodes": s1["leafnodes_port"]}

    def served():
        return {name: served_certificate(port, ca.path, peer_cert, info_first=name != "cluster")
                for name, port in listeners.items()}

    old = fingerprint(s1["tls_cert_file"])
    assert served() == dict.fromkeys(listeners, old)
    renewed, _key = ca.issue("n1")
    assert renewed == s1["tls_cert_file"]
    new = fingerprint(renewed)
    assert new != old
    assert served() == dict.fromkeys(listeners, old)

    n1.proc.send_signal(signal.SIGHUP)
    n1.wait(lambda: served()["client"] == new, 10)
    assert served() == dict.fromkeys(listeners, new)
    assert log_shows(n1, "Reloaded")
    assert peers(n1) == [fleet["ids"][1]] and peers(n2) == [fleet["ids"][0]]

    n2.stop()
    n1.wait(lambda: peers(n1) == [], 10)
    again = start(start_server, nats_binary, s2)
    again_id = again.wait(lambda: server_id(again), 10)
    n1.wait(lambda: peers(n1) == [again_id], 10)
    again.wait(lambda: peers(again) == [fleet["ids"][0]], 10)
