# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One export (or stream share) and its imports in an nsc store: plan the accounts' claims, write,
push (nsc_export and the fleet's store run use it; the claims themselves are export_claims'). Private to the
collection.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import export_claims as graph
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient, NatsClientError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError, valid_name

ARGUMENT_SPEC = dict(
    nsc.STORE_ARGSPEC,
    account=dict(type="str"),
    name=dict(type="str"),
    subject=dict(type="str"),
    type=dict(type="str", choices=["stream", "service"], default="stream"),
    response_type=dict(type="str"),
    public=dict(type="bool", default=True),
    account_token_position=dict(type="int", no_log=False),
    description=dict(type="str"),
    importers=dict(type="list", elements="dict", default=[], options=dict(
        account=dict(type="str", required=True), subject=dict(type="str"), local_subject=dict(type="str"),
        name=dict(type="str"))),
    share_stream=dict(type="dict", options=dict(
        stream=dict(type="str", required=True), from_account=dict(type="str", required=True),
        from_domain=dict(type="str"), to_account=dict(type="str", required=True), to_domain=dict(type="str"),
        kind=dict(type="str", choices=["source", "mirror", "consumer"], default="source"),
        durable=dict(type="str"), api_prefix=dict(type="str"), deliver_prefix=dict(type="str"))),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    push=dict(type="bool", default=False),
    expected_servers=dict(type="int"),
)


def load(store):
    _op_token, op_claims = store.read_operator()
    accounts, tokens = {}, {}
    for name in store.accounts():
        token, claims = store.read_account(name)
        store.check_account(name, op_claims, claims)
        accounts[name], tokens[name] = claims, token
    return op_claims, accounts, tokens


def edges_from(params, accounts):
    publics = {name: claims["sub"] for name, claims in accounts.items()}
    if params["share_stream"]:
        return graph.share_edges(params["share_stream"], publics)
    account = params["account"]
    where = "export %r of account %r" % (params["name"] or params["subject"], account)
    if account not in accounts:
        raise StoreError("%s: account %r is not in the store" % (where, account))
    export = graph.export_claim(params["name"], params["subject"], params["type"], public=params["public"],
                                response_type=params["response_type"],
                                account_token_position=params["account_token_position"],
                                description=params["description"], where=where)
    imports = []
    for index, importer in enumerate(params["importers"]):
        at = "%s: importers[%d]" % (where, index)
        if importer["account"] not in accounts:
            raise StoreError("%s: account %r is not in the store" % (at, importer["account"]))
        imports.append((importer["account"], graph.import_claim(
            export, publics[importer["account"]], subject=importer["subject"],
            local_subject=importer["local_subject"], name=importer["name"], where=at)))
    return [graph.Edge(account, export, imports)], None


def activation_signer(store, accounts):
    retiring_by_account = {}

    def sign(exporter, export, importer_public, imp, current):
        claims = accounts[exporter]
        if exporter not in retiring_by_account:
            retiring_by_account[exporter] = store.read_previous_signing_keys(exporter)
        retiring = retiring_by_account[exporter]
        seed, via_signing_key = nsc.signer_of(store, claims, "account %r" % exporter, retiring)
        desired = graph.activation_claims(importer_public, export, imp, claims["sub"] if via_signing_key else None)
        if current:
            try:
                existing = jwt.decode(current, verify=True)
            except jwt.JWTError:
                existing = None
            # an activation a replaced signing key signed is signed again, before that key is retired
            if existing and jwt.same_claims(nsc.body(existing), desired) and existing.get("iss") in (
                    [claims["sub"]] + [k for k in jwt.plain_signing_keys(claims) if k not in retiring]):
                return current
        return jwt.encode(desired, seed)
    return sign


