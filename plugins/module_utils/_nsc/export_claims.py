# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Edges of the account graph: an export of one account and the imports of
it into others, and the export/import set that shares a JetStream stream
with another account. Private to the collection.

Everything here is pure: accounts come in as {name: claims} and go out the
same way; signing activation tokens is a callback.
"""

from __future__ import annotations

import copy
import hashlib
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import StoreError
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import check_subject, subject_within, subjects_collide

RESPONSE_TYPES = ("Singleton", "Stream", "Chunked")

_HASH_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def account_hash(public):
    """The 8-character hash of an account (its public key in operator mode) that nats-server 2.14 and later put in
    the v2 ack and flow-control subjects: the first 8 bytes of the name's SHA-256, each as one of 62 digits."""
    digest = hashlib.sha256(public.encode()).digest()
    return "".join(_HASH_DIGITS[byte % len(_HASH_DIGITS)] for byte in digest[:8])


class Edge(object):
    """One export of ``exporter`` and the imports of it into other accounts.

    ``imports`` is a list of (importer name, import claim without account/token).
    An ``exclusive`` edge owns every import of its export in every account;
    otherwise it only owns the imports of the accounts it lists (several
    shares of one stream add importers to the same export).
    """

    def __init__(self, exporter, export, imports, exclusive=True):
        self.exporter = exporter
        self.export = export
        self.imports = imports
        self.exclusive = exclusive

    def where(self):
        return "export %r of account %r" % (self.export.get("name") or self.export["subject"], self.exporter)


# --------------------------------------------------------------------------
# subjects


def _subject(value, what):
    try:
        return check_subject(value)
    except ValueError as exc:
        raise StoreError("%s: %s" % (what, exc)) from exc


# --------------------------------------------------------------------------
# options to edges


def export_claim(name, subject, kind, public=True, response_type=None, account_token_position=None,
                 description=None, where="export"):
    subject = _subject(subject, "%s: subject" % where)
    export = {"name": name or subject, "subject": subject, "type": kind}
    if not public:
        export["token_req"] = True
    if response_type:
        # nsc's flags take any case; the claim takes nats' spelling
        response_type = dict((t.lower(), t) for t in RESPONSE_TYPES).get(str(response_type).lower(), response_type)
    if response_type and response_type != "Singleton":
        if kind != "service":
            raise StoreError("%s: response_type is for service exports only" % where)
        if response_type not in RESPONSE_TYPES:
            raise StoreError("%s: response_type must be one of %s" % (where, ", ".join(RESPONSE_TYPES)))
        export["response_type"] = response_type
    if account_token_position:
        tokens = subject.split(".")
        if not 1 <= account_token_position <= len(tokens) or tokens[account_token_position - 1] != "*":
            raise StoreError("%s: account_token_position %d must point at a '*' token of %r"
                             % (where, account_token_position, subject))
        export["account_token_position"] = account_token_position
    if description:
        export["description"] = description
    return export


def import_claim(export, importer_public, subject=None, local_subject=None, name=None, where="import"):
    """The import of ``export`` an account with key ``importer_public`` makes."""
    if subject is None:
        subject = export["subject"]
        position = export.get("account_token_position")
        if position:
            tokens = subject.split(".")
            tokens[position - 1] = importer_public
            subject = ".".join(tokens)
    subject = _subject(subject, "%s: subject" % where)
    if not subject_within(subject, export["subject"]):
        raise StoreError("%s: subject %r is not part of the exported %r" % (where, subject, export["subject"]))
    position = export.get("account_token_position")
    if position and subject.split(".")[position - 1] != importer_public:
        raise StoreError("%s: token %d of subject %r must be the importing account's key %s"
                         % (where, position, subject, importer_public))
    claim = {"name": name or export["name"], "subject": subject, "type": export["type"]}
    if local_subject is not None:
        local_subject = _subject(local_subject, "%s: local_subject" % where)
        if local_subject != subject:
            if local_subject.count("*") != subject.count("*") or local_subject.endswith(">") != subject.endswith(">"):
                raise StoreError("%s: local_subject %r must have the wildcards of subject %r"
                                 % (where, local_subject, subject))
            claim["local_subject"] = local_subject
    return claim


