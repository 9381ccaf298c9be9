# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's inventory data model: checked up front, then planned per stage.

site.yml converges what the inventory declares (nats_accounts, nats_exports,
nats_streams, nats_consumers, nats_kv_buckets, nats_object_stores, nats_object_fetch)
with the modules. Everything here is pure logic on the controller, so a mistake in
any item fails before the first change: the preflight (check, check_hosts) runs the
checks of the modules that converge the items - the same functions, item by item and
across each list (nsc_store's bulk.checked_items and check_references, jetstream_domain's
item_checker and checked_lists) - and what only the fleet knows: the accounts the items
name, the streams the consumers read, the stores the fetches read, copies in a cycle
across domains.
"""

from __future__ import annotations

import hashlib
import json
import os
from urllib.parse import quote

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import ItemError, is_copy, refuse_unknown, where
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

_LISTS = {"account": "nats_accounts", "export": "nats_exports", "stream": "nats_streams", "consumer": "nats_consumers",
          "kv": "nats_kv_buckets", "objects": "nats_object_stores", "fetch": "nats_object_fetch"}

# each JetStream kind of the inventory: the list of jetstream_domain the streams stage gives its items to, and the
# argument of check() that holds them
DOMAIN_LISTS = (("stream", "streams", "streams"), ("kv", "kv_buckets", "kv_buckets"),
                ("objects", "object_stores", "object_stores"), ("consumer", "consumers", "consumers"),
                ("fetch", "fetches", "object_fetch"))


class FleetError(NatsEdgeError, ValueError):
    """Inventory data the fleet cannot converge, worded for the user."""


def checker(kind):
    """The ItemChecker of the inventory's items of a JetStream ``kind``: jetstream_domain's (its item_checker, with
    the kind's own check), taking the fleet's keys (an account instead of creds), a fetch's dest on its host."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import domain
    key = dict((name, domain_key) for name, domain_key, _arg in DOMAIN_LISTS)[kind]
    return domain.item_checker(key, accepted=FLEET_KEYS[kind], takes=_MODULES[kind], without=("creds",),
                               dest_here=False)


def nsc_kinds():
    """The nsc kinds as nsc_store checks their lists: {kind: (its module_utils module, its spec, its constraints)}."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, export, user
    return {"account": (account, account.ARGUMENT_SPEC, {}), "user": (user, user.ARGUMENT_SPEC, user.CONSTRAINTS),
            "export": (export, export.ARGUMENT_SPEC, export.CONSTRAINTS)}


class _Listed(object):
    """One list as bulk.checked_items reads it off a module run: ``params[key]``. The values it would hide from a
    module's output are the inventory's own, on the controller: they are dropped."""

    def __init__(self, key, items):
        self.params = {key: items}
        self.no_log_values = set()


def _nsc_checked(kind, key, items, label, operator):
    """The items of an nsc ``kind`` checked as nsc_store checks them (bulk.checked_items with the kind: its spec,
    its check_item, no item twice), named ``key[index] (label)``: [(place, params)]."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import bulk
    module_utils, spec, constraints = nsc_kinds()[kind]
    task = dict(store_dir=None, keys_dir=None, operator=operator, lock_timeout=None, push=False, expected_servers=None)
    return bulk.checked_items(_Listed(key, items), key, spec, label, task, kind=module_utils, **constraints)


def _mapping(place, item):
    if not isinstance(item, dict):
        raise ItemError("%s: expected a mapping, got %r" % (place, item))
    return item


def _label(kind, item, index):
    name = item.get("name") if isinstance(item, dict) else None
    if kind == "export" and isinstance(item, dict) and item.get("share_stream"):
        share = item["share_stream"] or {}
        name = "share of %s from %s to %s" % (share.get("stream"), share.get("from_account"), share.get("to_account"))
    if kind == "fetch" and isinstance(item, dict):
        name = "%s/%s" % (item.get("bucket"), item.get("name"))
    return where(_LISTS[kind], index, name)


def check(accounts=None, exports=None, streams=None, consumers=None, where="", kv_buckets=None, object_stores=None,
          object_fetch=None, files_dir="", default_account=None, operator=None, system_account=None):
    """Every item as the module that converges it checks it, alone and across its list, and what the fleet's stages
    need of it, before anything changes: see _checked. Returns the number of items checked; raises FleetError
    naming the list, the item and the field (after ``where``). ``files_dir``: where relative object ``src`` files
    are (the inventory's directory); ``default_account``: the account of items that name none
    (nats_fleet_default_account); ``operator``, ``system_account``: the store's (nats_fleet_operator,
    nats_fleet_system_account). What is not given is not checked: with no ``accounts``, the accounts the items
    name; with ``default_account`` None, the account of the items that name none, the default account itself, and
    the streams the consumers read and the stores the fetches read (whose accounts are not known then); with
    ``system_account`` None, the accounts the users and exports name."""
    return _checked(accounts, exports, dict(streams=streams, consumers=consumers, kv_buckets=kv_buckets,
                                            object_stores=object_stores, object_fetch=object_fetch),
                    where, files_dir, default_account, operator, system_account)[0]


def _checked(accounts, exports, lists, where, files_dir, default_account, operator, system_account, labels=None):
    """(items checked, [(place, stream as js_stream.desired_items gives it, its account in ``creds``)] of the
    domain's streams, buckets and stores that are present). ``labels``: {list: {index: the place of an item that
    the inventory does not list itself}} (a stream an aggregate makes). Raises FleetError."""
    try:
        names, admins, count = _check_accounts(accounts, exports, default_account, operator, system_account)
        if any(lists.values()):
            # with no account declared at all the accounts the items name are not known either
            jetstream, declared = _check_jetstream(lists, files_dir, default_account, names or None, admins, labels)
            count += jetstream
        else:
            declared = []
    except NatsEdgeError as exc:
        raise FleetError(where + str(exc)) from exc
    return count, declared


def _check_accounts(accounts, exports, default_account, operator, system_account):
    """nats_accounts with their users, and nats_exports, as nsc_store checks them (each item, no item twice, no
    reference to an account that is not declared), each account's admin_user, and the default account:
    (the accounts' names, {account: its admin user}, items checked)."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account as nsc_account
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import bulk
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import export as nsc_export
    kinds = nsc_kinds()
    specs = dict((kind, dict((name, option) for name, option in spec.items() if name not in bulk.TASK_LEVEL))
                 for kind, (_module, spec, _constraints) in kinds.items())
    specs["user"].pop("account")  # the account a user is listed under
    accounts = accounts or []
    users, count = [], 0
    for index, item in enumerate(accounts):
        place = _label("account", item, index)
        refuse_unknown(place, _mapping(place, item), specs["account"], _MODULES["account"], FLEET_KEYS["account"])
        listed = item.get("users") or []
        if not isinstance(listed, list):
            raise FleetError("%s.users: expected a list of users" % place)
        for number, user in enumerate(listed):
            at = "%s.users[%d]%s" % (place, number, " (%s)" % user.get("name") if isinstance(user, dict)
                                     and user.get("name") else "")
            refuse_unknown(at, _mapping(at, user), specs["user"], _MODULES["user"])
        count += 1 + len(listed)
    checked = _nsc_checked("account", _LISTS["account"], [module_args(item, "account") for item in accounts],
                           nsc_account.label, operator)
    names = [params["name"] for _place, params in checked]
    for (place, params), item in zip(checked, accounts):
        listed = item.get("users") or []
        users += _nsc_checked("user", place + ".users", [dict(user, account=params["name"]) for user in listed],
                              lambda user: user.get("name"), operator)
        roles = [scope.get("role") for scope in params.get("scoped_signing_keys") or []]
        for number, user in enumerate(listed):
            role = user.get("signing_role")
            if role and role not in roles:
                raise FleetError("%s.users[%d] (%s).signing_role: %r is not a role of the account's "
                                 "scoped_signing_keys (%s)" % (place, number, user.get("name"), role,
                                                               ", ".join(roles) if roles else "it has none"))
        admin = item.get("admin_user")
        if admin and admin not in [user.get("name") for user in listed]:
            raise FleetError("%s.admin_user: %r is not one of the account's users" % (place, admin))
    if default_account and names and default_account not in names:
        raise FleetError("nats_fleet_default_account: %r is not in nats_accounts (%s)" % (
            default_account, ", ".join(names)))
    shared = _nsc_checked("export", _LISTS["export"], [
        _mapping(_label("export", item, index), item) for index, item in enumerate(exports or [])],
        nsc_export.label, operator)
    count += len(shared)
    if system_account is not None:
        # what the store run would refuse once earlier items are written: a user or export of an account that is
        # not declared (the store holds the operator's system account besides)
        bulk.check_references((), [system_account], accounts=checked, users=users, exports=shared)
    return names, admin_users(accounts), count


def _check_jetstream(lists, files_dir, default_account, names, admins, labels=None):
    """The domain's streams, buckets, stores, consumers and fetches: each as jetstream_domain checks it (its
    item_checker), its account (declared, with a user), then every list as jetstream_domain checks them together
    (checked_lists: the same functions), then what the fleet adds: each consumer's stream and each fetch's store
    declared in the domain, in the consumer's account, and each consumer as nats-server would make it. ``names``:
    the declared accounts (None: none declared, the items' accounts not checked). (items checked, the present
    streams as _checked returns them)."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import domain
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
    lists = dict(lists, object_stores=object_sources(lists["object_stores"], files_dir))
    labels = labels or {}
    items, places, count = {}, {}, 0
    for kind, key, arg in DOMAIN_LISTS:
        items[key], places[key] = [], []
        check_item = checker(kind)
        for index, item in enumerate(lists[arg] or []):
            place = (labels.get(arg) or {}).get(index) or _label(kind, item, index)
            validated = check_item.check(place, item)
            account = item.get("account") or default_account
            if names is not None:
                if item.get("account") and item["account"] not in names:
                    raise FleetError("%s.account: %r is not in nats_accounts" % (place, item["account"]))
                if account is not None:  # None: the default account is not known here
                    _admin_of(account, admins, place, _CONVERGED[kind])
            items[key].append(dict(validated, creds=account or ""))
            places[key].append(place)
            count += 1
    try:
        checked = domain.checked_lists(items, domain.Warnings(), places=places)
    except ItemError as exc:
        # the items' accounts, which stand in for their creds, as the inventory names them
        message = str(exc)
        for account in set(item["creds"] for key in items for item in items[key]):
            message = message.replace(js_stream.account_label(account), _in_account(account))
        raise FleetError(message) from exc
    present = [(place, desired) for place, desired in zip(places["streams"] + places["kv_buckets"] + places[
        "object_stores"], checked.streams) if desired.state == "present"]
    declared = set((desired.creds, desired.name) for _place, desired in present)
    # which account's stream a consumer reads is known with the default account
    resolved = default_account is not None
    for place, item, config in zip(places["consumers"], items["consumers"], checked.consumers):
        if item["state"] != "present":
            continue
        if resolved and (item["creds"], item["stream"]) not in declared:
            raise FleetError("%s.stream: %r is not a stream this domain declares present%s (nats_streams, or the stream "
                             "of a bucket or a store: KV_<bucket>, OBJ_<store>)" % (
                                 place, item["stream"], _in_account(item["creds"])))
        domain.planned_consumer("%s: consumer %r on stream %r" % (place, item["name"], item["stream"]), item, config)
    for place, item in zip(places["fetches"], items["fetches"]):
        if not os.path.isabs(item["dest"]):
            raise FleetError("%s.dest: %r is not an absolute path (the file is written on each host that lists it)" % (
                place, item["dest"]))
        if resolved and (item["creds"], "OBJ_" + item["bucket"]) not in declared:
            stores = sorted(desired.name[len("OBJ_"):] for _place, desired in present
                            if desired.creds == item["creds"] and desired.name.startswith("OBJ_"))
            raise FleetError("%s.bucket: %r is not in this domain's nats_object_stores%s (%s)" % (
                place, item["bucket"], _in_account(item["creds"]), ", ".join(stores) or "none"))
    return count, present


