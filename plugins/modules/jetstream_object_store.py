#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_object_store
short_description: Manage a JetStream object store, its copies across domains, and its objects
description:
  - Creates, updates or deletes an object store (the stream C(OBJ_<name>) on C($O.<name>.C.>) and C($O.<name>.M.>),
    as the nats clients make it) with the stream manager of M(nats_edge.fleet.jetstream_stream) - the same comparison,
    update rules, check and diff mode and RV(actions). It is never deleted to be recreated.
  - O(mirror) makes a read-only copy of a store of another domain; M(nats_edge.fleet.jetstream_object_fetch) reads
    objects from such a copy, also while the origin's domain is down. A copy is only ever promoted to a store of
    its own when the task sets O(promote) (and leaves out O(mirror)); a task that leaves out O(mirror) for a store
    that is a copy fails before anything is sent, naming the store and its origin.
  - O(objects) uploads files or content. An object is uploaded only when its SHA-256 digest differs from the stored
    one, so a run with nothing to do reads the objects' metadata only, never their chunks. Chunks are sent pipelined.
  - With O(objects), O(servers) must be servers of the store's domain O(domain), as the servers carry no object data
    from one domain to another. A task connected to another domain is refused before anything is created or written.
    Every chunk and metadata write must be acknowledged by the store's stream.
  - Servers that share an account over leaf links hand an object write to every store of that name whose servers
    the write reaches. Give a store that takes objects in one domain no namesake that takes objects in another
    (copies made with O(mirror) take none), or keep the account's leaf links from carrying C($O.>). A write that
    another domain's store acknowledges fails, naming both domains.
  - After an object's metadata is written, every chunk of that object the stored metadata does not name is purged -
    the version it replaces, and those of an upload of the same object by another run at the same time (that
    upload writes its chunks again when they were purged before its metadata was written), so no upload leaves
    chunks behind.
  - Every option, object name, content and metadata is checked, and every file looked at, before anything is
    sent; O(max_bytes) against what the store holds, and the store's being a copy, are checked once the store is
    read, also before anything is sent.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
attributes:
  check_mode:
    support: full
    description: Reads the store and its objects' metadata and returns what it would change; sends nothing that changes.
  diff_mode:
    support: full
    description: Returns the store's configuration (with C(sealed) when O(sealed) seals it) and the changed
      objects' digests before and after.
  idempotent:
    support: full
    description: A second run with the same options changes nothing and uploads nothing.