def share_edges(share, publics):
    """Edges sharing stream ``share['stream']`` of ``from_account`` with
    ``to_account``, and the ``external`` a sourcing or mirroring stream uses.

    ``publics``: {account name: public key} of the store's accounts.
    """
    stream = share["stream"]
    source, target = share["from_account"], share["to_account"]
    for role, account in (("from_account", source), ("to_account", target)):
        if account not in publics:
            raise StoreError("share_stream.%s: account %r is not in the store" % (role, account))
    if source == target:
        raise StoreError("share_stream: from_account and to_account are both %r" % source)
    where = "share_stream of %r from %r to %r" % (stream, source, target)
    if not stream or any(c in stream for c in " .*>\t"):
        raise StoreError("%s: %r is not a stream name" % (where, stream))
    from_domain, to_domain = share.get("from_domain"), share.get("to_domain")
    api = "$JS.%s.API" % from_domain if from_domain else "$JS.API"
    local_api = share.get("api_prefix") or "JS.%s@%s.API" % (source, from_domain or "default")
    _subject(local_api, "%s: api_prefix" % where)
    kind = share.get("kind") or "source"
    tag = "%s-%s" % (stream, target)
    edges = []

    def service(suffix, name, response_type=None, subject=None):
        """A service export on the owner's API, imported under the local API prefix
        (or, given ``subject``, imported as it is)."""
        export = export_claim(name, subject or "%s.%s" % (api, suffix), "service", response_type=response_type,
                              where=where)
        local = None if subject else "%s.%s" % (local_api, suffix)
        edges.append(Edge(source, export, [(target, import_claim(
            export, publics[target], local_subject=local, name=name, where=where))], exclusive=False))

    if kind in ("source", "mirror"):
        deliver = share.get("deliver_prefix") or ".".join(
            ("deliver", source, from_domain or "default", target, to_domain or "default", stream))
        _subject(deliver, "%s: deliver_prefix" % where)
        if "*" in deliver.split(".") or ">" in deliver.split("."):
            raise StoreError("%s: deliver_prefix %r must not have wildcards" % (where, deliver))
        # measured on 2.9.10 and 2.15.1: CONSUMER.CREATE.<stream> without a filter subject,
        # CONSUMER.CREATE.<stream>.<consumer>.<filter> with one
        service("CONSUMER.CREATE.%s" % stream, "%s-create" % stream)
        service("CONSUMER.CREATE.%s.>" % stream, "%s-create-ext" % stream)
        # the sourcing side answers flow control on $JS.FC.<stream>.<consumer>.<id> (v1), and from 2.14 on
        # $JS.FC.<domain>.<account hash>.<stream>.<consumer>.<id> (v2, feature flag js_ack_fc_v2); without these
        # imports a catch-up stalls after the first window (about 2 MB). The v1 form is exact (five tokens) so that
        # the two exports do not overlap; a server before 2.14 never uses the v2 one.
        service(None, "%s-fc" % stream, subject="$JS.FC.%s.*.*" % stream)
        service(None, "%s-fc-v2" % stream, subject="$JS.FC.*.%s.%s.*.*" % (account_hash(publics[source]), stream))
        delivery = export_claim("%s-deliver" % tag, "%s.>" % deliver, "stream", where=where)
        edges.append(Edge(source, delivery, [(target, import_claim(delivery, publics[target],
                                                                   name="%s-deliver" % tag, where=where))],
                          exclusive=False))
        external = {"api": local_api, "deliver": deliver}
    elif kind == "consumer":
        durable = share.get("durable")
        if not durable or any(c in durable for c in " .*>\t"):
            raise StoreError("%s: kind consumer needs a durable (a consumer name)" % where)
        service("CONSUMER.MSG.NEXT.%s.%s" % (stream, durable), "%s-%s-next" % (stream, durable), "Stream")
        # acks go to the reply subjects of the messages, which are not renamed: $JS.ACK.<stream>.<consumer>.<...>
        # (v1), and from 2.14 on $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<...> (v2)
        service(None, "%s-%s-ack" % (stream, durable), subject="$JS.ACK.%s.%s.>" % (stream, durable))
        service(None, "%s-%s-ack-v2" % (stream, durable),
                subject="$JS.ACK.*.%s.%s.%s.>" % (account_hash(publics[source]), stream, durable))
        external = {"api": local_api, "next": "%s.CONSUMER.MSG.NEXT.%s.%s" % (local_api, stream, durable)}
    else:
        raise StoreError("%s: kind must be source, mirror or consumer" % where)
    return edges, external


# --------------------------------------------------------------------------
# applying edges


def _owned(imp, exporter_public, export):
    return (imp.get("account") == exporter_public and imp.get("type") == export["type"]
            and subject_within(imp.get("subject", ""), export["subject"]))


def _same_export(one, two):
    same_subject = one.get("subject") == two.get("subject") and one.get("type") == two.get("type")
    return one.get("name") == two.get("name") or same_subject


def apply(accounts, edges, state, activation, now=None):
    """New claims of ``accounts`` ({name: claims}) with ``edges`` present or
    absent. ``activation(exporter, export, importer_public, import, current_token)``
    returns the token of a private export's import. An account that no longer
    imports a private export gets its activation revoked (the export's
    ``revocations``, at ``now``). Raises StoreError before anything is decided
    if the result would not hold together."""
    result = {name: copy.deepcopy(claims) for name, claims in accounts.items()}
    for edge in edges:
        if edge.exporter not in result:
            raise StoreError("%s: account %r is not in the store" % (edge.where(), edge.exporter))
        for importer, _imp in edge.imports:
            if importer not in result:
                raise StoreError("%s: importing account %r is not in the store" % (edge.where(), importer))
            if importer == edge.exporter:
                raise StoreError("%s: an account cannot import its own export (import cycle)" % edge.where())
        _apply_one(result, edge, state, activation, int(time.time()) if now is None else now)
    if state == "present":
        for edge in edges:
            _check_cycles(result, edge)
    return result