# what an item's account converges or reads with its admin user's creds
_CONVERGED = {"stream": "converge its streams with", "kv": "converge its streams with",
              "objects": "converge its streams with", "consumer": "converge its consumers with", "fetch": "read with"}


def _in_account(account):
    return " in account %r" % account if account else ""


def _admin_of(account, admins, place, what):
    """The admin user of an item's ``account`` (its own, else the default account), whose creds the stage converges
    it with; FleetError when it has none."""
    if not account:
        raise FleetError("%s: no account (set nats_fleet_default_account or the item's account)" % place)
    if account not in admins:
        raise FleetError("%s.account: account %r has no user to %s" % (place, account, what))
    return admins[account]


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


def check_hosts(hostvars, hosts, budgets=False, fleet=None):
    """Each host's streams, consumers, buckets, stores and fetches checked as check() checks them, every distinct
    set of them once (sites share their groups' data): {host: items checked}; then the copies of every domain
    together (its first host's, whose data the streams stage converges), for a cycle across domains, and the outage
    budget of every site that declares one (_budget.budgets). Raises one error with the first problem of each
    distinct set, named with the domains that hold it, the first cycle, and every origin whose budget is short.
    With ``budgets``: {hosts: {host: items checked}, budgets: [the budget of each origin]}. ``fleet``: every server
    of the inventory (``hosts`` when not given), whose domains the aggregates' regions match, so that a run limited
    to some hosts plans what the whole fleet's does."""
    out, problems, rows = _checked_sites(hostvars, hosts, list(dict.fromkeys(list(fleet or []) + list(hosts))))
    if problems:
        raise FleetError("\n".join(problems))
    return {"hosts": out, "budgets": rows} if budgets else out


