# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's inventory data model: checked up front, then planned per stage.

site.yml converges what the inventory declares (nats_accounts, nats_exports,
nats_streams, nats_consumers, nats_kv_buckets, nats_object_stores, nats_object_fetch)
with the modules. Everything here is pure logic
on the controller, so a mistake in any item fails before the first change.
"""

from __future__ import annotations

import hashlib
import json
import os
from urllib.parse import quote

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import ItemChecker, ItemError, is_copy, where
from ansible_collections.nats_edge.fleet.plugins.plugin_utils._data import plain

# Keys of an item that belong to the fleet, not to the module that converges it.
FLEET_KEYS = {
    "account": {"users", "admin_user"},
    "user": set(),
    "export": set(),
    "stream": {"account"},
    "consumer": {"account"},
    "kv": {"account"},
    "objects": {"account"},
    "fetch": {"account", "owner", "group"},
}

_MODULES = {"account": "nsc_account", "user": "nsc_user", "export": "nsc_export",
            "stream": "a jetstream_stream item", "consumer": "jetstream_consumer", "kv": "a jetstream_kv item",
            "objects": "jetstream_object_store", "fetch": "jetstream_object_fetch"}

_NOT_ITEM = {"store_dir", "keys_dir", "operator", "lock_timeout", "servers", "creds", "nkey_seed", "user",
             "password", "token", "tls_ca", "tls_cert", "tls_key", "timeout", "domain", "api_prefix", "push",
             "expected_servers", "streams"}


class FleetError(NatsEdgeError, ValueError):
    """Inventory data the fleet cannot converge, worded for the user."""


def _specs():
    # imported late: the specs the modules take are the one definition of what an item takes
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import (
        bucket_content, buckets, consumer_apply, object_transfer, stream_model)
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, export, user
    return {
        "account": account.ARGUMENT_SPEC,
        "user": user.ARGUMENT_SPEC,
        "export": export.ARGUMENT_SPEC,
        "stream": stream_model.module_argspec()["streams"]["options"],
        "consumer": consumer_apply.ARGUMENT_SPEC,
        "kv": buckets.ITEM,
        "objects": bucket_content.OBJECT_STORE_OPTIONS,
        "fetch": object_transfer.FETCH_ARGUMENT_SPEC,
    }


def _item_spec(spec, kind):
    item = {k: v for k, v in spec.items() if k not in _NOT_ITEM}
    if kind == "user":
        item.pop("account", None)  # the account the user is listed under
    return item


def _validate(kind, where, item, checker):
    """``checker``: the kind's ItemChecker (the one validator of list items, with the module's spec)."""
    try:
        checker.check(where, item)
    except ItemError as exc:
        raise FleetError(str(exc)) from exc


def _stream_plan(validated):
    """A stream item as jetstream_stream would take it: its plan's checks (retention, copies, limits)."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model
    stream_model.desired_items({"streams": [validated], "state": "present",
                                "on_immutable_change": "fail", "allow_data_loss": False})
    return validated


def _label(kind, item, index):
    name = item.get("name") if isinstance(item, dict) else None
    if kind == "export" and isinstance(item, dict) and item.get("share_stream"):
        share = item["share_stream"] or {}
        name = "share of %s from %s to %s" % (share.get("stream"), share.get("from_account"), share.get("to_account"))
    if kind == "fetch" and isinstance(item, dict):
        name = "%s/%s" % (item.get("bucket"), item.get("name"))
    return where({"account": "nats_accounts", "export": "nats_exports", "stream": "nats_streams",
                  "consumer": "nats_consumers", "kv": "nats_kv_buckets", "objects": "nats_object_stores",
                  "fetch": "nats_object_fetch"}[kind], index, name)


