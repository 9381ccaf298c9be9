# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converging declared streams on a server: fetch every one, plan them all, then
act, in an order that keeps origins ahead of their copies. Private to the
collection; jetstream_stream and the modules whose resources are streams
(key-value buckets, object stores) run on it.
"""

from __future__ import annotations

import contextlib
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import placement as js_placement
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JetStream, JetStreamError, NatsClient, NatsClientError, connection_params)
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import api_domain

_ORDER = ("delete", "update", "promote", "recreate", "create")
_ENVELOPE = ("type", "total", "offset", "limit", "did_create")
_AUTH = ("creds", "nkey_seed", "user", "password", "token")
# when the servers that answered cannot hold a placement: seconds to wait for a further reply, and how
# many times to ask again (the servers heard in any round count, each once)
LATE_REPLIES = 2.0
LATE_ROUNDS = 3
# seconds a run waits for a stream's leader to be on its placement.preferred server
LEADER_WAIT = 15.0


class StreamManager(object):
    """Fetch every declared stream, plan them all, then act on the plans."""

    def __init__(self, module, declared, creds=None):
        self.module = module
        self.declared = declared
        self.creds = creds  # the items' own creds (another account than the task's), or None
        self.check_mode = module.check_mode
        self.js = None
        self.results = {}
        self.plans = []

    def where(self):
        return self.js.where() + js_stream.account_label(self.creds)

    def run(self, client):
        self.plan(client)
        self.apply_all()

    def plan(self, client, checks=True):
        """Read every declared stream, plan each, and (``checks``) check what can be checked before anything
        is sent."""
        self.js = JetStream(client, domain=self.module.params.get("domain"),
                            api_prefix=self.module.params.get("api_prefix"))
        infos = {}
        for desired in self.declared:
            try:
                infos[desired.name] = self.info(desired.name)
            except JetStreamError as exc:
                raise StreamFailure("stream %r %s: %s" % (desired.name, self.where(), exc)) from exc
        create_version = None
        if any(infos[d.name] is None and d.state == "present" and (js_stream.needs_version(d.config) or d.preferred)
               for d in self.declared):
            create_version = js_stream.version_from_account(self.js.call("INFO"))
        plans = []
        for desired in self.declared:
            info = infos[desired.name]
            version = js_stream.version_from_stream(info) if info else create_version
            plan = js_stream.plan(desired, info, version, self.where())
            js_stream.check_leader_move(desired, plan, info, self.where())
            plans.append((desired, plan, info))
        for desired, plan, info in plans:
            self.results[desired.name] = self.entry(plan, info)
        if checks:
            self.check_placements(client, plans)
            self.warn_missing_origins(client, plans)
        self.plans = plans

    def apply_all(self):
        for action in _ORDER:
            for desired, plan, _info in self.plans:
                if plan.action == action:
                    self.apply(desired, plan)
        for desired, plan, info in self.plans:
            if desired.preferred and plan.action != "delete":
                self.move_leader(desired, plan, info)

    def move_leader(self, desired, plan, info):
        """Bring the stream's leader to ``desired.preferred`` with a leader step-down that names it (the server
        takes no preferred server in a stream's config), then wait until the stream reports it as its leader. In
        check mode: the step-down a live stream needs, not sent; a new stream's leader the server picks."""
        name, where = desired.name, self.where()
        if self.check_mode:
            if js_stream.keeps_servers(plan):
                moved_from = js_stream.leader_move(desired, info, where)
                if moved_from is not None:
                    self.js.change("STREAM.LEADER.STEPDOWN.%s" % name, _stepdown(desired.preferred), True)
                    self.results[name].update(changed=True, leader=dict(before=moved_from, after=desired.preferred))
            return
        deadline = time.monotonic() + LEADER_WAIT
        current = self.leader_info(name, deadline)
        moved_from = js_stream.leader_move(desired, current, where)
        if moved_from is None:
            return
        self.results[name].update(changed=True, leader=dict(before=moved_from, after=desired.preferred))
        ask_at, last_error = 0.0, None
        while True:
            leader = js_stream.stream_servers(current)[0]
            if leader == desired.preferred:
                self.results[name]["stream"] = _stream(current)
                return
            if time.monotonic() > deadline:
                raise StreamFailure("stream %r %s: placement.preferred: the leader is still %s %.0f s after asking it "
                                    "to step down for %r%s" % (name, where, leader or "not elected", LEADER_WAIT,
                                                               desired.preferred,
                                                               " (%s)" % last_error if last_error else ""))
            if time.monotonic() >= ask_at:
                # asked again while it has not moved: a new group's replica may still be catching up
                ask_at = time.monotonic() + 2.0
                try:
                    self.js.change("STREAM.LEADER.STEPDOWN.%s" % name, _stepdown(desired.preferred), False)
                except JetStreamError as exc:
                    last_error = exc
            time.sleep(0.25)
            current = self.leader_info(name, deadline)

    def leader_info(self, name, deadline):
        """The stream's STREAM.INFO once it reports a leader (a new or changed group elects one first)."""
        while True:
            try:
                info = self.info(name)
            except NatsClientError as exc:
                if isinstance(exc, JetStreamError) or time.monotonic() > deadline:
                    raise
                continue  # only the leader answers: none while the group elects one
            if not (info or {}).get("cluster") or js_stream.stream_servers(info)[0] or time.monotonic() > deadline:
                return info
            time.sleep(0.1)

    def check_placements(self, client, plans):
        """Refuse, before the first request that changes anything, a placement the
        servers cannot satisfy: the server would refuse that stream only when its turn
        comes, after the streams before it were applied."""
        todo = [(desired, plan) for desired, plan, _info in plans
                if (plan.action in ("create", "recreate") or set(f.split(".")[0] for f in plan.fields) & set(
                    ("placement", "num_replicas"))) and plan.action != "delete" and js_placement.needs_check(
                    plan.after)]
        if not todo:
            return
        heard = []
        servers, unique_tag, source = self.placement_servers(client, heard=heard)
        if servers is None:
            self.module.warn("placement of stream%s %s not checked before sending: %s" % (
                "s" if len(todo) > 1 else "", ", ".join(repr(d.name) for d, _p in todo), source))
            return
        problem = self._placement_problem(todo, servers, unique_tag, source)
        rounds = LATE_ROUNDS if self.module.params.get("placement_servers") is None else 0
        while problem and rounds:
            # a loaded server may answer after the others fell silent, or miss one request: ask again, listen
            # longer, and count every server heard so far before refusing
            rounds -= 1
            servers, unique_tag, source = self.placement_servers(client, idle=LATE_REPLIES, heard=heard)
            if servers is not None:
                problem = self._placement_problem(todo, servers, unique_tag, source)
        if problem:
            raise js_stream.StreamError(problem)

    def _placement_problem(self, todo, servers, unique_tag, source):
        for desired, plan in todo:
            problem = js_placement.check(desired.name, self.where(), plan.after, servers, unique_tag, source)
            if problem:
                return problem
        return None

    def placement_servers(self, client, idle=0.5, heard=None):
        """(servers, unique tag prefix, where they come from); servers None when nothing says.
        ``heard``, a list, keeps the servers' replies across calls: each call adds its own."""
        params = self.module.params
        if params.get("placement_servers") is not None:
            try:
                servers = js_placement.from_inventory(params["placement_servers"])
            except js_placement.PlacementError as exc:
                raise js_stream.StreamError(str(exc)) from exc
            return servers, params.get("unique_tag") or "", "servers as placement_servers lists them"
        domain = params.get("domain")
        if not domain and params.get("api_prefix"):
            domain = api_domain(params["api_prefix"].rstrip("."))  # None for an imported API: every server counts
        elif not domain:
            domain = client.connected_domain()
        system = bool(params.get("system_creds"))
        subject = "$SYS.REQ.SERVER.PING.VARZ" if system else "$SYS.REQ.ACCOUNT.PING.STATZ"
        try:
            if system:
                sys_params = dict((k, v) for k, v in params.items() if k not in _AUTH)
                sys_params["creds"] = params["system_creds"]
                with NatsClient(sys_params) as sys_client:
                    replies = sys_client.server_infos(domain, system=True, idle=idle)
            else:
                replies = client.server_infos(domain, idle=idle)
        except NatsClientError as exc:
            if system:
                raise js_stream.StreamError("system_creds: %s" % exc) from exc
            return None, None, "%s: %s" % (subject, exc)
        if heard is not None:
            heard.extend(replies)
            replies = heard
        servers, uniques = js_placement.from_replies(replies)
        if not servers:
            return None, None, "no server%s answered %s" % (" of domain %r" % domain if domain else "", subject)
        source = "the servers' tags from their %s replies" % subject.rsplit(".", 1)[-1]
        unique_tag = params.get("unique_tag")
        if unique_tag is None:
            known = set(u for u in uniques if u is not None)
            unique_tag = known.pop() if len(known) == 1 else ""
            if unique_tag:
                source = "the servers' tags and unique_tag from their VARZ replies"
            elif None in uniques:
                source += "; zones not checked: servers before 2.10 do not report unique_tag, set unique_tag"
        return servers, unique_tag, source

    def warn_missing_origins(self, client, plans):
        """A mirror or source whose origin does not exist is created all the
        same and only shows an error later: say so now."""
        declared_here = set(d.name for d in self.declared if d.state == "present")
        checked = {}
        for desired, plan, _info in plans:
            for field, origin, api in js_stream.origins_to_check(desired, plan):
                if api is None and origin in declared_here:
                    continue  # created by this run, before the streams that copy it
                if (origin, api) not in checked:
                    checked[(origin, api)] = self.origin_state(client, origin, api)
                state = checked[(origin, api)]
                if state:
                    self.module.warn("stream %r %s: %s: its origin stream %r %s; the server creates the %s anyway "
                                     "and retries until the origin appears" % (
                                         desired.name, self.where(), field, origin, state,
                                         "mirror" if field == "mirror" else "source"))

    def origin_state(self, client, origin, api):
        """None when the origin exists, else what is wrong with it."""
        js = JetStream(client, api_prefix=api) if api else self.js
        where = js.where() if api else "in the same domain"
        try:
            if js.lookup("STREAM.INFO.%s" % origin) is None:
                return "does not exist %s" % where
        except JetStreamError as exc:
            return "could not be read %s (%s)" % (where, exc.description)
        except NatsClientError as exc:
            return "could not be looked up %s (%s)" % (where, exc)
        return None

    def info(self, name):
        return self.js.lookup("STREAM.INFO.%s" % name)

    def entry(self, plan, info):
        entry = dict(name=plan.name, action=plan.action, changed=False, stream=_stream(info))
        if self.creds:
            entry["creds"] = self.creds
        if self.module._diff:
            entry["diff"] = js_stream.diff(plan)
        return entry

    def apply(self, desired, plan):
        name = plan.name
        where = self.where()
        requests = dict(delete=["DELETE"], create=["CREATE"], recreate=["DELETE", "CREATE"],
                        update=["UPDATE"], promote=["UPDATE"])[plan.action]
        reply = None
        for request in requests:
            try:
                reply = self.js.change("STREAM.%s.%s" % (request, name), None if request == "DELETE" else plan.body,
                                       self.check_mode)
            except JetStreamError as exc:
                if plan.action == "recreate" and request == "CREATE":
                    self.results[name].update(changed=True, stream={})
                    raise StreamFailure("stream %r %s: deleted to be recreated, but the server refused to create "
                                        "it: %s" % (name, where, exc)) from exc
                raise StreamFailure("stream %r %s: the server refused to %s it: %s"
                                    % (name, where, plan.action, exc)) from exc
        self.results[name]["changed"] = True
        if self.check_mode:
            return
        # a create or update reply is the stream as the server now has it
        info = None if plan.action == "delete" else (reply if (reply or {}).get("config") else self.info(name))
        self.results[name]["stream"] = _stream(info)
        if info is None:
            if plan.action != "delete":
                raise StreamFailure("stream %r %s: not found after %s" % (name, where, plan.action))
            return
        missed = js_stream.not_applied(desired.config, info)
        if missed:
            have = js_stream.from_api(info["config"])
            raise StreamFailure("stream %r %s: the server did not apply %s" % (name, where, ", ".join(
                "%s (asked %r, has %r)" % (f, _get(desired.config, f), _get(have, f)) for f in missed)))

    def result(self, bulk):
        return _summary(self.module, [self.results[d.name] for d in self.declared if d.name in self.results],
                        self.js.actions if self.js else [], bulk)