def _checked_sites(hostvars, hosts, fleet):
    """({host: items checked}, [problem], [budget row]) of check_hosts."""
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _budget
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _aggregates
    done, domains, out, declared, leaders = {}, {}, {}, {}, {}
    every_domain = list(dict.fromkeys(hostvars[host].get("nats_server_jetstream_domain") or "" for host in fleet))
    copying = aggregating(hostvars, fleet)
    for host in hosts:
        hv = hostvars[host]
        domain = hv.get("nats_server_jetstream_domain") or ""
        data = dict((key, plain(hv.get(name)) or []) for key, name in HOST_DATA)
        data.update(files_dir=hv.get("inventory_dir") or "", default_account=hv.get("nats_fleet_default_account") or "",
                    system_account=hv.get("nats_fleet_system_account") or None, labels={}, refused="")
        own = len(data["consumers"])
        data["consumers"] += _aggregates.consumers(copying, domain, every_domain)
        data["labels"]["consumers"] = dict((index, "%s (durable: the consumer %s)" % (_aggregates.SETTING, item["name"]))
                                           for index, item in enumerate(data["consumers"][own:], own))
        try:
            data["streams"], data["labels"]["streams"] = host_streams(hv, every_domain)
        except _aggregates.AggregateError as exc:
            data["refused"] = str(exc)
        key = json.dumps(data, sort_keys=True, default=repr)
        domains.setdefault(key, []).append(domain)
        leaders.setdefault(domain, (key, host))
        if key not in done and data["refused"]:
            done[key] = FleetError(data["refused"])
        elif key not in done:
            try:
                done[key], declared[key] = _checked(
                    data["accounts"], None, dict((name, data[name]) for name, _var in HOST_DATA if name != "accounts"),
                    "", data["files_dir"], data["default_account"], None, data["system_account"], data["labels"])
            except FleetError as exc:
                done[key] = exc
        out[host] = done[key]
    problems = ["%s: %s" % (_some(domains[key]), value) for key, value in done.items() if isinstance(value, FleetError)]
    by_domain = dict((domain, declared[key]) for domain, (key, _host) in leaders.items() if key in declared)
    try:
        _check_cycles(by_domain)
    except ItemError as exc:
        problems.append(str(exc))
    sites, accounts = {}, {}
    for domain, (_key, host) in leaders.items():
        try:
            sites[domain] = _budget.settings(plain(hostvars[host].get(_budget.SETTING)), domain or "(no domain)")
        except _budget.BudgetError as exc:
            problems.append(str(exc))
        accounts[domain] = dict((account.get("name"), account.get("jetstream"))
                                for account in plain(hostvars[host].get("nats_accounts")) or []
                                if isinstance(account, dict) and isinstance(account.get("jetstream"), dict))
    rows, short = _budget.budgets(by_domain, sites, accounts)
    return out, problems + short, rows