options:
  name:
    description: Name of the object store (letters, digits, V(-), V(_)).
    type: str
    required: true
  state:
    description: V(present) creates the store or brings it to the options set; V(absent) deletes it and its objects.
    type: str
    choices: [present, absent]
    default: present
  description:
    description: Description of the store.
    type: str
  ttl:
    description:
      - How long an object lives, as seconds or a duration such as V(30d); V(0) (the default) forever.
      - At least V(100ms), as the servers keep nothing for a shorter time.
    type: raw
  max_bytes:
    description:
      - Most bytes the store holds, as bytes or a size such as V(10GiB); V(-1) (the default) unlimited.
      - Lowering it below the bytes the store already holds is refused, naming them (the server would refuse every
        upload, or drop the oldest chunks).
    type: raw
  storage:
    description: Storage of the objects (left out, V(file)). Cannot change on a live store.
    type: str
    choices: [file, memory]
  replicas:
    description: Replicas in a clustered domain, 1 to 5 (left out, 1). Changed in place.
    type: int
  placement:
    description: Where the store's replicas go.
    type: dict
    suboptions:
      cluster:
        description: Cluster to place the store in.
        type: str
      tags:
        description: Server tags every replica's server must have.
        type: list
        elements: str
      preferred:
        description:
          - Name of the server the store's leader should be on, one that holds a replica (nats-server 2.11 or later;
            refused before anything is sent on an older one). Not part of the store's configuration; the leader is
            moved there with a leader step-down, as O(nats_edge.fleet.jetstream_stream#module:placement.preferred) of
            M(nats_edge.fleet.jetstream_stream) describes; a second run changes nothing.
        type: str
  compression:
    description: Compress the objects on disk (S2). Needs nats-server 2.10 or later.
    type: bool
  metadata:
    description: String keys and values stored with the store (nats-server 2.10 or later).
    type: dict
  mirror:
    description:
      - Make the store a read-only copy of a store of another domain (or account). Not with O(objects) or
        O(promote).
      - Declare it on every run of a copy; left out, the task fails unless O(promote) is set.
      - A store cannot copy itself (the same name in the same domain).
      - A copy is always of the whole store, from its first message - an object is its metadata and chunks, stored as
        separate messages under names no filter can pick by object, so a copy that starts later or filters would hold
        objects without their chunks (the start and filter options of M(nats_edge.fleet.jetstream_kv) copies are
        not offered here).
    type: dict
    suboptions:
      name:
        description: Name of the origin store.
        type: str
        required: true
      domain:
        description: JetStream domain of the origin store. Not with O(mirror.external).
        type: str
      external:
        description: API prefix (and delivery prefix) of an origin in another account or domain.
        type: dict
        suboptions:
          api:
            description: API prefix, such as C($JS.hub.API).
            type: str
            required: true
          deliver:
            description: Delivery prefix for the copied messages, when the account import needs one.
            type: str
            default: ""
  promote:
    description:
      - Promote a store that is a read-only copy (O(mirror)) to a store of its own, which takes uploads and never
        follows its origin again. It cannot be undone (a store cannot become a copy again). Needs nats-server 2.12
        or later. Not with O(mirror).
      - Left out, a task that leaves out O(mirror) for a copy fails, naming the store and its origin, and sends
        nothing. On a store that is no copy it changes nothing.
    type: bool
  objects:
    description: Objects the store should hold. Each is uploaded only when its digest differs.
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the object, at most 1024 bytes (UTF-8).
        type: str
        required: true
      src:
        description: A file on the host the module runs on (usually the controller) to upload. Not with O(objects[].content).
        type: path
      content:
        description:
          - What to store as the object. Not with O(objects[].src).
          - A string is stored as it is; anything else (a mapping, a list, a number, a boolean) as JSON, as
            M(nats_edge.fleet.jetstream_kv) stores values.
        type: raw
      description:
        description: Description of the object.
        type: str
      metadata:
        description:
          - Keys and values stored with the object, as text. A number or a boolean is stored as its text (V(5),
            V(true)); a mapping, a list or null is refused (write it as JSON text, V({{ value | to_json }}), to
            keep it there).
        type: dict
      headers:
        description:
          - Headers stored with the object, as C(nats object put --header) stores them - each name to a value, or
            to a list of values; a number or a boolean is stored as its text. Names are kept as written (case and
            all) and cannot hold spaces or V(:); a value is one line.
          - Kept in the object's metadata (the C(headers) of its ObjectInfo, each name to its list of values, as
            nats.go writes them). Compared like O(objects[].metadata) - left out, the object has none; a change of
            headers alone rewrites the object's metadata, not its chunks.
        type: dict
      chunk_size:
        description:
          - Size of the object's chunks when it is uploaded, as bytes or a size such as V(128KiB) (as
            C(nats object put --chunk-size)); left out, 128 KiB, as the nats clients write them.
          - At least 1 byte and at most the server's max payload (its C(max_payload), 1 MiB unless configured);
            either is refused naming the object before anything is sent.
          - It only applies to an upload, made when the object's digest differs - an object stored with the same
            content is not uploaded again because its chunk size differs.
        type: raw
  sealed:
    description:
      - V(true) seals the store (as C(nats object seal)) once this run's objects are written, so a run that
        uploads and seals does both, uploads first. A sealed store is read-only for good - nats-server takes no
        write, delete or purge on it, sets its O(ttl) to V(0) and turns off the rollups an upload needs.
      - A later run whose O(objects) differ from what a sealed store holds (or that O(exclusive) would delete
        from) is refused before anything is sent, naming the store and the objects; a run that declares them as
        they are changes nothing. V(false) on a sealed store is refused (a stream cannot be unsealed), as are
        O(ttl) and O(mirror) with V(true).
      - Left out, the store is left as it is (sealed or not). Any supported nats-server (2.2 or later) seals.
    type: bool
  exclusive:
    description: With O(objects), delete every object of the store that O(objects) does not list.
    type: bool
    default: false
seealso:
  - module: nats_edge.fleet.jetstream_object_fetch
  - module: nats_edge.fleet.jetstream_kv
"""

EXAMPLES = r"""
---
- name: Firmware for the edge sites, kept at the hub
  nats_edge.fleet.jetstream_object_store:
    servers: nats://hub-1:4222
    domain: hub
    name: firmware
    replicas: 3
    objects:
      - name: gateway-2.4.1.bin
        src: files/gateway-2.4.1.bin
        metadata: {board: rpi4}
      - name: CHANNEL
        content: stable
        headers: {Content-Type: text/plain}

- name: A release, uploaded then sealed for good
  nats_edge.fleet.jetstream_object_store:
    servers: nats://hub-1:4222
    domain: hub
    name: release-2024-05
    sealed: true
    objects:
      - name: image.tar
        src: files/image.tar
        chunk_size: 512KiB

- name: A copy in each spoke, readable while the hub is down
  nats_edge.fleet.jetstream_object_store:
    servers: nats://hub-1:4222
    domain: "{{ item }}"
    name: firmware
    mirror: {name: firmware, domain: hub}
  loop: [spoke-1, spoke-2]
"""

RETURN = r"""
actions:
  description: The JetStream API requests the run made (or would make) for the store's stream (with O(sealed), the
    update that seals it last).
  returned: always
  type: list
  elements: dict
store:
  description: The store's stream as the server has it after the run.
  returned: success
  type: dict
uploaded:
  description: Objects uploaded (or, in check mode, that would be).
  returned: success
  type: list
  elements: str