class AccountStreams(object):
    """The streams of one module run, per account: items with their own creds (``streams[].creds``) go
    through a connection of their own, one per creds file, the others through the task's connection.
    Every account's streams are read, planned and checked before the first change to any of them."""

    def __init__(self, module, declared):
        self.module = module
        self.declared = declared
        groups = {}
        for desired in declared:
            groups.setdefault(desired.creds, []).append(desired)
        self.managers = dict((creds, StreamManager(module, items, creds)) for creds, items in groups.items())

    def run(self, connect=None):
        """``connect(creds)``, when given, hands out the caller's connection of each account (the caller
        keeps them open for its own work after the streams'); else each is opened and closed here."""
        with contextlib.ExitStack() as connections:
            self.plan(connect or (lambda creds: connections.enter_context(
                NatsClient(connection_params(self.module.params, creds)))))
            for manager in self.managers.values():
                manager.apply_all()

    def plan(self, connect, checks=True):
        """Every account's streams read and planned (and, with ``checks``, checked), nothing sent."""
        for creds, manager in self.managers.items():
            try:
                client = connect(creds)
            except NatsClientError as exc:
                if not creds:
                    raise
                raise NatsClientError("stream%s %s%s: %s" % (
                    "s" if len(manager.declared) > 1 else "", ", ".join(repr(d.name) for d in manager.declared),
                    js_stream.account_label(creds), exc)) from exc
            manager.plan(client, checks)

    def changing(self):
        """The names of the planned streams that are not as declared."""
        return [desired.name for desired in self.declared
                if self.managers[desired.creds].results[desired.name]["action"] != "none"]

    def result(self, bulk):
        return _summary(self.module, [self.managers[d.creds].results[d.name] for d in self.declared
                                      if d.name in self.managers[d.creds].results],
                        [action for manager in self.managers.values() if manager.js for action in manager.js.actions],
                        bulk)


def _summary(module, entries, actions, bulk):
    """The module's result: ``streams`` (the entries) for the bulk form, the one entry's fields for the single."""
    result = dict(changed=any(e["changed"] for e in entries), actions=actions)
    if bulk:
        result["streams"] = entries
        if module._diff:
            result["diff"] = [e["diff"] for e in entries if e["changed"]]
    elif entries:
        entry = entries[0]
        result.update(name=entry["name"], action=entry["action"], stream=entry["stream"])
        if entry.get("leader"):
            result["leader"] = entry["leader"]
        if module._diff:
            result["diff"] = entry["diff"]
    return result


class StreamFailure(NatsEdgeError):
    """A failure after the plan: the result still reports what was sent."""


def _stepdown(preferred):
    return {"placement": {"preferred": preferred}}


def _stream(info):
    if not info:
        return {}
    return dict((k, v) for k, v in info.items() if k not in _ENVELOPE)


def _get(data, path):
    for key in path.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data
