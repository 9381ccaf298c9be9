"""The account graph of nsc_info: listing, edges, dangling imports and the dot text,
from stores written in tmp dirs with the collection's own JWT and store code."""

import json

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import graph
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError

ORDERS_EXPORTS = [
    {"name": "orders", "subject": "orders.>", "type": "stream"},
    {"name": "prices", "subject": "prices.*", "type": "service", "response_type": "Stream"},
    {"name": "private", "subject": "private.>", "type": "stream", "token_req": True},
]


class StoreBuilder:
    """An operator in a tmp store; accounts and users signed as nsc would."""

    def __init__(self, tmp_path, operator="fleet"):
        self.store = Store(str(tmp_path / "stores"), str(tmp_path / "keys"), operator)
        self.operator_seed = jwt.new_seed("operator")
        self.seeds = [self.operator_seed]
        self.keys = {}
        self.store.write_marker()
        self.system = self.account("SYS")
        self.store.write_operator(jwt.encode(jwt.operator_claims(
            operator, jwt.public_key(self.operator_seed), system_account=self.system,
            service_urls=["nats://127.0.0.1:4222"]), self.operator_seed))

    def account(self, name, exports=(), imports=(), jetstream=None):
        seed = jwt.new_seed("account")
        self.seeds.append(seed)
        public = self.keys.setdefault(name, jwt.public_key(seed))
        self.store.write_account(name, jwt.encode(jwt.account_claims(
            name, public, jetstream=jetstream, exports=exports, imports=imports), self.operator_seed))
        return public

    def user(self, account, name, account_seed_index=-1, creds=True, **kwargs):
        seed = jwt.new_seed("user")
        self.seeds.append(seed)
        token = jwt.encode(jwt.user_claims(name, jwt.public_key(seed), **kwargs), self.seeds[account_seed_index])
        self.store.write_user(account, name, token)
        if creds:
            self.store.write_creds(account, name, jwt.creds(token, seed))
            self.store.write_seed(seed)


@pytest.fixture
def built(tmp_path):
    b = StoreBuilder(tmp_path)
    orders = b.account("ORDERS", exports=ORDERS_EXPORTS, jetstream={"disk_storage": 1024, "mem_storage": -1,
                                                                    "streams": 3, "consumer": -1})
    b.user("ORDERS", "svc", expires=2000000000)
    stranger = jwt.public_key(jwt.new_seed("account"))
    b.account("APP", imports=[
        {"name": "orders", "subject": "orders.eu.>", "account": orders, "type": "stream",
         "local_subject": "in.orders.>"},
        {"name": "prices", "subject": "prices.gold", "account": orders, "type": "service"},
        {"name": "nothing", "subject": "stock.>", "account": orders, "type": "stream"},
        {"name": "secret", "subject": "private.x", "account": orders, "type": "stream"},
        {"name": "elsewhere", "subject": "weather.>", "account": stranger, "type": "stream"},
    ])
    return b, orders, stranger


def test_subject_within_respects_wildcards():
    assert graph.subject_within("orders.eu.>", "orders.>")
    assert graph.subject_within("prices.gold", "prices.*")
    assert not graph.subject_within("prices.gold.x", "prices.*")
    assert not graph.subject_within("prices.>", "prices.*")
    assert not graph.subject_within("orders", "orders.>")
    assert graph.subject_within("a.b", "a.b") and not graph.subject_within("a.b", "a.c")


def test_listing_names_accounts_exports_imports_and_users(built):
    b, orders, stranger = built
    inventory = graph.read_inventory(b.store.store_dir, b.store.keys_dir)
    operators, accounts, users = graph.listing(inventory)
    assert [(o["name"], o["system_account"], o["service_urls"]) for o in operators] == [
        ("fleet", b.system, ["nats://127.0.0.1:4222"])]
    by_name = {a["name"]: a for a in accounts}
    assert sorted(by_name) == ["APP", "ORDERS", "SYS"] and by_name["SYS"]["system_account"]
    assert by_name["ORDERS"]["jetstream"] == {"disk_storage": 1024, "mem_storage": -1, "streams": 3,
                                              "consumers": -1}
    assert by_name["APP"]["jetstream"] is None
    exports = {e["name"]: e for e in by_name["ORDERS"]["exports"]}
    assert exports["prices"]["response_type"] == "Stream" and exports["orders"]["response_type"] is None
    assert exports["private"]["token_req"] and not exports["private"]["public"] and exports["orders"]["public"]
    imports = {i["name"]: i for i in by_name["APP"]["imports"]}
    assert imports["orders"]["from_account"] == "ORDERS" and imports["orders"]["local_subject"] == "in.orders.>"
    assert imports["elsewhere"]["from_account"] == stranger and not imports["orders"]["token"]
    [user] = users
    assert (user["account"], user["name"], user["expires"], user["bearer"]) == ("ORDERS", "svc", 2000000000, False)
    assert user["creds_file"] == b.store.creds_path("ORDERS", "svc")
    text = json.dumps([operators, accounts, users])
    assert not any(seed.decode() in text for seed in b.seeds)


