#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_domain
short_description: A JetStream domain's streams, key-value buckets, object stores and consumers in one run
description:
  - Converges, in one module run and through one connection per account, what
    M(nats_edge.fleet.jetstream_stream), M(nats_edge.fleet.jetstream_kv),
    M(nats_edge.fleet.jetstream_object_store) and M(nats_edge.fleet.jetstream_consumer) converge one
    kind at a time, with the same rules, checks and results.
  - Every item is checked against its kind's options, and every stream, bucket and store of every
    account is read and planned (placements checked, objects' files read) before the first change.
    Then the streams (buckets and stores are streams too) are changed, origins ahead of their copies,
    then the buckets' entries and the stores' objects are written where they differ, then the
    consumers are converged, in the order given, then (after O(wait_seconds)) the objects of O(fetches)
    are written to files.
  - The site.yml streams stage runs it once per domain with O(defer_copies), and again only where a copy
    was deferred or something changed. A domain costs one module run when its copies are as declared, two when
    not, instead of one per kind and pass.
author: nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
attributes:
  check_mode:
    support: full
    description: Reads everything, then returns the requests it would send in RV(actions); sends none.
  diff_mode:
    support: full
    description: Returns, for each item it changes, its normalised configuration before and after.
  idempotent:
    support: full
    description: A second run with the same items reports no change and sends no request that changes anything.
options:
  streams:
    description:
      - Streams, each item with the options of an item of M(nats_edge.fleet.jetstream_stream)'s C(streams),
        its own C(creds) included.
    type: list
    elements: dict
    default: []
  kv_buckets:
    description:
      - Key-value buckets, each item with the options of an item of M(nats_edge.fleet.jetstream_kv)'s C(buckets),
        and C(creds), the credentials file of a user of the bucket's account when it is not the task's.
    type: list
    elements: dict
    default: []
  object_stores:
    description:
      - Object stores, each item with the options of M(nats_edge.fleet.jetstream_object_store) (C(name),
        C(objects), C(exclusive), C(mirror), ...), and C(creds) as in O(kv_buckets).
    type: list
    elements: dict
    default: []
  consumers:
    description:
      - Durable consumers, each item with the options of M(nats_edge.fleet.jetstream_consumer) (C(stream),
        C(name), ...), and C(creds) as in O(kv_buckets). Converged after every stream, bucket and store.
    type: list
    elements: dict
    default: []
  unique_tag:
    description:
      - The cluster's JetStream C(unique_tag) prefix, such as V(az:), for the placement check of the streams,
        buckets and stores (see M(nats_edge.fleet.jetstream_stream)'s option of that name).
    type: str
  wait_seconds:
    description:
      - After the changes, wait up to this many seconds until every stream, bucket and store of the run that
        copies from an origin (a mirror or sources) has caught up, read each second and held against its
        origins as M(nats_edge.fleet.jetstream_info) with C(compare_origins) holds it (a copy made a moment ago
        reports no lag until its first message); then fail naming the copies still behind.
      - V(0) waits for nothing. In check mode nothing is waited for.
      - The wait comes before O(fetches), so what is fetched from a copy is complete.
      - The site.yml streams stage waits so in the run that converges the copies, where it ran
        M(nats_edge.fleet.jetstream_info) after it.
    type: int
    default: 0
  fetches:
    description:
      - Objects to write to files where the module runs, each item with the options of
        M(nats_edge.fleet.jetstream_object_fetch) (C(bucket), C(name), C(dest), C(mode)) and C(creds) as in
        O(kv_buckets); fetched last, each only when the file's digest differs, digest checked, written whole.
      - The site.yml streams stage fetches so, into the controller's cache, the objects the domain's hosts list,
        from the domain's own copy.
      - In check mode an object of a store the run would create is reported as a file to write.
    type: list
    elements: dict
    default: []
  defer_copies:
    description:
      - For runs that converge several domains whose copies read each other's origins. With V(true), when a copy
        of the run (a stream, bucket or store with a mirror or sources) is not found as declared (it would be
        created, changed, recreated or deleted), this run converges only the items that copy from nowhere, with
        their entries and objects, returns the copies in RV(deferred) and leaves them, the consumers,
        O(wait_seconds) and O(fetches) to a second run, made once the origins of every domain exist.
      - When every copy is found as declared, everything is converged in this one run; an object of O(fetches)
        that cannot be read whole from its store yet (an origin in another domain may be changing it in its own
        first run) is then deferred too, with its store's name in RV(deferred).
      - To decide, the copies are only read; their placements are checked and their origins looked up when
        they are converged.
      - The site.yml streams stage runs so on every domain first; its second run goes where a domain deferred,
        or, outside check mode, where a first run changed something (a copy's origin may have changed under
        the first run's wait and fetches).
    type: bool
    default: false
notes:
  - An item that fails its kind's checks fails the task before anything is sent, naming the list, the item
    and the option. A failure after the first change names the item and reports what was sent in RV(actions).
seealso:
  - module: nats_edge.fleet.jetstream_stream
  - module: nats_edge.fleet.jetstream_kv
  - module: nats_edge.fleet.jetstream_object_store
  - module: nats_edge.fleet.jetstream_consumer
"""

EXAMPLES = r"""
---
- name: The hub's streams, a bucket, a store and a durable consumer, two accounts, one run
  nats_edge.fleet.jetstream_domain:
    servers: nats://hub-1:4222
    domain: hub
    creds: /etc/nats/admin.creds
    streams:
      - {name: SHIPMENTS, subjects: [shipments.>], max_age: 14d}
      - {name: ledger, subjects: [ledger.>], creds: /etc/nats/ops.creds}
    kv_buckets:
      - name: site-settings
        history: 5
        entries: {mode: normal}
    object_stores:
      - name: site-files
        objects:
          - {name: motd.txt, content: "hello"}
    consumers:
      - stream: SHIPMENTS
        name: packers
        ack_policy: explicit
        max_deliver: 5
"""

RETURN = r"""
streams:
  description: One entry per item of O(streams), as M(nats_edge.fleet.jetstream_stream) returns them in its C(streams).
  returned: always
  type: list
  elements: dict
buckets:
  description: One entry per item of O(kv_buckets) (C(name), C(action), C(changed), C(stream), C(put), C(deleted)).
  returned: always
  type: list
  elements: dict
stores:
  description:
    - One entry per item of O(object_stores) (C(name), C(action), C(changed), C(store), C(uploaded), C(updated),
      C(deleted)).
  returned: always
  type: list
  elements: dict
consumer_results:
  description:
    - One entry per item of O(consumers) (C(stream), C(name), C(operation), C(changed), C(changed_fields),
      C(consumer)).
  returned: always
  type: list
  elements: dict
fetched:
  description:
    - One entry per item of O(fetches) (C(bucket), C(name), C(dest), C(changed), C(digest), C(size), C(checksum)),
      as M(nats_edge.fleet.jetstream_object_fetch) returns them; in check mode an object of a store the run would
      create has no C(digest), C(size) or C(checksum).
  returned: always
  type: list
  elements: dict
replication:
  description:
    - The copies' replication rows of the last read of O(wait_seconds), as M(nats_edge.fleet.jetstream_info)
      returns them in its C(replication) (C(stream), C(kind), C(source), C(lag), C(status), ...).
  returned: when O(wait_seconds) waited for a copy
  type: list
  elements: dict
deferred:
  description:
    - The stream names (C(KV_) and C(OBJ_) for buckets and stores) of the copies left to a second run, see
      O(defer_copies); empty when nothing was deferred.
  returned: always
  type: list
  elements: str
  sample: [recv-cnc, KV_settings]
actions:
  description: The JetStream API requests that change something, in the order sent; in check mode the ones that would be.
  returned: always
  type: list
  elements: dict
diff:
  description: Before and after of each item the run changes, in the order of the lists.
  returned: in diff mode
  type: list
  elements: dict
"""

import contextlib
import copy
import time

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import is_copy
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer as objects
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_model import (
    ConsumerInputError, domain_version, plan, request_body)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_apply import (
    ARGUMENT_SPEC as CONSUMER_OPTIONS, ConsumerFailure, ConsumerManager, checked_consumer, consumer_label)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_tables import STATUS_OK
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_reader import INACTIVE_AFTER, InfoFailure, Report
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import duration_ns
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.bucket_content import (
    OBJECT_STORE_OPTIONS, Entries, checked_objects, converge_objects)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_apply import AccountStreams, StreamFailure
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JetStream, JetStreamError, NatsClient, NatsClientError, connection_params, nats_module, require_nats_py)

ARGUMENT_SPEC = dict(
    streams=dict(type="list", elements="dict", default=[]),
    kv_buckets=dict(type="list", elements="dict", default=[]),
    object_stores=dict(type="list", elements="dict", default=[]),
    consumers=dict(type="list", elements="dict", default=[]),
    unique_tag=dict(type="str"),
    wait_seconds=dict(type="int", default=0),
    fetches=dict(type="list", elements="dict", default=[]),
    defer_copies=dict(type="bool", default=False),
)
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


def checked_items(params):
    """Every list's items checked against their kind's options, with defaults; the first problem raises."""
    out = {}
    for key, (spec, exclusive) in ITEM_SPECS.items():
        out[key] = []
        for index, item in enumerate(params[key]):
            if not isinstance(item, dict):
                raise DomainError("%s[%d]: expected a mapping, got %r" % (key, index, item))
            result = ArgumentSpecValidator(spec, mutually_exclusive=exclusive).validate(item)
            if result.error_messages:
                raise DomainError("%s[%d] (%s): %s" % (key, index, _item_label(key, item), "; ".join(result.error_messages)))
            validated = result.validated_parameters
            if key == "fetches":
                try:
                    validated["mode"] = objects.checked_fetch(validated["bucket"], validated["mode"], validated["dest"])
                except (kv.BucketError, objects.ObjectError) as exc:
                    raise DomainError("%s[%d] (%s): %s" % (key, index, _item_label(key, item), exc))
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
                raise DomainError("%s: %s" % (consumer_label(item), exc))
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
        reader = AccountStreams(self.module, [desired for desired in self.declared if _is_copy(desired)])
        reader.plan(connect, checks=False)
        return reader.changing()

    def deferring(self, connect):
        """This run, or, when a copy is not as declared, a run of the items that copy from nowhere alone,
        which reports the copies as deferred (defer_copies)."""
        changing = self.changing_copies(connect)
        if not changing:
            return self
        copy_flags = [_is_copy(desired) for desired in self.declared]
        origins, start = dict(self.items, consumers=[], fetches=[]), 0
        for key in ("streams", "kv_buckets", "object_stores"):  # the order of self.declared
            flags = copy_flags[start:start + len(self.items[key])]
            origins[key] = [item for item, is_copy in zip(self.items[key], flags) if not is_copy]
            start += len(self.items[key])
        domain = Domain(self.module, origins, quiet=True)
        domain.deferred = changing  # it holds no copy: nothing to wait for
        return domain

    def run(self, connect):
        """``connect(creds)`` hands out the run's connection of each account."""
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
        where = "fetches (%s/%s)" % (item["bucket"], item["name"])
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
                raise DomainError("%s: %s" % (where, exc))
        result.update(bucket=item["bucket"], name=item["name"])
        if self.module._diff:
            result["diff"] = dict(before={"digest": before}, after={"digest": result["digest"]})
        return result

    def copies(self):
        """The streams (buckets' and stores' too) of this run that copy from an origin, per account's creds."""
        out = {}
        for desired in self.declared:
            if desired.state == "present" and _is_copy(desired):
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
                    raise DomainError(str(exc))
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
            put, deleted, before, after = Entries(self.module, connect(creds), manager.js.prefix).converge(
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


def _is_copy(desired):
    return is_copy(desired.config)


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


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True)
    try:
        domain = Domain(module, checked_items(module.params))
    except (DomainError, kv.BucketError, js_stream.StreamError, OSError) as exc:
        module.fail_json(msg=str(exc), changed=False, actions=[])
    require_nats_py(module)
    with contextlib.ExitStack() as stack:
        connect = Connections(module.params, stack)
        try:
            if module.params["defer_copies"]:
                domain = domain.deferring(connect)
            domain.run(connect)
        except ConsumerFailure as exc:
            extra = dict(exc.extra)
            extra.pop("actions", None)
            result = domain.result()
            extra["changed"] = result["changed"] or extra.get("changed", False)
            module.fail_json(msg=exc.msg, **dict(result, **extra))
        except (DomainError, kv.BucketError, js_stream.StreamError, StreamFailure, NatsClientError, JetStreamError,
                objects.ObjectError, OSError) as exc:
            module.fail_json(msg=str(exc), **domain.result())
    module.exit_json(**domain.result())


if __name__ == "__main__":
    main()