def host_streams(hv, domains):
    """(streams, labels) of one host of the fleet (its variables ``hv``; ``domains``: every JetStream domain of the
    fleet): its nats_streams, then the streams its nats_fleet_aggregates make (_aggregates), and {index: the
    aggregate's label} of those. Raises _aggregates.AggregateError."""
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _aggregates
    declared = plain(hv.get("nats_streams")) or []
    aggregates = plain(hv.get(_aggregates.SETTING)) or []
    if not isinstance(aggregates, list):
        raise _aggregates.AggregateError("%s: expected a list of aggregates, got %r" % (_aggregates.SETTING, aggregates))
    labels, made = {}, []
    for index, aggregate in enumerate(aggregates):
        for item in _aggregates.streams([aggregate], domains, hv.get("nats_server_jetstream_domain") or "", index):
            labels[len(declared) + len(made)] = "%s[%d] (%s)" % (_aggregates.SETTING, index, aggregate["name"])
            made.append(item)
    return declared + made, labels


def aggregating(hostvars, hosts):
    """{domain: (its nats_fleet_aggregates, its default account)} of the domains of ``hosts``, each read from the
    domain's first host (whose data the streams stage converges)."""
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _aggregates
    out = {}
    for host in hosts:
        hv = hostvars[host]
        domain = hv.get("nats_server_jetstream_domain") or ""
        if domain not in out:
            out[domain] = (plain(hv.get(_aggregates.SETTING)) or [], hv.get("nats_fleet_default_account") or "")
    return out


