# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""jetstream_domain's run: its lists' items checked, then a domain's streams, buckets, stores, consumers and
fetches converged through one connection per account. Private to the collection.

A run is whole or nothing: every item is checked alone and against the others (checked_items, checked_lists:
the fleet's preflight runs the same functions on the inventory), every stream and consumer is read and planned,
and only then is the first request sent that changes something. Where the server still refuses after that,
what the run made is deleted again (Domain.undo) and the error says so."""

from __future__ import annotations

import copy
import functools
import os
import time
from collections import namedtuple

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import (
    ItemChecker, ItemError, check_list, is_copy, refuse_twins, where)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer as objects
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_model import (
    ConsumerInputError, ImmutableChange, domain_version, plan, request_body)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_apply import (
    ARGUMENT_SPEC as CONSUMER_OPTIONS, ConsumerManager, checked_consumer, consumer_label)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_tables import STATUS_OK
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_reader import INACTIVE_AFTER, InfoFailure, Report
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import api_domain, duration_ns, subjects_collide
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.bucket_content import (
    OBJECT_STORE_OPTIONS, Entries, check_chunk_sizes, checked_objects, converge_objects)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_apply import AccountStreams
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JS_CONSUMER_NOT_FOUND, JetStream, JetStreamError, NatsClient, NatsClientError, connection_params)

_CREDS = dict(creds=dict(type="path"))
# each list's items as their own module takes them
ITEM_SPECS = dict(
    streams=(js_stream.module_argspec()["streams"]["options"], []),
    kv_buckets=(dict(_CREDS, name=dict(type="str", required=True), state=dict(
        type="str", choices=["present", "absent"], default="present"), **copy.deepcopy(kv.KV_OPTIONS)), []),
    object_stores=(dict(_CREDS, **copy.deepcopy(OBJECT_STORE_OPTIONS)), []),
    consumers=(dict(_CREDS, **copy.deepcopy(CONSUMER_OPTIONS)), [["filter_subject", "filter_subjects"]]),
    fetches=(dict(_CREDS, bucket=dict(type="str", required=True), name=dict(type="str", required=True),
                  dest=dict(type="path", required=True), mode=dict(type="raw", default="0644")), []),
)
# newer than every release the consumer model knows: a consumer planned for it is refused only for what no
# release of nats-server takes
ANY_RELEASE = (999, 0)


class DomainError(NatsEdgeError):
    """Input or a failure worded for the user."""


def item_checker(key, accepted=(), takes="an item", without=(), dest_here=True):
    """The ItemChecker of the items of one of jetstream_domain's lists (``key`` of ITEM_SPECS), with its kind's own
    check as its ``then`` (a fetch's: objects.checked_fetch_item). The module checks its items with it, and the
    fleet's preflight the inventory's: ``accepted``, keys an item may carry beyond the spec; ``takes``, who takes
    the options; ``without``, options an item may not carry (the inventory names an account, not creds);
    ``dest_here``, whether a fetch's dest is a file on this host (not for the inventory: its dest is on a host)."""
    spec, exclusive = ITEM_SPECS[key]
    then = functools.partial(objects.checked_fetch_item, on_this_host=dest_here) if key == "fetches" else None
    return ItemChecker(dict((name, option) for name, option in spec.items() if name not in without),
                       accepted=accepted, takes=takes, then=then, mutually_exclusive=exclusive)


def item_checkers():
    """One ItemChecker per list, with its kind's options and its own check."""
    return dict((key, item_checker(key)) for key in ITEM_SPECS)


def checked_items(params):
    """Every list's items checked against their kind's options, with defaults; the first problem raises an ItemError
    naming the list, the item and the option."""
    out = {}
    for key, checker in item_checkers().items():
        out[key] = []
        for index, item in enumerate(params[key]):
            validated = checker.check(where(key, index, _item_label(key, item) if isinstance(item, dict) else None), item)
            # the task's own creds: the task's connection and account
            if validated.get("creds") and validated["creds"] == params.get("creds"):
                validated["creds"] = None
            out[key].append(validated)
    return out


def _item_label(key, item):
    return "%s/%s" % (item.get("bucket"), item.get("name")) if key == "fetches" else item.get("name")


def places_of(items):
    """Where each item of each list is, as checked_items names it: ``consumers[1] (workers)``."""
    return dict((key, [where(key, index, _item_label(key, item)) for index, item in enumerate(items.get(key) or [])])
                for key in ITEM_SPECS)


class Warnings(list):
    """The warnings of checks run where no module run shows them (the fleet's preflight), kept in order."""

    def warn(self, text):
        self.append(text)


Declared = namedtuple("Declared", "buckets objects consumers streams")


def checked_lists(items, module, places=None, creds=None, domain=None):
    """What jetstream_domain checks of its lists as wholes (the items as checked_items returns them), before it
    connects: each bucket's entries and stream options, each store's objects (their files read), each consumer's
    config; every stream, bucket's and store's stream planned together (a name once in each account, subjects of
    one account that do not overlap); no consumer and no fetch's dest listed twice; no cycle of copies among the
    run's own streams (``domain``: the run's, for sources that name it). ``module``: where the consumers'
    warnings go (its ``warn``); ``places``: how errors name the items (places_of, by default); ``creds``: the
    task's. Returns Declared (the buckets as kv.declared_buckets gives them, each store's wanted objects, each
    consumer's config, the streams as js_stream.desired_items gives them); the first problem raises ItemError
    naming the item."""
    places = places or places_of(items)
    buckets = check_list(places["kv_buckets"], items["kv_buckets"],
                         lambda part: kv.declared_buckets({"buckets": part, "state": "present", "domain": domain}))
    bucket_streams = check_list(places["kv_buckets"], buckets, kv.bucket_stream_items)
    for stream, item in zip(bucket_streams, items["kv_buckets"]):
        stream["creds"] = item["creds"]
    wanted = [_at(place, checked_objects, store) for place, store in zip(places["object_stores"], items["object_stores"])]
    store_streams = check_list(places["object_stores"], items["object_stores"], lambda part: [
        dict(kv.store_stream_item(store), creds=store["creds"]) for store in part])
    configs = []
    for place, item in zip(places["consumers"], items["consumers"]):
        try:
            configs.append(checked_consumer(module, item))
        except ConsumerInputError as exc:
            raise ItemError("%s: %s: %s" % (place, consumer_label(item), exc)) from exc
    refuse_twins(places["consumers"], items["consumers"], lambda item: [(item["creds"], item["stream"], item["name"])],
                 lambda same: "consumer %r on stream %r%s" % (same[2], same[1], js_stream.account_label(same[0])))
    refuse_twins(places["fetches"], items["fetches"], lambda item: [os.path.normpath(item["dest"])],
                 lambda dest: "dest %s (the file an object is written to)" % dest)
    stream_places = places["streams"] + places["kv_buckets"] + places["object_stores"]
    declared = check_list(stream_places, items["streams"] + bucket_streams + store_streams, lambda part: (
        js_stream.desired_items(dict(streams=part, state="present", on_immutable_change="fail", allow_data_loss=False,
                                     creds=creds))))
    refuse_stream_cycles(declared, stream_places, domain)
    return Declared(buckets, wanted, configs, declared)


def refuse_stream_cycles(declared, places, domain=None):
    """Refuse a cycle of copies among the streams a run declares (``declared``: js_stream.desired_items' streams,
    ``places``: how errors name them, ``domain``: the run's) before anything is sent: jetstream_domain's and
    jetstream_stream's runs."""
    refuse_copy_cycle([((desired.creds, desired.name), place, desired.config)
                       for place, desired in zip(places, declared) if desired.state == "present"],
                      lambda key, origin_domain, name: (key[0], name) if origin_domain in (None, domain) else None,
                      lambda key: "stream %r%s" % (key[1], js_stream.account_label(key[0])))


def _at(place, check, item):
    try:
        return check(item)
    except NatsEdgeError as exc:
        raise ItemError("%s: %s" % (place, exc)) from exc


def copy_origins(config):
    """(field, origin's domain, origin's name) of each mirror and source of a stream's API ``config`` that makes it
    a link of a cycle of copies as nats-server judges one: a mirror, or a source that takes messages on the
    stream's own subjects (no filter_subject, or one that overlaps them). The domain is None for the stream's own
    domain; an origin behind another account's import, or behind an API prefix that names no domain, is left out:
    which stream it is cannot be told from the declaration."""
    entries = ([("mirror", config["mirror"])] if config.get("mirror") else []) + [
        ("sources[%d]" % index, source) for index, source in enumerate(config.get("sources") or [])]
    for field, source in entries:
        wanted = source.get("filter_subject")
        if field != "mirror" and wanted and not any(subjects_collide(subject, wanted)
                                                    for subject in config.get("subjects") or []):
            continue
        external = source.get("external") or {}
        if external.get("deliver"):
            continue
        origin_domain = None
        if external.get("api"):
            origin_domain = api_domain(external["api"])
            if not origin_domain:
                continue
        yield field, origin_domain, source["name"]


def copy_cycle(streams, origin_key):
    """The first cycle of copies among ``streams`` ([(key, config)] in the order declared; ``origin_key(key, domain,
    name)``: the key of an origin of stream ``key`` among them, else anything else) as [(key, field)] round it, each
    stream with the field by which it copies from the next, starting at the stream declared last in it (it closes
    the cycle); None when there is none."""
    order = dict((key, index) for index, (key, _config) in enumerate(streams))
    edges = dict((key, [(field, target) for field, origin_domain, name in copy_origins(config)
                        for target in [origin_key(key, origin_domain, name)] if target in order])
                 for key, config in streams)
    state = {}
    for start, _config in streams:
        if start in state:
            continue
        state[start] = "open"
        stack = [[start, None, iter(edges[start])]]
        while stack:
            frame = stack[-1]
            step = next(frame[2], None)
            if step is None:
                state[frame[0]] = "done"
                stack.pop()
                continue
            frame[1], target = step
            if state.get(target) == "open":
                keys = [key for key, _field, _todo in stack]
                ring = [(key, field) for key, field, _todo in stack[keys.index(target):]]
                last = max(range(len(ring)), key=lambda index: order[ring[index][0]])
                return ring[last:] + ring[:last]
            if target not in state:
                state[target] = "open"
                stack.append([target, None, iter(edges[target])])
    return None


def refuse_copy_cycle(streams, origin_key, named):
    """Refuse, as ItemError naming the stream that closes it (its place) and every stream round it (``named(key)``),
    a cycle of copies among ``streams`` ([(key, place, config)] in the order declared; ``origin_key`` as copy_cycle
    takes it): nats-server refuses the stream that closes such a cycle in one domain, and across domains a mirror in
    it never holds a message while a source sends every message round it again."""
    ring = copy_cycle([(key, config) for key, _place, config in streams], origin_key)
    if ring:
        places = dict((key, place) for key, place, _config in streams)
        closing, field = ring[0]
        chain = ", which copies from ".join(named(key) for key, _field in ring[1:] + ring[:1])
        raise ItemError("%s: %s: copies in a cycle: %s copies from %s; make one of them copy from outside the cycle "
                        "(nats-server refuses a cycle of copies)" % (places[closing], field, named(closing), chain))


def planned_consumer(label, item, desired, current=None, version=ANY_RELEASE):
    """The plan of consumer ``item`` (its ``desired`` config, as checked_consumer gives it) against its ``current``
    config on the server (None: it is made), as the server of ``version`` would take it (by default any release:
    only what none takes is refused); DomainError naming it (``label``) for what the server would refuse, known
    before anything is sent."""
    try:
        return plan(item["name"], item["state"], desired, current, version, item["on_immutable_change"])
    except ImmutableChange as exc:
        raise DomainError("%s: nats-server cannot change this on an existing consumer: %s; nothing was changed "
                          "(on_immutable_change: recreate deletes and recreates it, and its delivery state starts "
                          "over)" % (label, exc), changed_fields=exc.changed, immutable_fields=exc.fields) from exc
    except ConsumerInputError as exc:
        raise DomainError("%s: %s" % (label, exc), field=exc.field) from exc


class Domain(object):
    """One run: the streams of every kind through AccountStreams, then contents, then consumers."""

    def __init__(self, module, items, quiet=False):
        self.module = module
        self.items = items
        self.params = module.params
        self.deferred = []
        checked = checked_lists(items, module, creds=self.params.get("creds"), domain=self.params.get("domain"))
        self.buckets = checked.buckets
        self.wanted_objects = checked.objects
        self.consumer_configs = checked.consumers
        self.declared = checked.streams
        for desired in [] if quiet else self.declared:
            for warning in desired.warnings:
                module.warn(warning)
        self.accounts = AccountStreams(module, self.declared)
        self.results = dict(buckets=[], stores=[], consumer_results=[], fetched=[])
        self.consumer_actions = []
        self.replication = None
        self.undone = []

    def changing_copies(self, connect):
        """The copies of this run not found as declared, read and planned only: no placement is checked and no
        origin looked up, as their origins may not exist yet."""
        reader = AccountStreams(self.module, [desired for desired in self.declared if is_copy(desired.config)])
        reader.plan(connect, checks=False)
        return reader.changing()

    def deferring(self, connect):
        """This run, or, when a copy is not as declared, a run of the items that copy from nowhere alone,
        which reports the copies as deferred (defer_copies)."""
        changing = self.changing_copies(connect)
        if not changing:
            return self
        copy_flags = [is_copy(desired.config) for desired in self.declared]
        origins, start = dict(self.items, consumers=[], fetches=[]), 0
        for key in ("streams", "kv_buckets", "object_stores"):  # the order of self.declared
            flags = copy_flags[start:start + len(self.items[key])]
            origins[key] = [item for item, copies in zip(self.items[key], flags) if not copies]
            start += len(self.items[key])
        domain = Domain(self.module, origins, quiet=True)
        domain.deferred = changing  # it holds no copy: nothing to wait for
        return domain

    def run(self, connect):
        """``connect(creds)`` hands out the run's connection of each account. Everything is read and planned before
        the first change: the stores' routes, every stream of every account (placements checked), every consumer
        against its stream as the run leaves it. A failure of a change is followed by the undoing of what the run
        made (undo)."""
        for store, wanted in zip(self.items["object_stores"], self.wanted_objects):
            if store.get("objects") is not None:
                objects.check_route(connect(store["creds"]), self.params.get("domain"),
                                    "object store %r" % store["name"])
                check_chunk_sizes(connect(store["creds"]), store["name"], wanted)
        self.accounts.plan(connect)
        self.foresee(connect)
        try:
            self.change(connect)
        except (NatsEdgeError, OSError) as exc:
            undone = None if self.module.check_mode else self.undo(connect)
            if not undone:
                raise
            result = dict((key, value) for key, value in (getattr(exc, "result", None) or {}).items()
                          if key not in ("changed", "actions"))
            raise DomainError("%s; %s" % (exc, undone), **result) from exc
        if self.params["wait_seconds"] > 0 and not self.module.check_mode:
            self.wait(connect)
        for item in self.items["fetches"]:
            try:
                self.results["fetched"].append(self.fetch(connect, item))
            except DomainError:
                # a first run's copy may not hold yet what another domain's first run is writing to its origin
                if not self.params["defer_copies"]:
                    raise
                if "OBJ_" + item["bucket"] not in self.deferred:  # two objects of one store: the store once
                    self.deferred.append("OBJ_" + item["bucket"])

    def change(self, connect):
        """The run's changes, once everything is planned: the streams (each account's origins ahead of their
        copies), the buckets' entries, the stores' objects, then the consumers in the order given."""
        for manager in self.accounts.managers.values():
            manager.apply_all()
        for (name, options, state), item in zip(self.buckets, self.items["kv_buckets"]):
            self.results["buckets"].append(self.bucket(connect, name, options, state, item["creds"]))
        for store, wanted in zip(self.items["object_stores"], self.wanted_objects):
            self.results["stores"].append(self.store(connect, store, wanted))
        for item, desired in zip(self.items["consumers"], self.consumer_configs):
            js = self.jetstream(connect, item["creds"])
            try:
                if self.module.check_mode and self.created_here(item):
                    result = self.predicted_consumer(js, item, desired)
                else:
                    result = ConsumerManager(self.module, js, item).run(desired)
            finally:
                self.consumer_actions.extend(js.actions)
            result.update(stream=item["stream"], name=item["name"])
            self.results["consumer_results"].append(result)

    def jetstream(self, connect, creds):
        return JetStream(connect(creds), domain=self.params.get("domain"), api_prefix=self.params.get("api_prefix"))

    def foresee(self, connect):
        """Every consumer to be present planned against its stream as this run leaves it, before the first change:
        on a stream the run makes, as made on these servers; on any other, as the server has the stream and the
        consumer now. A stream that neither exists nor is declared in the run, one the run deletes, or a change
        the server would refuse fails the run here, with nothing sent."""
        places = places_of(self.items)["consumers"]
        read = dict(((creds, desired.name), info) for creds, manager in self.accounts.managers.items()
                    for desired, _plan, info in manager.plans)
        accounts = {}
        for place, item, desired in zip(places, self.items["consumers"], self.consumer_configs):
            if item["state"] != "present":
                continue
            js = self.jetstream(connect, item["creds"])
            label = "%s: consumer %r on stream %r %s" % (place, item["name"], item["stream"], js.where())
            manager = self.accounts.managers.get(item["creds"])
            entry = manager.results.get(item["stream"]) if manager else None
            if entry and entry["action"] == "delete":
                raise DomainError("%s: this run deletes its stream %r (state absent)" % (label, item["stream"]))
            current, stream_config = None, None
            if not entry or entry["action"] not in ("create", "recreate"):
                try:
                    # a stream of the run was read with its plan
                    info = read[(item["creds"], item["stream"])] if entry else js.lookup("STREAM.INFO.%s" % item["stream"])
                    found = info and js.lookup("CONSUMER.INFO.%s.%s" % (item["stream"], item["name"]),
                                               JS_CONSUMER_NOT_FOUND)
                except JetStreamError as exc:
                    raise DomainError("%s: cannot read it: %s" % (label, exc)) from exc
                if info is None:
                    raise DomainError("%s: stream %r does not exist %s, and this run does not declare it" % (
                        label, item["stream"], js.where()))
                stream_config, current = info.get("config"), (found or {}).get("config")
            if item["creds"] not in accounts:
                try:
                    accounts[item["creds"]] = js.call("INFO")
                except NatsClientError:
                    accounts[item["creds"]] = None  # an imported API may not take the account's info
            planned_consumer(label, item, desired, current, domain_version(accounts[item["creds"]], stream_config, current))

    def undo(self, connect):
        """After a change failed: delete again the streams (buckets' and stores' too) and consumers this run made,
        and note them in the results; the words the failure's message gets, or None when the run had made
        nothing."""
        made = set()
        for creds, manager in self.accounts.managers.items():
            made.update((creds, desired.name) for desired in manager.declared
                        if manager.results.get(desired.name, {}).get("action") == "create"
                        and manager.results[desired.name]["changed"])
        consumers = [(item, result) for item, result in zip(self.items["consumers"], self.results["consumer_results"])
                     if result.get("operation") == "create" and (item["creds"], item["stream"]) not in made]
        if not made and not consumers:
            return None
        deleted, failed = [], []
        for item, result in consumers:
            js = self.jetstream(connect, item["creds"])
            what = "consumer %r on stream %r" % (item["name"], item["stream"])
            try:
                js.change("CONSUMER.DELETE.%s.%s" % (item["stream"], item["name"]), None, False)
                result.update(changed=False, undone=True)
                deleted.append(what)
            except NatsClientError as exc:
                failed.append("%s (%s)" % (what, exc))
            finally:
                self.consumer_actions.extend(js.actions)
        for creds, manager in self.accounts.managers.items():
            for desired in reversed(manager.declared):  # in the reverse of the order they were made
                if (creds, desired.name) not in made:
                    continue
                try:
                    manager.js.change("STREAM.DELETE.%s" % desired.name, None, False)
                    manager.results[desired.name].update(changed=False, undone=True, stream={})
                    deleted.append("stream %r%s" % (desired.name, js_stream.account_label(creds)))
                    self.undone.append((creds, desired.name))
                except NatsClientError as exc:
                    failed.append("stream %r%s (%s)" % (desired.name, js_stream.account_label(creds), exc))
        # what was written into those streams went with them
        for results, key, stream in (("buckets", "kv_buckets", lambda item: "KV_" + item["name"]),
                                     ("stores", "object_stores", lambda item: "OBJ_" + item["name"]),
                                     ("consumer_results", "consumers", lambda item: item["stream"])):
            for result, item in zip(self.results[results], self.items[key]):
                if (item["creds"], stream(item)) in self.undone:
                    result.update(changed=False, undone=True)
        words = ["this run deleted what it had made: %s" % ", ".join(deleted)] if deleted else []
        if failed:
            words.append("it could not delete %s" % ", ".join(failed))
        kept = self.changed_items()
        if kept:
            words.append("these changes stay: %s" % ", ".join(kept))
        return "; ".join(words)

    def changed_items(self):
        """What the run changed (and did not undo), named: ``stream 'A' (update)``."""
        out = ["stream %r%s (%s)" % (desired.name, js_stream.account_label(creds), manager.results[desired.name]["action"])
               for creds, manager in self.accounts.managers.items() for desired in manager.declared
               if manager.results.get(desired.name, {}).get("changed")]
        out += ["the entries of bucket %r" % result["name"] for result in self.results["buckets"]
                if not result.get("undone") and (result["put"] or result["deleted"])]
        out += ["the objects of store %r" % result["name"] for result in self.results["stores"]
                if not result.get("undone") and (result["uploaded"] or result["updated"] or result["deleted"])]
        out += ["consumer %r on stream %r (%s)" % (result["name"], result["stream"], result.get("operation"))
                for result in self.results["consumer_results"] if result.get("changed")]
        return out

    def fetch(self, connect, item):
        """An object into a file on this host (the controller, for the fleet's cache), digest checked."""
        place = "fetches (%s/%s)" % (item["bucket"], item["name"])
        manager = self.accounts.managers.get(item["creds"])
        entry = manager.results.get("OBJ_" + item["bucket"]) if manager else None
        if self.module.check_mode and entry and entry["action"] in ("create", "recreate"):
            # the store this run would create has nothing to read yet: the file would be written
            result = dict(changed=True, digest=None, size=None, dest=item["dest"], checksum=None)
            before = None
        else:
            client = connect(item["creds"])
            js = JetStream(client, domain=self.params.get("domain"), api_prefix=self.params.get("api_prefix"))
            try:
                result, before = objects.fetch_to_file(client, js, item["bucket"], item["name"], item["dest"],
                                                       item["mode"], self.module.check_mode)
            except objects.ObjectError as exc:
                raise DomainError("%s: %s" % (place, exc)) from exc
        result.update(bucket=item["bucket"], name=item["name"])
        if self.module._diff:
            result["diff"] = dict(before={"digest": before}, after={"digest": result["digest"]})
        return result

    def copies(self):
        """The streams (buckets' and stores' too) of this run that copy from an origin, per account's creds."""
        out = {}
        for desired in self.declared:
            if desired.state == "present" and is_copy(desired.config):
                out.setdefault(desired.creds, []).append(desired.name)
        return out

    def wait(self, connect):
        """Until every copy of this run has caught up with its origins (held against them, as jetstream_info's
        compare_origins does), reading again each second for wait_seconds; then fail naming what is behind."""
        copies = self.copies()
        if not copies:
            return
        deadline = time.monotonic() + self.params["wait_seconds"]
        target = [(self.params.get("domain"), self.params.get("api_prefix"))]
        while True:
            rows, missing = [], []
            for creds, names in copies.items():
                report = Report(self.module, connect(creds), duration_ns(INACTIVE_AFTER))
                try:
                    report.collect(target, names)
                except InfoFailure as exc:
                    raise DomainError(str(exc)) from exc
                report.compare_origins()
                found = set(stream["name"] for stream in report.streams)
                missing += [name for name in names if name not in found]
                rows += report.replication
            self.replication = rows
            behind = ["%s (%s from %s: %s)" % (row["stream"], row["kind"], row["source"], row["status"])
                      for row in rows if row["status"] != STATUS_OK] + ["%s (not found)" % name for name in missing]
            if not behind:
                return
            if time.monotonic() >= deadline:
                raise DomainError("the copies have not caught up with their origins after %d s: %s" % (
                    self.params["wait_seconds"], ", ".join(behind)))
            time.sleep(1)

    def created_here(self, item):
        """Whether the consumer's stream is one this run creates (in check mode: is not there yet)."""
        manager = self.accounts.managers.get(item["creds"])
        entry = manager.results.get(item["stream"]) if manager else None
        return item["state"] == "present" and bool(entry) and entry["action"] in ("create", "recreate")

    def predicted_consumer(self, js, item, desired):
        """Check mode, on a stream the run would create: the consumer's create, as it would be sent."""
        try:
            version = domain_version(js.call("INFO"))
        except NatsClientError:
            version = domain_version()
        decided = plan(item["name"], "present", desired, None, version, item["on_immutable_change"])
        js.change("CONSUMER.CREATE.%s.%s" % (item["stream"], item["name"]),
                  request_body(item["stream"], decided.config, version, decided.action), True)
        result = dict(changed=True, operation=decided.action, changed_fields=list(decided.changed),
                      consumer={"stream_name": item["stream"], "name": item["name"], "config": decided.config})
        if self.module._diff:
            result["diff"] = {"before": {}, "after": {"config": decided.config}}
        return result

    def entry(self, creds, stream):
        manager = self.accounts.managers[creds]
        return manager, manager.results[stream]

    def bucket(self, connect, name, options, state, creds):
        manager, entry = self.entry(creds, "KV_" + name)
        put, deleted, before, after = [], [], dict(entries={}), dict(entries={})
        if state == "present":
            put, deleted, before, after = Entries(self.module, connect(creds), manager.js).converge(
                name, options, entry["action"] != "create")
        result = dict(name=name, action=entry["action"], stream=entry["stream"],
                      changed=entry["changed"] or bool(put or deleted), put=put, deleted=deleted)
        if self.module._diff:
            result["diff"] = dict(before=dict((entry.get("diff") or {}).get("before") or {}, **before),
                                  after=dict((entry.get("diff") or {}).get("after") or {}, **after))
        return result

    def store(self, connect, store, wanted):
        manager, entry = self.entry(store["creds"], "OBJ_" + store["name"])
        result = dict(name=store["name"], action=entry["action"], store=entry["stream"], changed=entry["changed"],
                      uploaded=[], updated=[], deleted=[])
        diff = entry.get("diff") or {}
        if store["state"] == "present" and store.get("objects") is not None:
            uploaded, updated, deleted, objects_diff = converge_objects(
                self.module, connect(store["creds"]), manager.js, store["name"], wanted, entry["action"] != "create",
                store["exclusive"])
            result.update(uploaded=uploaded, updated=updated, deleted=deleted,
                          changed=entry["changed"] or bool(uploaded or updated or deleted))
            diff = dict(before=dict(diff.get("before") or {}, objects=objects_diff["before"]),
                        after=dict(diff.get("after") or {}, objects=objects_diff["after"]))
        if self.module._diff:
            result["diff"] = diff
        return result

    def result(self):
        streams = self.accounts.result(True)
        stream_entries = streams["streams"][:len(self.items["streams"])]
        out = dict(streams=stream_entries, actions=streams["actions"] + self.consumer_actions, deferred=self.deferred,
                   **self.results)
        if self.replication is not None:
            out["replication"] = self.replication
        groups = (stream_entries, out["buckets"], out["stores"], out["consumer_results"], out["fetched"])
        out["changed"] = any(e["changed"] for group in groups for e in group)
        if self.module._diff:
            out["diff"] = [e.get("diff") for group in groups for e in group if e["changed"]]
        return out


class Connections(object):
    """The run's connection of each account's creds, opened on first use, closed with the run."""

    def __init__(self, params, stack):
        self.params = params
        self.stack = stack
        self.clients = {}

    def __call__(self, creds):
        if creds not in self.clients:
            self.clients[creds] = self.stack.enter_context(NatsClient(connection_params(self.params, creds)))
        return self.clients[creds]