def check(accounts=None, exports=None, streams=None, consumers=None, where="", kv_buckets=None, object_stores=None,
          object_fetch=None, files_dir=""):
    """Every item against the option spec of the module that converges it.

    Returns the number of items checked; raises FleetError naming the list,
    the item and the field. ``files_dir`` is where relative object ``src``
    files are found (the inventory's directory)."""
    specs = {}
    for kind, spec in _specs().items():
        item_spec = _item_spec(spec, kind)
        specs[kind] = ItemChecker(item_spec, accepted=FLEET_KEYS[kind], takes=_MODULES[kind],
                                  then=_stream_plan if kind == "stream" else None)
    count = 0
    names = set()
    for i, account in enumerate(accounts or []):
        label = _label("account", account, i)
        _validate("account", where + label, account, specs["account"])
        if account["name"] in names:
            raise FleetError("%s%s: account %r is declared twice" % (where, label, account["name"]))
        names.add(account["name"])
        users = account.get("users") or []
        if not isinstance(users, list):
            raise FleetError("%s%s.users: expected a list of users" % (where, label))
        for j, user in enumerate(users):
            _validate("user", "%s%s.users[%d]%s" % (where, label, j, " (%s)" % user.get("name") if isinstance(
                user, dict) and user.get("name") else ""), user, specs["user"])
        admin = account.get("admin_user")
        if admin and admin not in [u.get("name") for u in users]:
            raise FleetError("%s%s.admin_user: %r is not one of the account's users" % (where, label, admin))
        count += 1 + len(users)
    for kind, items in (("export", exports), ("stream", streams), ("consumer", consumers), ("kv", kv_buckets),
                        ("objects", object_stores), ("fetch", object_fetch)):
        for i, item in enumerate(items or []):
            _validate(kind, where + _label(kind, item, i), item, specs[kind])
            account = item.get("account")
            if kind != "export" and account and names and account not in names:
                raise FleetError("%s%s.account: %r is not in nats_accounts" % (where, _label(kind, item, i), account))
            count += 1
    _check_object_stores(object_stores, where, files_dir)
    _check_object_fetch(object_fetch, object_stores, where)
    return count


def object_sources(stores, files_dir):
    """``nats_object_stores`` with every relative ``src`` found under ``files_dir``."""
    out = []
    for store in stores or []:
        if isinstance(store, dict) and isinstance(store.get("objects"), list):
            store = dict(store, objects=[
                dict(obj, src=os.path.join(files_dir or "", obj["src"]))
                if isinstance(obj, dict) and isinstance(obj.get("src"), str) and not os.path.isabs(obj["src"]) else obj
                for obj in store["objects"]])
        out.append(store)
    return out


# each host's variables that check_hosts checks, as check() takes them
HOST_DATA = (("streams", "nats_streams"), ("consumers", "nats_consumers"), ("kv_buckets", "nats_kv_buckets"),
             ("accounts", "nats_accounts"), ("object_stores", "nats_object_stores"),
             ("object_fetch", "nats_object_fetch"))


def check_hosts(hostvars, hosts):
    """Each host's streams, consumers, buckets, stores and fetches checked as check() checks them, every distinct
    set of them once (sites share their groups' data): {host: items checked}. Raises one error with the first
    problem of each distinct set, named with the domains that hold it."""
    done, domains, out = {}, {}, {}
    for host in hosts:
        hv = hostvars[host]
        data = dict((key, plain(hv.get(name)) or []) for key, name in HOST_DATA)
        data["files_dir"] = hv.get("inventory_dir") or ""
        key = json.dumps(data, sort_keys=True, default=repr)
        domains.setdefault(key, []).append(hv.get("nats_server_jetstream_domain") or "")
        if key not in done:
            try:
                done[key] = check(data["accounts"], None, data["streams"], data["consumers"],
                                  kv_buckets=data["kv_buckets"], object_stores=data["object_stores"],
                                  object_fetch=data["object_fetch"], files_dir=data["files_dir"])
            except FleetError as exc:
                done[key] = exc
        out[host] = done[key]
    problems = ["%s: %s" % (_some(domains[key]), value) for key, value in done.items() if isinstance(value, FleetError)]
    if problems:
        raise FleetError("\n".join(problems))
    return out


def _some(names, shown=5):
    """Distinct names in order, the first ``shown`` of them and how many more."""
    names = list(dict.fromkeys(names))
    return ", ".join(names[:shown]) + (" and %d more" % (len(names) - shown) if len(names) > shown else "")


def _check_object_stores(stores, where, files_dir):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets
    seen = set()
    for i, store in enumerate(object_sources(stores, files_dir)):
        label = where + _label("objects", store, i)
        try:
            buckets.check_bucket("object store", store["name"])
        except buckets.BucketError as exc:
            raise FleetError("%s.name: %s" % (label, exc))
        key = (store.get("account"), store["name"])
        if key in seen:
            raise FleetError("%s: object store %r is declared twice in this domain" % (label, store["name"]))
        seen.add(key)
        if store.get("mirror") and store.get("objects") is not None:
            raise FleetError("%s.objects: a mirror is read-only; put the objects in its origin %r" % (
                label, store["mirror"]["name"]))
        names = set()
        for j, obj in enumerate(store.get("objects") or []):
            at = "%s.objects[%d] (%s)" % (label, j, obj["name"])
            if obj["name"] in names:
                raise FleetError("%s: object %r is listed twice" % (at, obj["name"]))
            names.add(obj["name"])
            if obj.get("src") is not None and not os.path.isfile(obj["src"]):
                raise FleetError("%s.src: %s is not a file on the controller" % (at, obj["src"]))


