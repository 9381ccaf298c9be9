"""Push round-trip times of an account JWT to a 9-server network with the full resolver.

Builds a store (operator, SYS with its system user, account APP) with the
collection's JWT and store code, starts nine nats-servers on loopback in
operator mode (full resolver, SYS preloaded) and, over one system-user
connection to the first server, pushes a changed APP JWT N times through the
collection's push function (``_nsc.common.push_account``) with expected=9:

  confirm    the claims update until all nine servers answered (or the timeout)
  lookup     the CLAIMS.LOOKUP read-back that follows it
  echo       reference: a plain request/reply on the same connection, answered by
             a subscriber on that connection (one server, no fan-out)
  ping       reference: $SYS.REQ.SERVER.PING gathered from all nine (fan-out
             without the resolver's work)

Layouts:
  cluster    one cluster of nine joined by routes
  hub-spoke  a 3-node hub cluster and two 3-node spoke clusters, each spoke
             server a leaf of a hub server with the system account bound; the
             script reports how many servers the push reaches there

Usage: .venv/bin/python bench/bench_push.py [--server BINARY] [--pushes 20]
                                            [--layout cluster|hub-spoke|both] [--timeout 2]
"""

import argparse
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt  # noqa: E402
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc  # noqa: E402
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient  # noqa: E402
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store  # noqa: E402

NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
SERVERS = 9


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the store ---------------------------------------------------------------------------------------


def build_store(workdir):
    """Operator, SYS (with the monitoring exports and user 'sys'), APP.
    Returns (store, operator seed, SYS public key, SYS JWT, APP public key)."""
    store = Store(os.path.join(workdir, "stores"), os.path.join(workdir, "keys"), "bench")
    store.write_marker()
    op_seed, sys_seed, app_seed, user_seed = (
        jwt.new_seed(kind) for kind in ("operator", "account", "account", "user"))
    sys_pub, app_pub = jwt.public_key(sys_seed), jwt.public_key(app_seed)
    sys_token = jwt.encode(jwt.account_claims("SYS", sys_pub, exports=nsc.SYSTEM_EXPORTS), op_seed)
    store.write_operator(jwt.encode(jwt.operator_claims("bench", jwt.public_key(op_seed), system_account=sys_pub),
                                    op_seed))
    store.write_account("SYS", sys_token)
    store.write_account("APP", jwt.encode(jwt.account_claims("APP", app_pub), op_seed))
    user_token = jwt.encode(jwt.user_claims("sys", jwt.public_key(user_seed)), sys_seed)
    store.write_user("SYS", "sys", user_token)
    store.write_creds("SYS", "sys", jwt.creds(user_token, user_seed))
    for seed in (op_seed, sys_seed, app_seed, user_seed):
        store.write_seed(seed)
    return store, op_seed, sys_pub, sys_token, app_pub


# -- the servers -------------------------------------------------------------------------------------


class Node:
    def __init__(self, name, cluster):
        self.name, self.cluster = name, cluster
        self.port, self.http, self.route, self.leaf = free_port(), free_port(), free_port(), free_port()
        self.remote = None
        self.proc = None

    def healthy(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.http, timeout=1) as reply:
                return reply.status == 200
        except OSError:
            return False

    def monitor(self, endpoint):
        import json
        with urllib.request.urlopen("http://127.0.0.1:%d/%s" % (self.http, endpoint), timeout=1) as reply:
            return json.loads(reply.read().decode())


def layout(kind):
    if kind == "cluster":
        return [Node("n%d" % i, "fleet") for i in range(1, SERVERS + 1)]
    hub = [Node("hub-%d" % i, "hub") for i in range(1, 4)]
    nodes = list(hub)
    for spoke in ("spoke1", "spoke2"):
        for i in range(1, 4):
            node = Node("%s-%d" % (spoke, i), spoke)
            node.remote = hub[i - 1]
            nodes.append(node)
    return nodes