def plan(run, store):
    p = run.params
    op_claims, accounts, tokens = load(store)
    edges, external = edges_from(p, accounts)
    after = graph.apply(accounts, edges, p["state"], activation_signer(store, accounts))
    signer = None
    changed_accounts, new_tokens, diff = [], {}, {"before": {}, "after": {}}
    for name in sorted(after):
        if not nsc.needs_signing(accounts[name], nsc.body(after[name])):
            continue
        if signer is None:
            signer, _via = nsc.signer_of(store, op_claims, "operator %r" % store.operator)
        new_tokens[name] = jwt.encode(nsc.body(after[name]), signer)
        changed_accounts.append({"name": name, "account_id": accounts[name]["sub"]})
        diff["before"][name] = graph.graph_part(accounts[name])
        diff["after"][name] = graph.graph_part(after[name])
    managed_exports = [dict(edge.export, account=edge.exporter) for edge in edges]
    managed_imports = [dict(imp, account=importer, exporter=edge.exporter) for edge in edges
                       for importer, imp in edge.imports]
    result = dict(changed=bool(changed_accounts), exports_changed=bool(changed_accounts),
                  accounts=changed_accounts, exports=managed_exports, imports=managed_imports)
    if external is not None:
        result["external"] = external
    if run.diff:
        result["diff"] = diff
    return result, op_claims, accounts, tokens, new_tokens, edges


def push(run, params, names, tokens, result):
    p = run.params
    result.update(pushed=[], unconfirmed=[])
    with NatsClient(params) as client:
        for name in names:
            token = tokens[name]
            claims = jwt.decode(token, verify=False)
            current = nsc.lookup(client, claims["sub"], min(client.timeout, 2.0))
            if current and jwt.same_claims(jwt.decode(current, verify=False), claims):
                continue
            result["changed"] = True
            if not any(a["name"] == name for a in result["accounts"]):
                result["accounts"].append({"name": name, "account_id": claims["sub"]})
            if run.check_mode:
                continue
            answers, unconfirmed, read_back = nsc.push_account(client, claims["sub"], token, client.timeout,
                                                               p["expected_servers"])
            result["pushed"].append({"account": name, "answers": answers})
            if not read_back:
                unconfirmed = unconfirmed + ["(read-back)"]
            result["unconfirmed"] += ["%s on %s" % (name, server) for server in unconfirmed]
    if result["unconfirmed"]:
        raise nsc.PushFailed("the push was not confirmed: %s" % ", ".join(result["unconfirmed"]))


# one export: either a subject (with its account) or a share_stream
CONSTRAINTS = dict(required_one_of=[["subject", "share_stream"]],
                   mutually_exclusive=[["share_stream", "subject"], ["share_stream", "account"], ["share_stream", "name"]],
                   required_by={"subject": ["account"]})


def identity(params):
    """What makes two items of a list of exports the same export (listed twice, they would fight on every run):
    a share of one stream from one account to another to copy it (a source and a mirror take the same exports), or
    to read one durable of it; an export of an account by its name, and by its subject."""
    share = params.get("share_stream")
    if share:
        kind = share.get("kind") or "source"
        what = ("consumer", share.get("durable")) if kind == "consumer" else ("copy",)
        return [("share", share.get("stream"), share.get("from_account"), share.get("to_account")) + what]
    return [("name", params.get("account"), params.get("name") or params.get("subject")),
            ("subject", params.get("account"), params.get("subject"), params.get("type") or "stream")]


def named(params):
    """How converge's errors name the export's operator."""
    return "operator %r" % params.get("operator") if params.get("operator") else ""


# any account's public key, for checking claims before the store is read (an account token's place gets it)
_SOME_ACCOUNT = "A" * 56


