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
  - A run is whole or nothing. Everything is checked before anything is written - each item against
    its kind's options, and the lists as wholes (a stream, bucket or store named twice in one account or
    like another's stream, subjects that overlap, a consumer or a fetch's C(dest) in O(fetches) listed twice,
    copies that copy each other in a cycle). Every stream, bucket and store of every account is read and
    planned (placements checked, objects' files read), and every consumer to be present is planned against
    its stream as the run leaves it (one the run makes, or one the server has; a stream that is neither
    fails the run), before the first change.
  - Then the streams (buckets and stores are streams too) are changed, origins ahead of their copies,
    then the buckets' entries and the stores' objects are written where they differ, then the
    consumers are converged, in the order given, then (after O(wait_seconds)) the objects of O(fetches)
    are written to files.
  - When the server still refuses a change after others were made (what no plan can know, such as a
    subject another stream of the account already takes), the run deletes the streams, buckets, stores and
    consumers it made, fails saying so and what stays changed, and reports them with C(undone).
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
        C(objects) with their C(headers) and C(chunk_size), C(exclusive), C(mirror), ...) but C(sealed), and
        C(creds) as in O(kv_buckets). Seal a store with M(nats_edge.fleet.jetstream_object_store).
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
  - An item that fails its kind's checks, alone or beside the others, fails the task before anything is sent,
    naming the list, the item and the option. A failure after the first change names the item, undoes what the
    run made and reports what was sent (the deletes too) in RV(actions).
  - The site.yml preflight runs the same checks on the inventory before any stage changes anything.
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
  description:
    - One entry per item of O(streams), as M(nats_edge.fleet.jetstream_stream) returns them in its C(streams).
    - An entry of a stream the run made and deleted again after a later failure has C(undone=true) and
      C(changed=false) (so have the entries of RV(buckets), RV(stores) and RV(consumer_results)).
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

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_apply import ConsumerFailure
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.domain import Connections, Domain, checked_items
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import nats_module, require_nats_py

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


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True)
    try:
        domain = Domain(module, checked_items(module.params))
    except (NatsEdgeError, OSError) as exc:
        fail_from(module, exc, changed=False, actions=[])
    try:
        require_nats_py(module.params)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    with contextlib.ExitStack() as stack:
        connect = Connections(module.params, stack)
        try:
            if module.params["defer_copies"]:
                domain = domain.deferring(connect)
            domain.run(connect)
        except ConsumerFailure as exc:
            extra = dict(exc.result)
            extra.pop("actions", None)
            result = domain.result()
            extra["changed"] = result["changed"] or extra.get("changed", False)
            fail_from(module, exc, **dict(result, **extra))
        except (NatsEdgeError, OSError) as exc:
            fail_from(module, exc, **domain.result())
    module.exit_json(**domain.result())


if __name__ == "__main__":
    main()