def host_consumers(hv, copying, domains):
    """One host's consumers (its variables ``hv``): its nats_consumers, then the durable sourcing consumers that the
    aggregates of other domains (``copying``, as aggregating() returns them) read its origins through."""
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _aggregates
    return (plain(hv.get("nats_consumers")) or []) + _aggregates.consumers(
        copying, hv.get("nats_server_jetstream_domain") or "", domains)


def _check_cycles(declared):
    """No cycle of copies across the domains: ``declared``, {domain: the present streams as _checked returns them}.
    A copy's origin in another domain is found by the domain its mirror or source names, in the copy's account."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import domain as jd
    jd.refuse_copy_cycle(
        [((domain, desired.creds, desired.name), "%s: %s" % (domain, place), desired.config)
         for domain, streams in declared.items() for place, desired in streams],
        lambda key, origin_domain, name: (key[0] if origin_domain is None else origin_domain, key[1], name),
        lambda key: "stream %r in domain %r" % (key[2], key[0]))


def _some(names, shown=5):
    """Distinct names in order, the first ``shown`` of them and how many more."""
    names = list(dict.fromkeys(names))
    return ", ".join(names[:shown]) + (" and %d more" % (len(names) - shown) if len(names) > shown else "")


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
        admin = _admin_of(account, admins, where + _label(kind, stream, i), _CONVERGED[kind])
        batch = batches.setdefault(account, {"account": account, "creds": creds_path(creds_dir, account, admin),
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
    for index, item in enumerate(items or []):
        account = item.get("account") or default_account
        creds = creds_path(creds_dir, account, _admin_of(account, admins, _label("consumer", item, index),
                                                         _CONVERGED["consumer"]))
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


def _file_name(name):
    """An object's name as the name of a file of the cache: quoted, so that no name is a path ('a/b') nor names a
    directory ('.', '..')."""
    quoted = quote(name, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def object_fetches(hostvars, hosts, default_account, creds_dir, admins, cache_dir, domain=""):
    """The ``nats_object_fetch`` of one domain's hosts: each object fetched once, from the domain's
    own copy, into the controller's cache; then copied to every host that lists it.

    Returns {"fetches": [{account, creds, bucket, name, cache, args}], "copies": {host: [{src, dest, path (= dest),
    kind (file), mode, owner, group}]}}; ``args``, an item of jetstream_domain's ``fetches`` that writes the
    cache file (0600)."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer
    fetches, copies = {}, {}
    for host in hosts:
        # hostvars come raw (rendering every host's variables costs more than the plan): only these items are read
        for item in plain(hostvars[host].get("nats_object_fetch") or []):
            account = item.get("account") or default_account
            admin = _admin_of(account, admins, "%s: nats_object_fetch (%s/%s)" % (host, item.get("bucket"), item.get("name")),
                              _CONVERGED["fetch"])
            cache = "/".join([str(cache_dir).rstrip("/"), quote(domain or "-", safe=""), account, item["bucket"],
                              _file_name(item["name"])])
            creds = creds_path(creds_dir, account, admin)
            fetches.setdefault(cache, {"account": account, "creds": creds, "bucket": item["bucket"], "name": item["name"],
                                       "cache": cache, "args": {"bucket": item["bucket"], "name": item["name"],
                                                                "dest": cache, "mode": "0600", "creds": creds}})
            # the mode as the preflight checked it (0644 when none is given), as the octal string a host's mode is
            # compared as: "644", and YAML's number for an unquoted 0640, are "0644" and "0640" there
            mode = "%04o" % object_transfer.file_mode(item.get("mode"))
            # path and kind: the copy as nats_server_stale_paths compares it with a host's file
            copies.setdefault(host, []).append({"src": cache, "dest": item["dest"], "path": item["dest"], "kind": "file",
                                                "mode": mode, "owner": item.get("owner"), "group": item.get("group")})
    return {"fetches": list(fetches.values()), "copies": copies}
