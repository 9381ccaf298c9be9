"""Edges of the account graph: export and import claims, sharing a stream,
ownership of imports, overlap and cycle checks."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import export_claims as graph
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import StoreError

KEYS = {name: jwt.public_key(jwt.new_seed("account")) for name in ("A", "B", "C", "EXC")}


def accounts(**extra):
    result = {name: jwt.account_claims(name, key) for name, key in KEYS.items()}
    for name, nats in extra.items():
        result[name]["nats"].update(nats)
    return result


def no_tokens(*_args):
    raise AssertionError("a public export needs no activation token")


def edge(exporter, subject, kind="stream", importers=(), name=None, **options):
    export = graph.export_claim(name, subject, kind, **options)
    return graph.Edge(exporter, export, [(importer, graph.import_claim(export, KEYS[importer], local_subject=local))
                                         for importer, local in importers])


def test_contained_in_follows_wildcards():
    assert graph.subject_within("a.b", "a.*") and graph.subject_within("a.b.c", "a.>")
    assert graph.subject_within("a.*", "a.>") and graph.subject_within("a.b.>", "a.>")
    assert not graph.subject_within("a.>", "a.*") and not graph.subject_within("a", "a.>")
    assert not graph.subject_within("a.b", "a.c") and not graph.subject_within("a.b.c", "a.*")


def test_export_claim_names_the_field_at_fault():
    assert graph.export_claim("e", "orders.>", "stream") == {"name": "e", "subject": "orders.>", "type": "stream"}
    private = graph.export_claim(None, "q", "service", public=False, response_type="Stream")
    assert private == {"name": "q", "subject": "q", "type": "service", "token_req": True, "response_type": "Stream"}
    with pytest.raises(StoreError, match="export: subject: .*wildcards must be whole tokens"):
        graph.export_claim("e", "orders.a*", "stream")
    with pytest.raises(StoreError, match="response_type is for service"):
        graph.export_claim("e", "x", "stream", response_type="Stream")
    with pytest.raises(StoreError, match="account_token_position 2 must point at a"):
        graph.export_claim("e", "x.y", "stream", account_token_position=2)


def test_import_subject_gets_the_importers_key_at_the_token_position():
    export = graph.export_claim("mon", "mon.*.>", "stream", account_token_position=2)
    claim = graph.import_claim(export, KEYS["B"])
    assert claim == {"name": "mon", "subject": "mon.%s.>" % KEYS["B"], "type": "stream"}
    with pytest.raises(StoreError, match="must be the importing account's key"):
        graph.import_claim(export, KEYS["B"], subject="mon.%s.>" % KEYS["C"])
    with pytest.raises(StoreError, match="is not part of the exported"):
        graph.import_claim(graph.export_claim("e", "a.>", "stream"), KEYS["B"], subject="b.c")
    with pytest.raises(StoreError, match="must have the wildcards"):
        graph.import_claim(graph.export_claim("e", "a.>", "stream"), KEYS["B"], local_subject="b.c")


def test_present_adds_export_and_imports_and_is_stable():
    before = accounts()
    after = graph.apply(before, [edge("A", "orders.>", importers=[("B", "a.orders.>"), ("C", None)])],
                        "present", no_tokens)
    assert after["A"]["nats"]["exports"] == [{"name": "orders.>", "subject": "orders.>", "type": "stream"}]
    assert after["B"]["nats"]["imports"] == [{"name": "orders.>", "subject": "orders.>", "type": "stream",
                                              "local_subject": "a.orders.>", "account": KEYS["A"]}]
    assert after["C"]["nats"]["imports"][0]["account"] == KEYS["A"]
    assert before["A"]["nats"].get("exports") is None, "the input is not changed"
    again = graph.apply(after, [edge("A", "orders.>", importers=[("C", None), ("B", "a.orders.>")])],
                        "present", no_tokens)
    assert all(jwt.same_claims(again[name], after[name]) for name in after)


def test_an_exclusive_edge_drops_importers_no_longer_listed_and_keeps_others():
    other = {"name": "x", "subject": "x", "type": "stream", "account": KEYS["C"]}
    start = graph.apply(accounts(B={"imports": [other]}), [edge("A", "orders.>", importers=[("B", None), ("C", None)])],
                        "present", no_tokens)
    after = graph.apply(start, [edge("A", "orders.>", importers=[("C", None)])], "present", no_tokens)
    assert after["B"]["nats"]["imports"] == [other]
    gone = graph.apply(after, [edge("A", "orders.>")], "absent", no_tokens)
    assert "exports" not in gone["A"]["nats"] and "imports" not in gone["C"]["nats"]


def test_private_exports_get_activation_tokens_reused_when_current():
    calls = []

    def activation(exporter, export, importer_public, imp, current):
        calls.append((exporter, importer_public, imp["subject"], current))
        return current or "token-%d" % len(calls)

    first = graph.apply(accounts(), [edge("A", "q", "service", importers=[("B", None)], public=False)],
                        "present", activation)
    assert first["B"]["nats"]["imports"][0]["token"] == "token-1"
    second = graph.apply(first, [edge("A", "q", "service", importers=[("B", None)], public=False)],
                         "present", activation)
    assert calls[-1] == ("A", KEYS["B"], "q", "token-1")
    assert second["B"]["nats"]["imports"][0]["token"] == "token-1"
    claims = graph.activation_claims(KEYS["B"], {"type": "service"}, {"subject": "q"}, KEYS["A"])
    assert claims == {"name": "q", "sub": KEYS["B"], "nats": {
        "subject": "q", "kind": "service", "type": "activation", "version": 2, "issuer_account": KEYS["A"]}}


def test_overlapping_exports_and_imports_are_refused():
    start = graph.apply(accounts(), [edge("A", "orders.>", name="orders", importers=[("B", "in.>")])],
                        "present", no_tokens)
    with pytest.raises(StoreError, match="export 'o2' of account 'A': subject 'orders.eu' overlaps export 'orders'"):
        graph.apply(start, [edge("A", "orders.eu", name="o2")], "present", no_tokens)
    with pytest.raises(StoreError, match="the import into account 'B' on 'in.x' overlaps its import 'orders'"):
        graph.apply(start, [edge("C", "c.x", name="c", importers=[("B", "in.x")])], "present", no_tokens)
    with pytest.raises(StoreError, match="account 'NOPE' is not in the store"):
        graph.apply(start, [graph.Edge("NOPE", {"name": "n", "subject": "n", "type": "stream"}, [])],
                    "present", no_tokens)


def test_import_cycles_are_refused():
    ab = graph.apply(accounts(), [edge("A", "ev.>", importers=[("B", None)])], "present", no_tokens)
    bc = graph.apply(ab, [edge("B", "ev.>", importers=[("C", None)])], "present", no_tokens)
    with pytest.raises(StoreError, match="import cycle C -> A -> B -> C on .ev.>."):
        graph.apply(bc, [edge("C", "ev.>", importers=[("A", None)])], "present", no_tokens)
    # flows on subjects that do not meet are no cycle
    graph.apply(bc, [edge("C", "other.>", importers=[("A", None)])], "present", no_tokens)
    with pytest.raises(StoreError, match="cannot import its own export"):
        graph.apply(ab, [edge("A", "x", importers=[("A", None)])], "present", no_tokens)


def test_share_for_a_mirror_has_api_flow_control_and_delivery():
    publics = {name: KEYS[name] for name in KEYS}
    edges, external = graph.share_edges({"stream": "crossacc", "from_account": "A", "from_domain": "hub",
                                         "to_account": "B", "to_domain": "edge", "kind": "mirror"}, publics)
    assert external == {"api": "JS.A@hub.API", "deliver": "deliver.A.hub.B.edge.crossacc"}
    pairs = [(e.export["type"], e.export["subject"], e.imports[0][1].get("local_subject")) for e in edges]
    assert pairs == [
        ("service", "$JS.hub.API.CONSUMER.CREATE.crossacc", "JS.A@hub.API.CONSUMER.CREATE.crossacc"),
        ("service", "$JS.hub.API.CONSUMER.CREATE.crossacc.>", "JS.A@hub.API.CONSUMER.CREATE.crossacc.>"),
        ("service", "$JS.FC.crossacc.*.*", None),
        ("service", "$JS.FC.*.%s.crossacc.*.*" % graph.account_hash(KEYS["A"]), None),
        ("stream", "deliver.A.hub.B.edge.crossacc.>", None)]
    after = graph.apply(accounts(), edges, "present", no_tokens)
    assert len(after["A"]["nats"]["exports"]) == 5 and len(after["B"]["nats"]["imports"]) == 5


def test_shares_to_two_accounts_share_exports_and_absent_removes_only_one():
    publics = {name: KEYS[name] for name in KEYS}
    share = {"stream": "s", "from_account": "A", "to_account": "B", "kind": "source"}
    to_b, _external = graph.share_edges(share, publics)
    to_c, _external = graph.share_edges(dict(share, to_account="C"), publics)
    both = graph.apply(graph.apply(accounts(), to_b, "present", no_tokens), to_c, "present", no_tokens)
    assert len(both["A"]["nats"]["exports"]) == 6  # the API and flow control (v1, v2) once, a delivery each
    without_b = graph.apply(both, to_b, "absent", no_tokens)
    assert "imports" not in without_b["B"]["nats"] and len(without_b["C"]["nats"]["imports"]) == 5
    assert len(without_b["A"]["nats"]["exports"]) == 5
    none = graph.apply(without_b, to_c, "absent", no_tokens)
    assert "exports" not in none["A"]["nats"]


def test_share_of_a_durable_pull_consumer():
    publics = {name: KEYS[name] for name in KEYS}
    edges, external = graph.share_edges({"stream": "S", "from_account": "A", "to_account": "B", "kind": "consumer",
                                         "durable": "work", "api_prefix": "JS.a.API"}, publics)
    assert external == {"api": "JS.a.API", "next": "JS.a.API.CONSUMER.MSG.NEXT.S.work"}
    assert [(e.export["subject"], e.export.get("response_type"), e.imports[0][1].get("local_subject"))
            for e in edges] == [("$JS.API.CONSUMER.MSG.NEXT.S.work", "Stream", "JS.a.API.CONSUMER.MSG.NEXT.S.work"),
                                ("$JS.ACK.S.work.>", None, None),
                                ("$JS.ACK.*.%s.S.work.>" % graph.account_hash(KEYS["A"]), None, None)]
    with pytest.raises(StoreError, match="needs a durable"):
        graph.share_edges({"stream": "S", "from_account": "A", "to_account": "B", "kind": "consumer"}, publics)
    with pytest.raises(StoreError, match="share_stream.to_account: account 'X' is not in the store"):
        graph.share_edges({"stream": "S", "from_account": "A", "to_account": "X"}, publics)


def test_account_hash_is_the_servers():
    # nats-server's getHash: SHA-256 of the name, its first 8 bytes as base-62 digits
    assert graph.account_hash("$G") == graph.account_hash("$G") and len(graph.account_hash("$G")) == 8
    assert graph.account_hash("ACC") != graph.account_hash("ACD")
    assert set(graph.account_hash(KEYS["A"])) <= set(graph._HASH_DIGITS)


def test_an_importer_removed_from_a_private_export_has_its_activation_revoked():
    def token(exporter, export, importer_public, imp, current):
        return current or "activation-of-%s" % importer_public

    quotes = dict(public=False, name="quotes")
    both = graph.apply(accounts(), [edge("A", "q", "service", [("B", None), ("C", None)], **quotes)], "present",
                       token, now=100)
    assert "revocations" not in both["A"]["nats"]["exports"][0]
    only_c = graph.apply(both, [edge("A", "q", "service", [("C", None)], **quotes)], "present", token, now=200)
    export = only_c["A"]["nats"]["exports"][0]
    assert export["revocations"] == {KEYS["B"]: 200} and not only_c["B"]["nats"].get("imports")
    # kept as it is on the next run, and for public exports nothing is revoked
    again = graph.apply(only_c, [edge("A", "q", "service", [("C", None)], **quotes)], "present", token, now=300)
    assert again["A"]["nats"]["exports"][0]["revocations"] == {KEYS["B"]: 200}
    public = graph.apply(accounts(), [edge("A", "p", "stream", [("B", None)])], "present", no_tokens, now=100)
    dropped = graph.apply(public, [edge("A", "p", "stream", [])], "present", no_tokens, now=200)
    assert "revocations" not in dropped["A"]["nats"]["exports"][0]