def _apply_one(result, edge, state, activation, now):
    exporter = result[edge.exporter]
    exporter_public = exporter["sub"]
    nats = exporter["nats"]
    exports = nats.get("exports") or []
    current = [e for e in exports if _same_export(e, edge.export)]
    others = [e for e in exports if not _same_export(e, edge.export)]
    export = edge.export
    listed = {importer for importer, _imp in edge.imports}

    # which imports this edge owns, per account
    def owning(name):
        return edge.exclusive or name in listed

    # an activation token stays valid until revoked: importers that go lose theirs
    revocations = dict((current[0] if current else {}).get("revocations") or {})

    for name, claims in result.items():
        if name == edge.exporter or not owning(name):
            continue
        old_exports = current or [export]
        imports = claims["nats"].get("imports") or []
        kept = [i for i in imports if not any(_owned(i, exporter_public, e) for e in old_exports)]
        previous = [i for i in imports if i not in kept]
        if state == "present":
            for importer, imp in edge.imports:
                if importer != name:
                    continue
                imp = dict(imp, account=exporter_public)
                for other in kept:
                    if other.get("type") == imp["type"] and subjects_collide(
                            other.get("local_subject") or other.get("to") or other["subject"],
                            imp.get("local_subject") or imp["subject"]):
                        raise StoreError("%s: the import into account %r on %r overlaps its import %r on %r"
                                         % (edge.where(), name, imp.get("local_subject") or imp["subject"],
                                            other.get("name"), other.get("local_subject") or other["subject"]))
                if export.get("token_req"):
                    token = next((p.get("token") for p in previous if p.get("subject") == imp["subject"]), None)
                    imp["token"] = activation(edge.exporter, export, claims["sub"], imp, token)
                kept.append(imp)
        if export.get("token_req") and previous and not any(_owned(i, exporter_public, export) for i in kept):
            revocations[claims["sub"]] = now
        _set(claims["nats"], "imports", kept)

    if state == "present":
        for other in others:
            if other.get("type") == export["type"] and subjects_collide(other["subject"], export["subject"]):
                raise StoreError("%s: subject %r overlaps export %r on %r of that account"
                                 % (edge.where(), export["subject"], other.get("name"), other["subject"]))
        if revocations and export.get("token_req"):
            export = dict(export, revocations=revocations)
        _set(nats, "exports", others + [export])
    elif edge.exclusive or not any(
            _owned(i, exporter_public, e) for claims in result.values()
            for i in claims["nats"].get("imports") or [] for e in current):
        _set(nats, "exports", others)


def _set(nats, key, values):
    if values:
        nats[key] = values
    else:
        nats.pop(key, None)


def _flows(result):
    """Every import as a flow (from account, subject) -> (to account, subject):
    streams flow from exporter to importer, service requests the other way."""
    by_public = {claims["sub"]: name for name, claims in result.items()}
    flows = []
    for name, claims in result.items():
        for imp in claims["nats"].get("imports") or []:
            exporter = by_public.get(imp.get("account"))
            if exporter is None:
                continue
            local = imp.get("local_subject") or imp.get("to") or imp["subject"]
            if imp.get("type") == "stream":
                flows.append(((exporter, imp["subject"]), (name, local), "stream"))
            else:
                flows.append(((name, local), (exporter, imp["subject"]), "service"))
    return flows


def _check_cycles(result, edge):
    """Refuse a flow out of the edge's export that comes back to where it started."""
    flows = _flows(result)
    for start, first, kind in flows:
        owner = start[0] if kind == "stream" else first[0]
        if owner != edge.exporter or kind != edge.export["type"]:
            continue
        if not subject_within((start if kind == "stream" else first)[1], edge.export["subject"]):
            continue
        seen, todo = set(), [(first, [start[0], first[0]])]
        while todo:
            (account, subject), path = todo.pop()
            for origin, target, other_kind in flows:
                if other_kind != kind or origin[0] != account or not subjects_collide(origin[1], subject):
                    continue
                if target[0] == start[0] and subjects_collide(target[1], start[1]):
                    raise StoreError("%s: import cycle %s on %r" % (
                        edge.where(), " -> ".join(path + [target[0]]), start[1]))
                if target not in seen:
                    seen.add(target)
                    todo.append((target, path + [target[0]]))


# --------------------------------------------------------------------------
# what changed


def graph_part(claims):
    """The exports and imports of an account, as compared and shown in diffs."""
    nats = (claims or {}).get("nats") or {}
    return jwt.semantic({"exports": nats.get("exports") or [], "imports": [
        dict(i, token="(activation token)") if i.get("token") else i for i in nats.get("imports") or []]})


def activation_claims(importer_public, export, imp, issuer_account=None):
    """Claims of an activation token (without issuer) for an import of a private export."""
    nats = {"subject": imp["subject"], "kind": export["type"], "type": "activation", "version": 2}
    if issuer_account:
        nats["issuer_account"] = issuer_account
    return {"name": imp["subject"], "sub": importer_public, "nats": nats}