def config(node, nodes, store, sys_pub, sys_token, workdir):
    peers = [n for n in nodes if n.cluster == node.cluster and n is not node]
    lines = [
        'server_name: "%s"' % node.name,
        'listen: "127.0.0.1:%d"' % node.port,
        'http: "127.0.0.1:%d"' % node.http,
        'operator: "%s"' % store.operator_jwt_path,
        'system_account: "%s"' % sys_pub,
        'resolver: { type: full, dir: "%s", allow_delete: false, interval: "2m" }'
        % os.path.join(workdir, "jwt", node.name),
        'resolver_preload: { %s: "%s" }' % (sys_pub, sys_token),
        'cluster { name: "%s", listen: "127.0.0.1:%d", routes: [%s] }'
        % (node.cluster, node.route, ", ".join('"nats-route://127.0.0.1:%d"' % n.route for n in peers)),
    ]
    if node.cluster == "hub":
        lines.append('leafnodes { listen: "127.0.0.1:%d" }' % node.leaf)
    if node.remote:
        lines.append('leafnodes { remotes: [ { url: "nats-leaf://127.0.0.1:%d", credentials: "%s", account: "%s" } ] }'
                     % (node.remote.leaf, store.creds_path("SYS", "sys"), sys_pub))
    return "\n".join(lines) + "\n"


def start(nodes, binary, store, sys_pub, sys_token, workdir):
    for node in nodes:
        path = os.path.join(workdir, "%s.conf" % node.name)
        with open(path, "w") as handle:
            handle.write(config(node, nodes, store, sys_pub, sys_token, workdir))
        node.log = open(path + ".log", "w")
        node.proc = subprocess.Popen([binary, "-c", path], stdout=node.log, stderr=subprocess.STDOUT)


def wait_ready(nodes, timeout=30):
    """Every server healthy with all its routes and leaf connections up."""
    deadline = time.monotonic() + timeout
    routes = {node.name: sum(1 for n in nodes if n.cluster == node.cluster) - 1 for node in nodes}
    leafs = {node.name: sum(1 for n in nodes if n.remote is node) + (1 if node.remote else 0) for node in nodes}
    pending = list(nodes)
    while pending and time.monotonic() < deadline:
        for node in list(pending):
            if node.proc.poll() is not None:
                raise SystemExit("%s exited: %s" % (node.name, open(node.log.name).read()[-2000:]))
            try:
                if (node.healthy() and node.monitor("routez")["num_routes"] >= routes[node.name]
                        and node.monitor("leafz")["leafnodes"] >= leafs[node.name]):
                    pending.remove(node)
            except OSError:
                pass
        time.sleep(0.1)
    if pending:
        raise SystemExit("not ready in %ss: %s" % (timeout, ", ".join(n.name for n in pending)))


def stop(nodes):
    for node in nodes:
        if node.proc and node.proc.poll() is None:
            node.proc.terminate()
    for node in nodes:
        if node.proc:
            try:
                node.proc.wait(10)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
            node.log.close()


# -- measuring ---------------------------------------------------------------------------------------


class Timed(object):
    """The facade with the time of each call the push function makes."""

    def __init__(self, client):
        self.client = client
        self.calls = []

    def gather(self, *args, **kwargs):
        began = time.perf_counter()
        replies = self.client.gather(*args, **kwargs)
        self.calls.append(("gather", time.perf_counter() - began, len(replies)))
        return replies

    def request(self, *args, **kwargs):
        began = time.perf_counter()
        try:
            return self.client.request(*args, **kwargs)
        finally:
            self.calls.append(("request", time.perf_counter() - began, 1))


def echo_responder(client):
    """A subscriber on the client's own connection that answers 'bench.echo'."""
    async def answer(msg):
        await msg.respond(msg.data)

    client._run(client._nc.subscribe("bench.echo", cb=answer))
    client.flush()