def test_every_import_is_an_edge_and_dangling_ones_say_why(built):
    b, orders, stranger = built
    g = graph.build_graph(graph.read_inventory(b.store.store_dir, b.store.keys_dir))
    edges = {e["import_name"]: e for e in g["edges"]}
    assert sorted(edges) == ["elsewhere", "nothing", "orders", "prices", "secret"]
    assert (edges["orders"]["from"], edges["orders"]["to"]) == ("fleet/ORDERS", "fleet/APP")
    assert not edges["orders"]["dangling"] and not edges["prices"]["dangling"]
    assert edges["nothing"]["reason"] == "no matching stream export"
    assert "activation token" in edges["secret"]["reason"]
    assert edges["elsewhere"]["dangling"] and edges["elsewhere"]["from"] == stranger
    assert {n["id"]: n["in_store"] for n in g["nodes"]} == {
        "fleet/APP": True, "fleet/ORDERS": True, "fleet/SYS": True, stranger: False}


def test_dot_clusters_operators_styles_edges_and_marks_dangling_ones_red(built):
    b, orders, stranger = built
    dot = graph.render_dot(graph.build_graph(graph.read_inventory(b.store.store_dir, b.store.keys_dir)))
    assert dot.startswith('digraph "accounts" {') and dot.endswith("}\n")
    assert 'subgraph "cluster_0" {\n    label="operator fleet";' in dot
    assert ('"fleet/ORDERS" -> "fleet/APP" [label="stream orders.eu.> \u2192 in.orders.>", style=solid];'
            in dot)
    assert '"fleet/ORDERS" -> "fleet/APP" [label="service prices.gold", style=dashed];' in dot
    assert ('"fleet/ORDERS" -> "fleet/APP" [label="stream stock.> (no matching stream export)", style=solid, '
            'color=red, fontcolor=red];' in dot)
    assert '"%s" [label="%s (not in the store)", color=red' % (stranger, stranger) in dot
    assert dot.count("->") == 5


def test_dot_quotes_what_it_writes():
    edge = {"from": 'a"b', "to": "c\\d", "subject": 'x."y"', "local_subject": "", "type": "stream",
            "dangling": False, "reason": None}
    dot = graph.render_dot({"nodes": [{"id": 'a"b', "account": 'a"b', "operator": "o", "in_store": True}],
                            "edges": [edge]})
    assert '"a\\"b" [label="a\\"b"];' in dot
    assert '"a\\"b" -> "c\\\\d" [label="stream x.\\"y\\"", style=solid];' in dot


def test_account_filter_keeps_the_edges_touching_it(built):
    b, orders, stranger = built
    inventory = graph.read_inventory(b.store.store_dir, b.store.keys_dir)
    g = graph.build_graph(inventory, ["ORDERS"])
    assert {n["id"] for n in g["nodes"]} == {"fleet/ORDERS", "fleet/APP"}
    assert len(g["edges"]) == 4 and all(e["from"] == "fleet/ORDERS" for e in g["edges"])
    _operators, accounts, users = graph.listing(inventory, ["APP"])
    assert [a["name"] for a in accounts] == ["APP"] and users == []
    assert graph.unknown_accounts(inventory, ["APP", "NOPE"]) == ["NOPE"]


def test_operators_cluster_apart_and_a_missing_operator_fails(tmp_path):
    first, second = StoreBuilder(tmp_path, "east"), StoreBuilder(tmp_path, "west")
    first.account("A")
    second.account("A")
    inventory = graph.read_inventory(first.store.store_dir, first.store.keys_dir)
    assert [name for name, _claims in inventory["operators"]] == ["east", "west"]
    dot = graph.render_dot(graph.build_graph(inventory))
    assert dot.count("subgraph") == 2 and '"east/A" [label="A"];' in dot and '"west/A"' in dot
    assert [n for n, _c in graph.read_inventory(first.store.store_dir, first.store.keys_dir, ["west"])[
        "operators"]] == ["west"]
    with pytest.raises(StoreError, match="not in the store"):
        graph.read_inventory(first.store.store_dir, first.store.keys_dir, ["north"])


def test_an_account_not_issued_by_its_operator_is_refused(tmp_path):
    b = StoreBuilder(tmp_path)
    rogue = jwt.new_seed("account")
    b.store.write_account("ROGUE", jwt.encode(jwt.account_claims("ROGUE", jwt.public_key(rogue)), rogue))
    with pytest.raises(StoreError, match="ROGUE"):
        graph.read_inventory(b.store.store_dir, b.store.keys_dir)
