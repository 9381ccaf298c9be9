# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""jetstream_domain's run: its lists' items checked, then a domain's streams, buckets, stores, consumers and
fetches converged through one connection per account. Private to the collection."""

from __future__ import annotations

import copy
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import ItemChecker, is_copy, where
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer as objects
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_model import (
    ConsumerInputError, domain_version, plan, request_body)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_apply import (
    ARGUMENT_SPEC as CONSUMER_OPTIONS, ConsumerManager, checked_consumer, consumer_label)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_tables import STATUS_OK
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_reader import INACTIVE_AFTER, InfoFailure, Report
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import duration_ns
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.bucket_content import (
    OBJECT_STORE_OPTIONS, Entries, checked_objects, converge_objects)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_apply import AccountStreams
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JetStream, NatsClient, NatsClientError, connection_params)

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


class DomainError(NatsEdgeError):
    """Input or a failure worded for the user."""


def _checked_fetch(validated):
    """A fetch's own check: its store's name, its mode (to an int) and its file's directory."""
    return dict(validated, mode=objects.checked_fetch(validated["bucket"], validated["mode"], validated["dest"]))


def item_checkers():
    """One ItemChecker per list, with its kind's options and its own check."""
    return dict((key, ItemChecker(spec, then=_checked_fetch if key == "fetches" else None, mutually_exclusive=exclusive))
                for key, (spec, exclusive) in ITEM_SPECS.items())


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


class Domain(object):
    """One run: the streams of every kind through AccountStreams, then contents, then consumers."""

    def __init__(self, module, items, quiet=False):
        self.module = module
        self.items = items
        self.params = module.params
        self.deferred = []
        self.buckets = kv.declared_buckets({"buckets": items["kv_buckets"], "state": "present"}) \
            if items["kv_buckets"] else []
        self.wanted_objects = [checked_objects(store) for store in items["object_stores"]]
        self.consumer_configs = []
        for item in items["consumers"]:
            try:
                self.consumer_configs.append(checked_consumer(module, item))
            except ConsumerInputError as exc:
                raise DomainError("%s: %s" % (consumer_label(item), exc)) from exc
        bucket_streams = kv.bucket_stream_items(self.buckets)
        for stream, item in zip(bucket_streams, items["kv_buckets"]):
            stream["creds"] = item["creds"]
        store_streams = [dict(kv.store_stream_item(store), creds=store["creds"]) for store in items["object_stores"]]
        self.declared = js_stream.desired_items(dict(
            streams=items["streams"] + bucket_streams + store_streams, state="present", on_immutable_change="fail",
            allow_data_loss=False, creds=self.params.get("creds")))
        for desired in [] if quiet else self.declared:
            for warning in desired.warnings:
                module.warn(warning)
        self.accounts = AccountStreams(module, self.declared)
        self.results = dict(buckets=[], stores=[], consumer_results=[], fetched=[])
        self.consumer_actions = []
        self.replication = None

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
        """``connect(creds)`` hands out the run's connection of each account."""
        for store in self.items["object_stores"]:
            if store.get("objects") is not None:
                objects.check_route(connect(store["creds"]), self.params.get("domain"),
                                    "object store %r" % store["name"])
        self.accounts.run(connect)
        for (name, options, state), item in zip(self.buckets, self.items["kv_buckets"]):
            self.results["buckets"].append(self.bucket(connect, name, options, state, item["creds"]))
        for store, wanted in zip(self.items["object_stores"], self.wanted_objects):
            self.results["stores"].append(self.store(connect, store, wanted))
        for item, desired in zip(self.items["consumers"], self.consumer_configs):
            js = JetStream(connect(item["creds"]), domain=self.params.get("domain"),
                           api_prefix=self.params.get("api_prefix"))
            try:
                if self.module.check_mode and self.created_here(item):
                    result = self.predicted_consumer(js, item, desired)
                else:
                    result = ConsumerManager(self.module, js, item).run(desired)
            finally:
                self.consumer_actions.extend(js.actions)
            result.update(stream=item["stream"], name=item["name"])
            self.results["consumer_results"].append(result)
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
        put, deleted, before, after = [], [], {}, {}
        if state == "present":
            put, deleted, before, after = Entries(self.module, connect(creds), manager.js).converge(
                name, options, entry["action"] != "create")
        result = dict(name=name, action=entry["action"], stream=entry["stream"],
                      changed=entry["changed"] or bool(put or deleted), put=put, deleted=deleted)
        if self.module._diff:
            result["diff"] = dict(before=dict((entry.get("diff") or {}).get("before") or {}, entries=before),
                                  after=dict((entry.get("diff") or {}).get("after") or {}, entries=after))
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