def measure(store, op_seed, app_pub, url, pushes, timeout):
    rows = []
    params = {"servers": [url], "creds": store.creds_path("SYS", "sys"), "timeout": timeout}
    with NatsClient(params) as client:
        echo_responder(client)
        for index in range(pushes + 1):
            token = jwt.encode(jwt.account_claims("APP", app_pub, limits={"conn": 1000 + index}), op_seed)
            began = time.perf_counter()
            client.request("bench.echo", b"x", timeout)
            echo = time.perf_counter() - began
            timed = Timed(client)
            began = time.perf_counter()
            pushed, unconfirmed, read_back = nsc.push_account(timed, app_pub, token, timeout, SERVERS)
            total = time.perf_counter() - began
            began = time.perf_counter()
            pings = len(client.gather("$SYS.REQ.SERVER.PING", b"", timeout, expect=SERVERS))
            ping = time.perf_counter() - began
            confirm = [c for c in timed.calls if c[0] == "gather"][0][1]
            lookup = [c for c in timed.calls if c[0] == "request"][0][1]
            if index:  # the first push creates the account on the resolvers: warm-up
                rows.append(dict(confirm=confirm, lookup=lookup, total=total, echo=echo, ping=ping,
                                 answered=len({p["server"] for p in pushed if p["ok"]}), read_back=read_back, pings=pings,
                                 servers=sorted(p["server"] for p in pushed if p["ok"]),
                                 unconfirmed=unconfirmed))
    return rows, token


def on_disk(nodes, workdir, app_pub, token):
    """Servers whose resolver directory holds ``token`` for APP."""
    held = []
    for node in nodes:
        path = os.path.join(workdir, "jwt", node.name, "%s.jwt" % app_pub)
        if os.path.exists(path) and open(path).read().strip() == token:
            held.append(node.name)
    return held


def p90(values):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def report(kind, version, rows, names):
    ms = 1000.0
    print("\n%s layout, nats-server %s, %d pushes, expected=%d" % (kind, version, len(rows), SERVERS))
    print("%-10s %10s %10s %10s" % ("", "median ms", "p90 ms", "max ms"))
    for key in ("confirm", "lookup", "total", "echo", "ping"):
        values = [row[key] for row in rows]
        print("%-10s %10.2f %10.2f %10.2f" % (
            key, statistics.median(values) * ms, p90(values) * ms, max(values) * ms))
    echo = statistics.median(row["echo"] for row in rows)
    print("ratio confirm/echo %.1f, (confirm+lookup)/echo %.1f, confirm/ping %.2f" % (
        statistics.median(row["confirm"] for row in rows) / echo,
        statistics.median(row["total"] for row in rows) / echo,
        statistics.median(row["confirm"] for row in rows) / statistics.median(row["ping"] for row in rows)))
    answered = sorted({row["answered"] for row in rows})
    pings = sorted({row["pings"] for row in rows})
    print("distinct servers confirming each push: %s of %d; answering PING: %s; read-back ok: %d of %d" % (
        "/".join(map(str, answered)), SERVERS, "/".join(map(str, pings)), sum(row["read_back"] for row in rows),
        len(rows)))
    never = sorted({n for row in rows for n in row["servers"]} ^ set(names))
    if never:
        print("servers that never confirmed: %s" % ", ".join(never))


def run(kind, binary, version, pushes, timeout):
    workdir = tempfile.mkdtemp(prefix="bench-push-")
    nodes = layout(kind)
    try:
        store, op_seed, sys_pub, sys_token, app_pub = build_store(workdir)
        began = time.perf_counter()
        start(nodes, binary, store, sys_pub, sys_token, workdir)
        wait_ready(nodes)
        print("\n%s: %d servers ready in %.1f s" % (kind, len(nodes), time.perf_counter() - began))
        rows, token = measure(store, op_seed, app_pub, "nats://127.0.0.1:%d" % nodes[0].port, pushes, timeout)
        report(kind, version, rows, [n.name for n in nodes])
        held = on_disk(nodes, workdir, app_pub, token)
        print("the last JWT is in the resolver directory of %d of %d servers%s" % (
            len(held), len(nodes), "" if len(held) == len(nodes) else
            " (missing: %s)" % ", ".join(sorted(set(n.name for n in nodes) - set(held)))))
    finally:
        stop(nodes)
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--server", default=NATS_SERVER, help="nats-server binary (default: the venv's)")
    parser.add_argument("--pushes", type=int, default=20)
    parser.add_argument("--layout", choices=["cluster", "hub-spoke", "both"], default="cluster")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for the nine answers")
    args = parser.parse_args()
    version = subprocess.run([args.server, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip().rsplit("v", 1)[-1]
    for kind in (["cluster", "hub-spoke"] if args.layout == "both" else [args.layout]):
        run(kind, args.server, version, args.pushes, args.timeout)


if __name__ == "__main__":
    main()