def _check_object_fetch(fetch, stores, where):
    declared = {s.get("name") for s in stores or [] if isinstance(s, dict)}
    for i, item in enumerate(fetch or []):
        label = where + _label("fetch", item, i)
        if not os.path.isabs(item["dest"]):
            raise FleetError("%s.dest: %r is not an absolute path" % (label, item["dest"]))
        try:
            if not isinstance(item.get("mode"), int):  # an int is a mode already (YAML's 0644)
                int(str(item.get("mode") or "0644"), 8)
        except ValueError:
            raise FleetError("%s.mode: %r is not an octal mode such as '0644'" % (label, item["mode"]))
        if item["bucket"] not in declared:
            raise FleetError("%s.bucket: %r is not in this domain's nats_object_stores (%s)" % (
                label, item["bucket"], ", ".join(sorted(declared)) or "none"))


def module_args(item, kind):
    """An item without the fleet's own keys: what its module takes."""
    return {k: v for k, v in item.items() if k not in FLEET_KEYS[kind]}


def admin_users(accounts):
    """{account: the user whose creds converge its streams} (admin_user, else the first user)."""
    out = {}
    for account in accounts or []:
        users = [u["name"] for u in account.get("users") or []]
        if account.get("admin_user") or users:
            out[account["name"]] = account.get("admin_user") or users[0]
    return out


def creds_path(creds_dir, account, user):
    return "%s/%s/%s.creds" % (str(creds_dir).rstrip("/"), account, user)


def users(accounts):
    """Every user of every account, flattened, each with its account."""
    return [dict(user, account=account["name"]) for account in accounts or [] for user in account.get("users") or []]


def _is_key(value, prefix):
    return isinstance(value, str) and len(value) == 56 and value.startswith(prefix) and value.isalnum()


def leaf_remotes(remotes, account_ids, system_account_id, creds_dir, system_user="sys", host=""):
    """Leaf remotes that name accounts, with public keys and creds from the store.

    ``{hub_group: hub, account: TEST, user: leaf}`` becomes a remote bound to
    TEST's key, authenticated with ``<creds_dir>/TEST/leaf.creds``.
    ``system_account: true`` binds the system account (its user defaults to
    ``system_user``)."""
    out = []
    names = {key: name for name, key in (account_ids or {}).items()}
    for i, remote in enumerate(remotes or []):
        where = "%snats_server_leafnode_remotes[%d]" % ("%s: " % host if host else "", i)
        if not isinstance(remote, dict):
            raise FleetError("%s: expected a mapping, got %r" % (where, remote))
        remote = dict(remote)
        user = remote.pop("user", None)
        account = remote.get("account")
        if remote.get("system_account") and not account:
            account = names.get(system_account_id) or system_account_id
            user = user or system_user
        if account and not _is_key(account, "A"):
            if account not in (account_ids or {}):
                raise FleetError("%s.account: no account %r in the store (known: %s)" % (
                    where, account, ", ".join(sorted(account_ids or {})) or "none"))
            name, remote["account"] = account, account_ids[account]
        else:
            name = names.get(account, account)
            if account:
                remote["account"] = account
        if user:
            if not name:
                raise FleetError("%s.user: a user needs the account it belongs to" % where)
            if remote.get("credentials") or remote.get("credentials_src"):
                raise FleetError("%s: give either user or credentials/credentials_src" % where)
            remote["credentials_src"] = creds_path(creds_dir, name, user)
        out.append(remote)
    return out


def domains(hostvars, hosts):
    """{domain: {"hosts": [...], "urls": [...], "leader": first host}}, in play order."""
    out = {}
    for host in hosts:
        hv = hostvars[host]
        domain = hv.get("nats_server_jetstream_domain") or ""
        entry = out.setdefault(domain, {"hosts": [], "urls": [], "leader": host})
        entry["hosts"].append(host)
        url = hv.get("_nats_fleet_url")
        if url:
            entry["urls"].append(url)
    return out


