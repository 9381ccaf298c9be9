"""A push through the hub is confirmed by every server behind it, even one whose
leaf link comes up after the first claims update went out: the update is sent
again until every expected server confirmed, and a push that stays unconfirmed
fails naming the account and who never confirmed."""

import asyncio
import threading

import nats

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient

from conftest import free_port
# hub and edge in operator mode, each its own JetStream domain, the edge a leaf of the hub
from test_leaf_reconnect import _conf


class UpdateWatch(threading.Thread):
    """Counts the claims updates the hub receives; ``on_first`` runs when the first arrives."""

    def __init__(self, url, creds, on_first):
        super().__init__(daemon=True)
        self.url, self.creds, self.on_first = url, creds, on_first
        self.count, self.ready, self.stop = 0, threading.Event(), threading.Event()

    def run(self):
        asyncio.run(self._watch())

    async def _watch(self):
        nc = await nats.connect(self.url, user_credentials=self.creds, allow_reconnect=False, connect_timeout=3)
        sub = await nc.subscribe("$SYS.REQ.CLAIMS.UPDATE")
        await nc.flush()
        self.ready.set()
        try:
            while not self.stop.is_set():
                try:
                    await sub.next_msg(timeout=0.2)
                except nats.errors.TimeoutError:
                    continue
                self.count += 1
                if self.count == 1:
                    self.on_first()
        finally:
            await nc.close()


def test_servers_that_join_late_get_the_push_again(nats_binary, start_server, module, tmp_path):
    binary, _version = nats_binary
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = module("nsc_operator", dict(base))
    account_args = dict(base, name="APP", jetstream=dict(streams=3))
    assert module("nsc_account", account_args)["changed"]

    hub_port, hub_http, leaf_port, edge_port, edge_http = (free_port() for _port in range(5))
    hub = start_server(binary, _conf(tmp_path, operator, "hub", hub_port, hub_http, leaf_listen=leaf_port), "hub", hub_http)
    hub.wait(lambda: hub.get("healthz")["status"] == "ok")
    hub_url = "nats://127.0.0.1:%d" % hub_port
    started = []

    def start_edge():
        # the edge's leaf link (system account bound) comes up only after the first update went out
        started.append(start_server(binary, _conf(tmp_path, operator, "edge", edge_port, edge_http, remote=(
            leaf_port, operator["system_account_id"], operator["sys_creds"])), "edge", edge_http))

    watch = UpdateWatch(hub_url, operator["sys_creds"], start_edge)
    watch.start()
    assert watch.ready.wait(10)
    push = dict(push=True, servers=[hub_url], timeout=2.0, expected_servers=2)
    try:
        pushed = module("nsc_account", dict(account_args, **push))
    finally:
        watch.stop.set()
        watch.join(5)
    assert not pushed.get("failed") and pushed["changed"] and pushed["unconfirmed"] == [], pushed
    assert sorted((p["server"], p["ok"]) for p in pushed["pushed"]) == [("edge", True), ("hub", True)], pushed
    # one send reached only the hub: the edge confirmed a later one
    assert watch.count >= 2, watch.count
    with NatsClient({"servers": ["nats://127.0.0.1:%d" % edge_port], "creds": operator["sys_creds"],
                     "timeout": 2.0}) as client:
        assert client.request("$SYS.REQ.ACCOUNT.%s.CLAIMS.LOOKUP" % pushed["account_id"]).decode() == pushed["jwt"]

    # a server that never answers: the task fails once every round is spent, naming the account and the count
    account_args["jetstream"]["streams"] = 4
    watch = UpdateWatch(hub_url, operator["sys_creds"], lambda: None)
    watch.start()
    assert watch.ready.wait(10)
    try:
        failed = module("nsc_account", dict(account_args, **dict(push, expected_servers=3, timeout=1.0)))
    finally:
        watch.stop.set()
        watch.join(5)
    assert failed.get("failed") and failed["changed"], failed
    assert "account 'APP'" in failed["msg"] and "(1 of 3 servers never answered)" in failed["msg"], failed["msg"]
    assert failed["unconfirmed"] == ["(1 of 3 servers never answered)"], failed
    assert watch.count == 3, watch.count
    # the next run finds the resolvers holding the JWT and sends nothing
    again = module("nsc_account", dict(account_args, **dict(push, expected_servers=2)))
    assert again["changed"] is False and not again.get("failed"), again