def check_item(params):
    """Every check of one export's options that needs no store - the accounts' names, the subjects (the export's,
    each importer's, local subjects and their wildcards), response_type, account_token_position, a share's stream,
    kind, durable and prefixes, an account importing its own export, an importer listed twice - as StoreError
    naming the export and the option; ``params`` back. nsc_export (each item of ``exports`` too) and nsc_store run
    it before the first file is written; the fleet's preflight runs it on each of nats_exports (ItemChecker's
    ``then``)."""
    share = params.get("share_stream")
    if share:
        where = "share_stream of %r from %r to %r" % (
            share.get("stream"), share.get("from_account"), share.get("to_account"))
        for role in ("from_account", "to_account"):
            try:
                valid_name("account", share.get(role))
            except StoreError as exc:
                raise StoreError("%s: %s: %s" % (where, role, exc)) from exc
        graph.share_edges(share, {share["from_account"]: _SOME_ACCOUNT, share["to_account"]: "B" * 56})
        return params
    account = params.get("account")
    where = "export %r of account %r" % (params.get("name") or params.get("subject"), account)
    try:
        valid_name("account", account)
    except StoreError as exc:
        raise StoreError("%s: %s" % (where, exc)) from exc
    export = graph.export_claim(params.get("name"), params.get("subject"), params.get("type") or "stream",
                                public=params.get("public", True), response_type=params.get("response_type"),
                                account_token_position=params.get("account_token_position"),
                                description=params.get("description"), where=where)
    seen = {}
    for index, importer in enumerate(params.get("importers") or []):
        at = "%s: importers[%d]" % (where, index)
        try:
            valid_name("account", importer.get("account"))
        except StoreError as exc:
            raise StoreError("%s: %s" % (at, exc)) from exc
        if importer["account"] == account:
            raise StoreError("%s: account %r cannot import its own export" % (at, account))
        subject = importer.get("subject")
        key = (importer["account"], subject, importer.get("local_subject"))
        if key in seen:
            raise StoreError("%s: account %r imports it twice, first at importers[%d]" % (
                at, importer["account"], seen[key]))
        seen[key] = index
        # with an account token, an importer's subject holds its account's key: check the rest of it here
        position = export.get("account_token_position")
        public = _SOME_ACCOUNT
        if position and subject and len(subject.split(".")) >= position:
            public = subject.split(".")[position - 1]
        graph.import_claim(export, public, subject=subject, local_subject=importer.get("local_subject"),
                           name=importer.get("name"), where=at)
    return params


def label(item):
    """How errors name an item of a list of exports."""
    share = item.get("share_stream")
    if isinstance(share, dict):
        return "share of %s from %s to %s" % (share.get("stream"), share.get("from_account"), share.get("to_account"))
    return "%s %s" % (item.get("account"), item.get("name") or item.get("subject"))


def converge(run):
    """One export, as the single form converges it (also each item of ``exports``): the result, or
    nsc.ConvergeFailed carrying what was done."""
    p = run.params
    result, written = {}, False
    try:
        check_item(p)
        store = Store(p["store_dir"], p["keys_dir"], p["operator"])
        with store.locked(p["lock_timeout"], create=False):
            result, op_claims, _accounts, tokens, new_tokens, edges = plan(run, store)
            # refuse unusable push credentials before the store changes
            push_with = nsc.push_params(store, op_claims, p) if p["push"] else None
            if new_tokens and not run.check_mode:
                for name, token in new_tokens.items():
                    store.write_account(name, token)
                written = True
            if p["push"]:
                affected = set(new_tokens)
                for edge in edges:
                    affected.add(edge.exporter)
                    affected.update(importer for importer, _imp in edge.imports)
                current = dict(tokens, **new_tokens)
                try:
                    push(run, push_with, sorted(affected), current, result)
                except (NatsClientError, nsc.PushFailed) as exc:
                    result["unconfirmed"] = result.get("unconfirmed") or ["(no server was reached)"]
                    raise nsc.PushFailed("%s%s" % ("the store holds the new JWTs, but " if written else "", exc)) from exc
    except (NatsEdgeError, OSError) as exc:
        # changed says what really happened: the store written, or a JWT sent
        result["changed"] = written or bool(result.get("pushed"))
        _blank_tokens(result)
        again = "; the next run pushes again" if written and isinstance(exc, nsc.PushFailed) else ""
        raise nsc.ConvergeFailed("operator %r: %s%s" % (p["operator"], exc, again), **result) from exc
    _blank_tokens(result)
    return result


def _blank_tokens(result):
    for imp in result.get("imports") or []:
        imp.pop("token", None)