def push_order(accounts, exports, last=()):
    """``accounts`` in the order their JWTs are pushed: an exporter before its importers.

    A server that loads an account whose import names an account it does not
    have yet keeps that import out, and a later push of the same JWT does not
    bring it back. Leaf remotes load their accounts as soon as a JWT lands, so
    an import cycle (the exchange pattern) is broken by pushing the accounts in
    ``last`` (those bound on leaf remotes) after the others of the cycle."""
    names = [a["name"] for a in accounts or [] if isinstance(a, dict) and a.get("name")]
    needs = {name: set() for name in names}
    for export in exports or []:
        share = export.get("share_stream") if isinstance(export, dict) else None
        if share:
            exporter, importers = share.get("from_account"), [share.get("to_account")]
        elif isinstance(export, dict):
            exporter = export.get("account")
            importers = [i.get("account") for i in export.get("importers") or [] if isinstance(i, dict)]
        else:
            continue
        for importer in importers:
            if importer in needs and exporter in needs and importer != exporter:
                needs[importer].add(exporter)
    order, pending = [], list(names)
    while pending:
        ready = [n for n in pending if needs[n] <= set(order)]
        if not ready:  # a cycle
            ready = [next((n for n in pending if n not in last), pending[0])]
        order += ready
        pending = [n for n in pending if n not in ready]
    by_name = {a["name"]: a for a in accounts if isinstance(a, dict) and a.get("name")}
    return [by_name[n] for n in order]


def push_targets(domain_map, via="site", hub_domain=""):
    """Where the push stage sends account JWTs: [{domain, urls, expected}].

    ``site``: every domain's own servers, each confirming; ``hub``: the hub's
    servers, and every server of the fleet confirms (the system account is bound
    on the leaf links)."""
    if via not in ("site", "hub"):
        raise FleetError("nats_fleet_push_via: expected site or hub, got %r" % (via,))
    if via == "hub":
        if hub_domain not in domain_map:
            raise FleetError("nats_fleet_push_via=hub: no host of domain %r in the play" % (hub_domain,))
        return [{"domain": hub_domain, "urls": domain_map[hub_domain]["urls"],
                 "expected": sum(len(entry["hosts"]) for entry in domain_map.values())}]
    return [{"domain": domain, "urls": entry["urls"], "expected": len(entry["hosts"])}
            for domain, entry in sorted(domain_map.items()) if entry["urls"]]


def stream_batches(streams, default_account, creds_dir, admins, where="", kind="stream", files_dir=""):
    """The domain's streams (or KV buckets, or object stores) per account: [{account, creds, origins, copies}].

    Origins (streams that copy from nowhere) are converged in a first pass on
    every domain, so mirrors and sources find what they copy. An object's
    relative ``src`` is found under ``files_dir``."""
    batches = {}
    if kind == "objects":
        streams = object_sources(streams, files_dir)
    for i, stream in enumerate(streams or []):
        account = stream.get("account") or default_account
        if not account:
            raise FleetError("%s%s: no account (set nats_fleet_default_account or the item's account)"
                             % (where, _label(kind, stream, i)))
        if account not in admins:
            raise FleetError("%s%s.account: account %r has no user to converge its streams with"
                             % (where, _label(kind, stream, i), account))
        batch = batches.setdefault(account, {"account": account, "creds": creds_path(creds_dir, account, admins[account]),
                                             "origins": [], "copies": []})
        item = module_args(stream, kind)
        if is_copy(item):
            batch["copies"].append(item)
        else:
            batch["origins"].append(item)
    return list(batches.values())


def pass_items(batches, key):
    """Every batch's ``key`` items (``origins`` or ``copies``), each with its batch's creds: the items of one
    module run that converges the pass for every account at once."""
    return [dict(item, creds=batch["creds"]) for batch in batches or [] for item in batch.get(key) or []]


def consumers(items, default_account, creds_dir, admins):
    """Consumers with the creds of their account: [{args, creds, account}]; ``args`` (an item of
    jetstream_domain's ``consumers``) carries the creds too."""
    out = []
    for item in items or []:
        account = item.get("account") or default_account
        creds = creds_path(creds_dir, account, admins.get(account, ""))
        out.append({"account": account, "creds": creds, "args": dict(module_args(item, "consumer"), creds=creds)})
    return out


def contexts(domain_map, default_account, creds_dir, admins, system_account, system_user, extra=None, context_dir="",
             ca=""):
    """nats CLI contexts: one per domain (its servers, the default account's admin user), ``sys``,
    and any declared in ``extra`` ({name, domain, account, user, description}); with ``ca``, each names the CA
    that verifies the servers (natscli's ``ca``). With ``context_dir``, each also carries the ``path`` and
    ``content`` of its context file there."""
    out = _contexts(domain_map, default_account, creds_dir, admins, system_account, system_user, extra)
    for item in out:
        if ca:
            item["ca"] = ca
        if context_dir:
            item["path"] = "%s/%s.json" % (context_dir.rstrip("/"), item["name"])
            # as to_nice_json writes it, so files written before read as current
            item["content"] = json.dumps(dict((k, item[k]) for k in ("description", "url", "creds", "ca") if k in item),
                                         indent=4, sort_keys=True, separators=(",", ": ")) + "\n"
    return out


