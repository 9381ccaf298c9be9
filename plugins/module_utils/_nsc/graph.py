# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an nsc store holds - operators, accounts, users, exports, imports -
and the account import/export graph in Graphviz dot. Private to the collection.

``read_inventory`` reads the store (JWTs only: never a seed or a creds
file's content); everything after it is pure.
"""

from __future__ import annotations

import os

from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import (
    Store, read_text, valid_name)
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import subject_within

JETSTREAM_CLAIMS = {"disk_storage": "disk_storage", "mem_storage": "mem_storage", "streams": "streams",
                    "consumer": "consumers"}


# -- reading -------------------------------------------------------------------------------------


def store_operators(store_dir):
    """Names of the operators with a JWT under ``store_dir``."""
    root = os.path.abspath(os.path.expanduser(store_dir))
    if not os.path.isdir(root):
        return []
    return sorted(name for name in os.listdir(root)
                  if os.path.isfile(os.path.join(root, name, "%s.jwt" % name)))


def _user_names(store, account):
    directory = os.path.join(store.account_dir(account), "users")
    if not os.path.isdir(directory):
        return []
    return sorted(name[:-4] for name in os.listdir(directory) if name.endswith(".jwt") and not name.startswith("."))


def _keys(values):
    """Signing keys as public keys; nsc writes scoped ones as objects with a ``key``."""
    result = []
    for value in values or []:
        result.append(value.get("key") if isinstance(value, dict) else value)
    return sorted(key for key in result if key)


def read_inventory(store_dir, keys_dir, operators=None):
    """{operators: [(name, claims)], accounts: [(operator, name, claims)],
    users: [(operator, account, name, claims, creds_path or None)]} of the
    named operators (every operator in the store when None)."""
    names = store_operators(store_dir) if not operators else [valid_name("operator", name) for name in operators]
    inventory = {"operators": [], "accounts": [], "users": []}
    for operator in names:
        store = Store(store_dir, keys_dir, operator)
        _token, op_claims = store.read_operator()
        inventory["operators"].append((operator, op_claims))
        for account in store.accounts():
            _token, claims = store.read_account(account)
            store.check_account(account, op_claims, claims)
            inventory["accounts"].append((operator, account, claims))
            for user in _user_names(store, account):
                _token, user_claims = store.read_user(account, user)
                if user_claims is None:
                    continue
                creds = store.creds_path(account, user)
                inventory["users"].append((operator, account, user, user_claims,
                                           creds if read_text(creds) is not None else None))
    return inventory


# -- listing -------------------------------------------------------------------------------------


def operator_row(name, claims):
    nats = claims.get("nats") or {}
    return {"name": name, "public_key": claims.get("sub"), "signing_keys": _keys(nats.get("signing_keys")),
            "system_account": nats.get("system_account"),
            "service_urls": list(nats.get("operator_service_urls") or [])}


def jetstream_row(limits):
    """The account's JetStream limits, or None when JetStream is off for it
    (no storage of either kind)."""
    limits = limits or {}
    tiers = dict((tier, _jetstream_limits(tier_limits)) for tier, tier_limits in (
        limits.get("tiered_limits") or {}).items() if tier_limits.get("disk_storage") or tier_limits.get("mem_storage"))
    if tiers:
        return {"tiers": tiers}
    if not limits.get("disk_storage") and not limits.get("mem_storage"):
        return None
    return _jetstream_limits(limits)


def _jetstream_limits(limits):
    row = {name: limits.get(claim, -1) for claim, name in JETSTREAM_CLAIMS.items()}
    for claim in ("max_ack_pending", "disk_max_stream_bytes", "mem_max_stream_bytes", "max_bytes_required"):
        if limits.get(claim):
            row[claim] = limits[claim]
    return row


def export_row(claim):
    kind = claim.get("type") or "unknown"
    row = {"name": claim.get("name", ""), "subject": claim.get("subject", ""), "type": kind,
           "token_req": bool(claim.get("token_req")), "public": not claim.get("token_req"),
           "account_token_position": claim.get("account_token_position")}
    row["response_type"] = (claim.get("response_type") or "Singleton") if kind == "service" else None
    return row


def import_row(claim, names):
    """``names``: public key -> account name, for the accounts in the store."""
    source = claim.get("account", "")
    return {"name": claim.get("name", ""), "subject": claim.get("subject", ""),
            "local_subject": claim.get("local_subject") or claim.get("to") or "",
            "from_account": names.get(source, source), "from_account_key": source,
            "type": claim.get("type") or "unknown", "token": bool(claim.get("token"))}


def user_row(operator, account, name, claims, creds_path):
    nats = claims.get("nats") or {}
    return {"operator": operator, "account": account, "name": name, "public_key": claims.get("sub"),
            "issuer": claims.get("iss"), "issuer_account": nats.get("issuer_account"),
            "bearer": bool(nats.get("bearer_token")), "expires": claims.get("exp"), "creds_file": creds_path}


def _account_names(inventory):
    names = {}
    for _operator, name, claims in inventory["accounts"]:
        names.setdefault(claims.get("sub"), name)
    return names


def listing(inventory, accounts=None):
    """(operators, accounts, users) rows; ``accounts`` limits the account and
    user rows to those names."""
    wanted = set(accounts) if accounts else None
    names = _account_names(inventory)
    systems = {(claims.get("nats") or {}).get("system_account") for _name, claims in inventory["operators"]}
    account_rows = []
    for operator, name, claims in inventory["accounts"]:
        if wanted is not None and name not in wanted:
            continue
        nats = claims.get("nats") or {}
        account_rows.append({
            "name": name, "operator": operator, "public_key": claims.get("sub"),
            "system_account": claims.get("sub") in systems,
            "signing_keys": _keys(nats.get("signing_keys")),
            "scoped_signing_keys": sorted(({"role": key.get("role"), "key": key.get("key")} for key in
                                           nats.get("signing_keys") or [] if isinstance(key, dict)),
                                          key=lambda row: (row["role"] or "", row["key"] or "")),
            "jetstream": jetstream_row(nats.get("limits")),
            "mappings": nats.get("mappings") or {},
            "exports": sorted((export_row(e) for e in nats.get("exports") or []),
                              key=lambda row: (row["subject"], row["type"], row["name"])),
            "imports": sorted((import_row(i, names) for i in nats.get("imports") or []),
                              key=lambda row: (row["from_account"], row["subject"], row["local_subject"])),
        })
    users = [user_row(*entry) for entry in inventory["users"] if wanted is None or entry[1] in wanted]
    return [operator_row(*entry) for entry in inventory["operators"]], account_rows, users


# -- the graph -----------------------------------------------------------------------------------


def _dangling_reason(claim, exports, token_present):
    kind = claim.get("type") or "unknown"
    candidates = [e for e in exports if (e.get("type") or "unknown") == kind
                  and subject_within(claim.get("subject", ""), e.get("subject", ""))]
    if not candidates:
        return "no matching %s export" % kind
    if token_present or any(not e.get("token_req") for e in candidates):
        return None
    return "the export needs an activation token and the import has none"


def node_id(operator, account):
    return "%s/%s" % (operator, account)


def build_graph(inventory, accounts=None):
    """{nodes, edges}: a node per account, an edge per import from the
    exporting account to the importing one. An import whose exporter is not
    in the store, or has no export that covers it, is ``dangling`` with a
    ``reason``. ``accounts`` keeps the edges touching those accounts and the
    nodes they need."""
    by_key = {}
    for operator, name, claims in inventory["accounts"]:
        by_key.setdefault(claims.get("sub"), []).append((operator, name, claims))
    nodes = {}
    for operator, name, claims in inventory["accounts"]:
        nodes[node_id(operator, name)] = {
            "id": node_id(operator, name), "account": name, "operator": operator, "public_key": claims.get("sub"),
            "in_store": True}
    edges = []
    for operator, name, claims in inventory["accounts"]:
        for claim in (claims.get("nats") or {}).get("imports") or []:
            source = claim.get("account", "")
            # the same key under this operator first: accounts belong to one operator
            exporters = sorted(by_key.get(source, []), key=lambda entry: entry[0] != operator)
            row = import_row(claim, {})
            edge = {"to": node_id(operator, name), "to_account": name, "subject": row["subject"],
                    "local_subject": row["local_subject"], "type": row["type"], "import_name": row["name"],
                    "dangling": False, "reason": None}
            if exporters:
                ex_operator, ex_name, ex_claims = exporters[0]
                edge.update({"from": node_id(ex_operator, ex_name), "from_account": ex_name})
                reason = _dangling_reason(claim, (ex_claims.get("nats") or {}).get("exports") or [], row["token"])
            else:
                edge.update({"from": source, "from_account": source})
                nodes.setdefault(source, {"id": source, "account": source, "operator": None, "public_key": source,
                                          "in_store": False})
                reason = "the exporting account is not in the store"
            if reason:
                edge.update({"dangling": True, "reason": reason})
            edges.append(edge)
    edges.sort(key=lambda e: (e["from"], e["to"], e["subject"], e["local_subject"], e["type"]))
    if accounts:
        wanted = set(accounts)
        keep = {n for n, node in nodes.items() if node["in_store"] and node["account"] in wanted}
        edges = [e for e in edges if e["from"] in keep or e["to"] in keep]
        keep |= {e["from"] for e in edges} | {e["to"] for e in edges}
        nodes = {n: node for n, node in nodes.items() if n in keep}
    return {"nodes": [nodes[n] for n in sorted(nodes)], "edges": edges}


def _quote(text):
    return '"%s"' % str(text).replace("\\", "\\\\").replace('"', '\\"')


def edge_label(edge):
    subjects = edge["subject"]
    if edge["local_subject"] and edge["local_subject"] != edge["subject"]:
        subjects = "%s \u2192 %s" % (edge["subject"], edge["local_subject"])
    label = "%s %s" % (edge["type"], subjects)
    return "%s (%s)" % (label, edge["reason"]) if edge["dangling"] else label


def render_dot(graph):
    """The graph in dot: a cluster per operator, accounts not in the store
    outside every cluster, stream imports solid, service imports dashed,
    dangling imports red."""
    lines = ["digraph %s {" % _quote("accounts"),
             '  label="Account Imports and Exports";',
             "  rankdir=LR;",
             "  node [shape=box];"]
    operators = sorted({node["operator"] for node in graph["nodes"] if node["in_store"]})
    for index, operator in enumerate(operators):
        lines.append("  subgraph %s {" % _quote("cluster_%d" % index))
        lines.append("    label=%s;" % _quote("operator %s" % operator))
        for node in graph["nodes"]:
            if node["in_store"] and node["operator"] == operator:
                lines.append("    %s [label=%s];" % (_quote(node["id"]), _quote(node["account"])))
        lines.append("  }")
    for node in graph["nodes"]:
        if not node["in_store"]:
            lines.append("  %s [label=%s, color=red, fontcolor=red, style=dashed];" % (
                _quote(node["id"]), _quote("%s (not in the store)" % node["account"])))
    for edge in graph["edges"]:
        attributes = ["label=%s" % _quote(edge_label(edge)),
                      "style=%s" % ("dashed" if edge["type"] == "service" else "solid")]
        if edge["dangling"]:
            attributes += ["color=red", "fontcolor=red"]
        lines.append("  %s -> %s [%s];" % (_quote(edge["from"]), _quote(edge["to"]), ", ".join(attributes)))
    lines.append("}")
    return "\n".join(lines) + "\n"


def unknown_accounts(inventory, accounts):
    present = {name for _operator, name, _claims in inventory["accounts"]}
    return sorted(set(accounts or []) - present)