updated:
  description: Objects whose description, metadata or headers changed, without uploading them again.
  returned: success
  type: list
  elements: str
deleted:
  description: Objects deleted because O(exclusive) is set.
  returned: success
  type: list
  elements: str
leader:
  description:
    - Where the run moved the store's leader for O(placement.preferred) (in check mode, would move it) - C(before),
      the leader it had, and C(after), the preferred server.
  returned: when the leader moved
  type: dict
  sample: {"before": "hub-1", "after": "hub-2"}
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer as objects
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.bucket_content import (
    OBJECT_STORE_MODULE_OPTIONS as ARGUMENT_SPEC, check_chunk_sizes, checked_objects, converge_objects, plan_objects,
    refuse_sealed)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_apply import StreamManager
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    NatsClient, nats_module, require_nats_py)


class Sealing(StreamManager):
    """Seals the store once its objects are written (nats' ObjectStore.Seal). In check mode the store is planned
    as this run would leave it (``planned``: the create or update body the run would send), which a store the run
    would create is not yet."""

    def __init__(self, module, name, planned=None):
        StreamManager.__init__(self, module, js_stream.desired_items({"streams": [kv.seal_item(name)]}))
        self.planned = planned

    def info(self, name):
        if self.check_mode and self.planned is not None:
            return {"config": self.planned}
        return StreamManager.info(self, name)


def _live_sealed(manager):
    info = manager.plans[0][2] if manager.plans else None
    return bool(((info or {}).get("config") or {}).get("sealed"))


def _actions(*managers):
    return [action for manager in managers if manager is not None and manager.js for action in manager.js.actions]


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True)
    params = module.params
    present = params["state"] == "present"
    try:
        wanted = checked_objects(params)
        declared = js_stream.desired_items({"streams": [kv.store_stream_item(params)]})
    except (NatsEdgeError, OSError) as exc:
        fail_from(module, exc, changed=False, actions=[])
    try:
        require_nats_py(params)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    manager, sealing = StreamManager(module, declared), None
    result = dict(uploaded=[], updated=[], deleted=[])
    try:
        with NatsClient(params) as client:
            with_objects = present and params.get("objects") is not None
            if with_objects:
                objects.check_route(client, params.get("domain"))
                check_chunk_sizes(client, params["name"], wanted)
            manager.plan(client)
            sealed_now = present and _live_sealed(manager)
            if sealed_now:
                # planned again as a sealed store (no rollups, no ttl), refused if it says sealed: false
                manager = StreamManager(module, js_stream.desired_items({"streams": [
                    kv.store_stream_item(params, sealed=True)]}))
                manager.plan(client)
            entry = manager.results[declared[0].name]
            planned = None
            if with_objects:
                planned = plan_objects(client, manager.js, params["name"], wanted, entry["action"] != "create",
                                       params["exclusive"])
                if sealed_now:
                    refuse_sealed(params["name"], planned, manager.where())
            manager.apply_all()
            result.update(store=entry["stream"], changed=entry["changed"])
            if "leader" in entry:
                result["leader"] = entry["leader"]
            diff = dict(before=dict((entry.get("diff") or {}).get("before") or {}),
                        after=dict((entry.get("diff") or {}).get("after") or {}))
            if with_objects:
                uploaded, updated, deleted, objects_diff = converge_objects(
                    module, client, manager.js, params["name"], wanted, entry["action"] != "create",
                    params["exclusive"], planned)
                result.update(uploaded=uploaded, updated=updated, deleted=deleted,
                              changed=entry["changed"] or bool(uploaded or updated or deleted))
                diff = dict(before=dict(diff["before"], objects=objects_diff["before"]),
                            after=dict(diff["after"], objects=objects_diff["after"]))
            if present and params.get("sealed") and not sealed_now:
                plan = manager.plans[0][1]
                sealing = Sealing(module, params["name"], plan.body if plan.action != "none" else None)
                sealing.run(client)
                sealed = sealing.results[sealing.declared[0].name]
                result["changed"] = result["changed"] or sealed["changed"]
                if not module.check_mode:
                    result["store"] = sealed["stream"]
                if diff["before"]:  # a store that exists (a new one has no before)
                    diff["before"]["sealed"] = bool(diff["before"].get("sealed"))
                diff["after"].update((k, v) for k, v in js_stream.SEALED_FORCES.items() if k in diff["after"])
                diff["after"]["sealed"] = True
            if module._diff:
                result["diff"] = diff if with_objects or sealing else entry.get("diff")
    except (NatsEdgeError, OSError) as exc:
        label = "object store %r" % params["name"]
        module.fail_json(msg=str(exc) if str(exc).startswith(label) else "%s: %s" % (label, exc), changed=bool(
            result.get("changed") or result["uploaded"] or manager.result(False)["changed"] or (
                sealing is not None and sealing.result(False)["changed"])),
            actions=_actions(manager, sealing), **dict((k, result[k]) for k in ("uploaded",)))
    module.exit_json(actions=_actions(manager, sealing), **result)


if __name__ == "__main__":
    main()