def cached_copies(copies, states, fetched):
    """The object copies of a host (``copies``, items of object_fetches' ``copies``) with the checksum of their
    source in the controller's cache: the one the domain's run reported in ``fetched`` (jetstream_domain's
    result; in check mode, of the content it would write), else what the nats_checksum lookup read of the cache
    file (``states``, in the same order), else ``not in the cache``."""
    known = dict((item["dest"], item["checksum"]) for item in fetched or [] if item.get("checksum"))
    return [dict(copy, checksum=known.get(copy["src"]) or (state or {}).get("checksum") or "not in the cache")
            for copy, state in zip(copies, states)]


def stale_files(files, states, mode):
    """The ``files`` ({path, content}) whose state on disk (``states``, in the same order: what the
    nats_checksum lookup reports with details) differs in content or mode."""
    stale = []
    for item, state in zip(files, states):
        wanted = hashlib.sha1(item["content"].encode("utf-8")).hexdigest()
        if not state.get("exists") or state.get("checksum") != wanted or state.get("mode") != mode:
            stale.append(item)
    return stale


def _contexts(domain_map, default_account, creds_dir, admins, system_account, system_user, extra):
    out = []
    for domain, entry in sorted(domain_map.items()):
        if not domain or not entry["urls"] or default_account not in admins:
            continue
        out.append({"name": domain, "description": "JetStream domain %s as %s/%s" % (
            domain, default_account, admins[default_account]), "url": ",".join(entry["urls"]),
            "creds": creds_path(creds_dir, default_account, admins[default_account])})
    all_urls = [url for _d, entry in sorted(domain_map.items()) for url in entry["urls"]]
    hub = next((entry for _d, entry in sorted(domain_map.items()) if entry["urls"]), None)
    if hub:
        out.append({"name": "sys", "description": "system account %s/%s" % (system_account, system_user),
                    "url": ",".join(hub["urls"]), "creds": creds_path(creds_dir, system_account, system_user)})
    for item in extra or []:
        entry = domain_map.get(item.get("domain") or "") or {}
        account = item.get("account") or default_account
        user = item.get("user") or admins.get(account)
        out.append({"name": item["name"], "description": item.get("description") or "%s/%s" % (account, user),
                    "url": ",".join(entry.get("urls") or all_urls), "creds": creds_path(creds_dir, account, user)})
    return out


def object_fetches(hostvars, hosts, default_account, creds_dir, admins, cache_dir, domain=""):
    """The ``nats_object_fetch`` of one domain's hosts: each object fetched once, from the domain's
    own copy, into the controller's cache; then copied to every host that lists it.

    Returns {"fetches": [{account, creds, bucket, name, cache, args}], "copies": {host: [{src, dest, path (= dest),
    kind (file), mode, owner, group}]}}; ``args``, an item of jetstream_domain's ``fetches`` that writes the
    cache file (0600)."""
    fetches, copies = {}, {}
    for host in hosts:
        # hostvars come raw (rendering every host's variables costs more than the plan): only these items are read
        for item in plain(hostvars[host].get("nats_object_fetch") or []):
            account = item.get("account") or default_account
            if account not in admins:
                raise FleetError("%s: nats_object_fetch (%s/%s).account: account %r has no user to read with" % (
                    host, item.get("bucket"), item.get("name"), account))
            cache = "/".join([str(cache_dir).rstrip("/"), quote(domain or "-", safe=""), account, item["bucket"],
                              quote(item["name"], safe="")])
            creds = creds_path(creds_dir, account, admins[account])
            fetches.setdefault(cache, {"account": account, "creds": creds, "bucket": item["bucket"], "name": item["name"],
                                       "cache": cache, "args": {"bucket": item["bucket"], "name": item["name"],
                                                                "dest": cache, "mode": "0600", "creds": creds}})
            mode = item.get("mode") or "0644"
            # a mode written unquoted in YAML (0640) arrives as a number: as an octal string it compares with a host's
            mode = "%04o" % mode if isinstance(mode, int) else mode
            # path and kind: the copy as nats_server_stale_paths compares it with a host's file
            copies.setdefault(host, []).append({"src": cache, "dest": item["dest"], "path": item["dest"], "kind": "file",
                                                "mode": mode, "owner": item.get("owner"), "group": item.get("group")})
    return {"fetches": list(fetches.values()), "copies": copies}
