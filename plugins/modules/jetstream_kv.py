#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_kv
short_description: Manage JetStream key-value buckets, their copies across domains, and their entries
description:
  - Creates, updates or deletes key-value buckets, one per task or many (O(buckets)), and converges their entries.
  - A bucket is the stream C(KV_<name>) on C($KV.<name>.>) with the mapping the nats clients use; it is managed by
    the same stream manager as M(nats_edge.fleet.jetstream_stream), so it gets the same comparison of only what is
    declared, the server's own update rules for its version, check and diff mode and the returned RV(actions).
    Changing O(replicas) or any other option the server can change updates the bucket in place; a change it
    cannot make fails naming the field. A bucket is never deleted to be recreated.
  - Entries are written into the bucket of O(domain) (through C($JS.<domain>.API.$KV.<bucket>.<key>), as the nats
    clients write them), or through O(api_prefix), whatever server O(servers) names; each write must be acknowledged
    by that bucket's stream. A write no stream takes is sent again for a few seconds, then fails.
  - O(mirror) makes a read-only copy of a bucket of another domain, which answers reads (direct gets) locally, also
    while the origin's domain is down. Updating a copy keeps its origin's domain. A copy is only ever promoted to
    a bucket of its own when the task sets O(promote) (and leaves out O(mirror)); a task that leaves out O(mirror)
    for a bucket that is a copy fails before anything is sent, naming the bucket and its origin.
  - O(sources) gathers the keys of buckets of other domains into this one (needs nats-server 2.10 or later, whose
    subject transforms put the keys of a source under this bucket's subjects).
  - O(entries) sets keys. Only keys whose last value differs are written, pipelined; the current values are read
    with one consumer that delivers the last message of every key.
  - Every option, key and value is checked before anything is sent; a bucket's options the server checks against
    what the bucket holds (O(max_bytes)) and its being a copy are checked once the bucket is read, also before
    anything is sent.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
attributes:
  check_mode:
    support: full
    description: Reads the bucket and its values and returns what it would create, update, put and delete; sends none of it.
  diff_mode:
    support: full
    description:
      - Returns the bucket's configuration and the changed keys before and after (C(entries), and C(entry_ttls)
        where a changed key has a TTL before or after).
  idempotent:
    support: full
    description: A second run with the same options changes nothing and writes no key.
options:
  buckets:
    description:
      - Buckets to converge in one run, over one connection. Each item takes O(buckets[].name),
        O(buckets[].state) and every bucket option of the single form (documented once, here, and they apply at the
        top level too).
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the bucket (letters, digits, V(-), V(_)).
        type: str
        required: true
      state:
        description: As O(state); the task's O(state) when left out.
        type: str
        choices: [present, absent]
      <<: &bucket
        description:
          description: Description of the bucket.
          type: str
        history:
          description: How many values each key keeps, 1 to 64 (a number, not V(true)). Left out, 1.
          type: int
        ttl:
          description:
            - How long a value lives, as seconds or a duration such as V(30d); V(0) (the default) forever.
            - At least V(100ms), as the servers keep nothing for a shorter time.
          type: raw
        max_bytes:
          description:
            - Most bytes the bucket holds, as bytes or a size such as V(1GiB); V(-1) (the default) unlimited.
            - Lowering it below the bytes the bucket already holds is refused, naming them (the server would refuse
              every write, or drop the oldest values).
          type: raw
        max_value_size:
          description: Largest value, as bytes or a size; V(-1) (the default) unlimited; at most V(2147483647).
          type: raw
        storage:
          description: Storage of the values (left out, V(file)). Cannot change on a live bucket.
          type: str
          choices: [file, memory]
        replicas:
          description: Replicas of the bucket in a clustered domain, 1 to 5 (left out, 1). Changed in place.
          type: int
        placement:
          description: Where the bucket's replicas go.
          type: dict
          suboptions:
            cluster:
              description: Cluster to place the bucket in.
              type: str
            tags:
              description: Server tags every replica's server must have.
              type: list
              elements: str
            preferred:
              description:
                - Name of the server the bucket's leader should be on, one that holds a replica (nats-server 2.11 or
                  later; refused before anything is sent on an older one). Not part of the bucket's configuration;
                  the leader is moved there with a leader step-down, as
                  O(nats_edge.fleet.jetstream_stream#module:placement.preferred) of M(nats_edge.fleet.jetstream_stream)
                  describes; a second run changes nothing.
              type: str
        compression:
          description: Compress the values on disk (S2). Needs nats-server 2.10 or later.
          type: bool
        metadata:
          description: String keys and values stored with the bucket (nats-server 2.10 or later).
          type: dict
        republish:
          description: Republish every change of a key to another subject (for example to feed a cache).
          type: dict
          suboptions:
            src:
              description: Keys to republish, as subjects; left out, every key (C($KV.<name>.>)).
              type: str
            dest:
              description: Subject to republish to.
              type: str
              required: true
            headers_only:
              description: Republish the headers only, not the value.
              type: bool
        per_key_ttl:
          description: Allow a TTL per value (the C(Nats-TTL) header). Needs nats-server 2.11 or later.
          type: bool
        limit_marker_ttl:
          description:
            - Leave a marker, kept this long, when a value expires or is removed by a limit, so watchers see it go.
              Needs nats-server 2.11 or later.
          type: raw
        mirror:
          description:
            - Make the bucket a read-only copy of a bucket of another domain (or account). Not with O(sources),
              O(entries) or O(promote).
            - The copy answers reads locally and keeps answering while the origin's domain is down.
            - Declare it on every run of a copy; left out, the task fails unless O(promote) is set.
            - A bucket cannot copy itself (the same name in the same domain).
            - A mirror cannot change on a live bucket, its start and filter neither (the server refuses it) - the task
              fails naming the bucket.
          type: dict
          suboptions: &copy
            name:
              description: Name of the origin bucket.
              type: str
              required: true
            domain:
              description: JetStream domain of the origin bucket. Not with C(external).
              type: str
            external:
              description: API prefix (and delivery prefix) of an origin in another account or domain.
              type: dict
              suboptions:
                api:
                  description: API prefix, such as C($JS.hub.API) or an imported C(JS.test@hub.API).
                  type: str
                  required: true
                deliver:
                  description: Delivery prefix for the copied values, when the account import needs one.
                  type: str
                  default: ""
            start_seq:
              description:
                - First sequence of the origin bucket's stream to copy (what was written before it is not copied).
              type: int
              aliases: [opt_start_seq]
            start_time:
              description:
                - Copy what was written from this time on, in RFC 3339 (a time without offset is UTC). Not with
                  C(start_seq).
              type: str
              aliases: [opt_start_time]
            filter_subject:
              description:
                - Copy only the keys this key pattern matches - V(site.*.up), V(config.>), V(fleet) - or, as the nats
                  clients and NACK take it, a subject under the origin's C($KV.<origin>.) (V($KV.status.site.>)).
                  Anything else (another bucket's subjects) is refused.
                - A mirror, and a source of the same name, keep the origin's subjects, so the filter is theirs. A source
                  of another name has its keys moved under this bucket's subjects by a subject transform, and the
                  server takes no filter next to one, so the pattern becomes that transform's source (and its
                  C(*) tokens the destination's C({{wildcard(n)}})); needs nats-server 2.10, as such a source does.
                - Not with C(subject_transforms).
              type: str
            subject_transforms:
              description:
                - Sources only (a mirror keeps its origin's keys, as the clients read it under its origin's subjects).
                  Which keys of the origin to copy (C(src), a key pattern or a subject under C($KV.<origin>.)) and
                  the keys they become here (C(dest), a key pattern or a subject under C($KV.<name>.), which may use
                  the server's mapping functions such as V({{wildcard(1)}})), instead of the whole bucket.
                  Needs nats-server 2.10.
              type: list
              elements: dict
              suboptions:
                src:
                  description: Keys of the origin to copy.
                  type: str
                  required: true
                dest:
                  description: The keys they become in this bucket.
                  type: str
                  required: true
        sources:
          description:
            - Buckets (of other domains or accounts) whose keys this bucket also holds, for example every edge site's
              bucket gathered at the hub. Keys of a source with another name are moved under this bucket's subjects by
              a subject transform, which needs nats-server 2.10 or later.
            - A bucket cannot source itself (the same name in the same domain).
            - Sources can be added, removed and changed on a live bucket; a source whose filter, transforms or start
              change is a new source to the server, which copies it again from its start.
          type: list
          elements: dict
          suboptions: *copy
        promote:
          description:
            - Promote a bucket that is a read-only copy (O(mirror)) to a bucket of its own, which takes writes and
              never follows its origin again. It cannot be undone (a bucket cannot become a copy again). Needs
              nats-server 2.12 or later. Not with O(mirror).
            - Left out, a task that leaves out O(mirror) for a copy fails, naming the bucket and its origin, and
              sends nothing. On a bucket that is no copy it changes nothing.
          type: bool
        entries:
          description:
            - Keys and the values they should have. A string is stored as it is; anything else (a number, a boolean, a
              mapping, a list) as JSON.
            - A key is text of letters, digits and V(-), V(/), V(_), V(=), V(.), at most 1024 characters. Quote a key
              YAML would read as a boolean or a number (V('yes'), V('5')); such a key is refused.
            - A null value (what YAML makes of a value left empty, or V(~)) is refused; write V('') for an empty value.
              To delete a key, leave it out and set O(exclusive).
            - Only keys whose last value differs are written. Not on a mirror, which is read-only.
            - To keep values out of the output, set C(no_log) on the task.
          type: dict
        entry_ttls:
          description:
            - How long some values of O(entries) live, key to duration (V(90), V(1h), whole seconds, at least V(1s)),
              or V(never) for a value that outlives the bucket's O(ttl). The server removes the value when it runs out
              (the C(Nats-TTL) header; C(nats kv create --ttl)). Needs O(per_key_ttl) and nats-server 2.11 or later.
            - Compared like the value. A value written with another TTL, or with one where O(entry_ttls) gives none,
              is written again (and lives its full TTL from then). A run after a value ran out writes it again; to
              let a value run out for good, remove it from O(entries).
            - Where a key keeps more than one value (O(history) above 1), the value before shows again when the
              newest runs out (the server removes only that one), and a TTL shorter than O(limit_marker_ttl) is
              refused (the server would make it that long on every write).
          type: dict
        exclusive:
          description: With O(entries), delete every key of the bucket that O(entries) does not list.
          type: bool
  <<: *bucket
  name:
    description: Name of the bucket. Required unless O(buckets) is used; cannot be combined with it.
    type: str
  state:
    description:
      - V(present) creates the bucket or brings it to the options set; V(absent) deletes it and its values.
      - With O(buckets), the state of every item that does not set its own.
    type: str
    choices: [present, absent]
    default: present
notes:
  - A bucket created elsewhere (C(nats kv add), a client) is managed the same way; options it has and the task
    leaves out are compared with the nats clients' defaults (history 1, no ttl, no limits, file storage, 1 replica).
seealso:
  - module: nats_edge.fleet.jetstream_stream
  - module: nats_edge.fleet.jetstream_object_store
  - name: Key/Value store
    description: How buckets work.
    link: https://docs.nats.io/nats-concepts/jetstream/key-value-store
"""

EXAMPLES = r"""
---
- name: Configuration for the edge sites, kept at the hub
  nats_edge.fleet.jetstream_kv:
    servers: nats://hub-1:4222
    domain: hub
    name: fleet-config
    history: 5
    replicas: 3
    entries:
      log_level: info
      sampling: {interval: 10s, metrics: [cpu, mem]}

- name: A read-only copy in every spoke, which answers while the hub is down
  nats_edge.fleet.jetstream_kv:
    servers: nats://hub-1:4222
    domain: "{{ item }}"
    name: fleet-config
    history: 5
    mirror: {name: fleet-config, domain: hub}
  loop: [spoke-1, spoke-2]

- name: Spoke 2 runs on its own from now on - its copy becomes a bucket of its own, for good
  nats_edge.fleet.jetstream_kv:
    servers: nats://hub-1:4222
    domain: spoke-2
    name: fleet-config
    history: 5
    promote: true

- name: What every site reports, gathered at the hub
  nats_edge.fleet.jetstream_kv:
    servers: nats://hub-1:4222
    domain: hub
    name: site-status
    sources:
      - {name: status, domain: spoke-1}
      - {name: status, domain: spoke-2}

- name: Exactly these feature flags, nothing else
  nats_edge.fleet.jetstream_kv:
    servers: nats://hub-1:4222
    domain: hub
    name: flags
    entries: {new_ui: "on", beta: "off"}
    exclusive: true
  no_log: true

- name: A maintenance window the edges read, gone by itself after two hours
  nats_edge.fleet.jetstream_kv:
    servers: nats://hub-1:4222
    domain: hub
    name: notices
    per_key_ttl: true
    entries: {maintenance: "hub-2 patching until 14:00"}
    entry_ttls: {maintenance: 2h}
"""

RETURN = r"""
actions:
  description: The JetStream API requests the run made (or, in check mode, would make) for the buckets' streams.
  returned: always
  type: list
  elements: dict
bucket:
  description: The bucket's stream as the server has it after the run (single form).
  returned: success and the single form is used
  type: dict
buckets:
  description:
    - Per bucket - C(name), C(action) on its stream, C(changed), C(stream), C(put) and C(deleted) keys, and
      C(leader) when it moved.
  returned: success and O(buckets) is used
  type: list
  elements: dict
put:
  description: Keys written (or, in check mode, that would be written) (single form).
  returned: success and the single form is used
  type: list
  elements: str
deleted:
  description: Keys deleted (or that would be) because O(exclusive) is set (single form).
  returned: success and the single form is used
  type: list
  elements: str
leader:
  description:
    - Where the run moved the bucket's leader for O(placement.preferred) (in check mode, would move it) - C(before),
      the leader it had, and C(after), the preferred server; in each entry of RV(buckets) too.
  returned: when the leader moved (single form)
  type: dict
  sample: {"before": "hub-1", "after": "hub-2"}
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.bucket_content import Entries
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_apply import StreamManager
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    NatsClient, nats_module, require_nats_py)

ARGUMENT_SPEC = kv.ARGUMENT_SPEC


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True,
                         mutually_exclusive=[["name", "buckets"]])
    params = module.params
    try:
        items = kv.declared_buckets(params)
        declared_streams = js_stream.desired_items({"streams": kv.bucket_stream_items(items), "state": params["state"],
                                                    "on_immutable_change": "fail", "allow_data_loss": False})
    except NatsEdgeError as exc:
        fail_from(module, exc, changed=False, actions=[])
    try:
        require_nats_py(params)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    manager = StreamManager(module, declared_streams)
    per_bucket, diffs = [], []
    try:
        with NatsClient(params) as client:
            manager.run(client)
            entries = Entries(module, client, manager.js)
            for (name, options, state), stream in zip(items, declared_streams):
                entry = manager.results[stream.name]
                put, deleted, before, after = [], [], dict(entries={}), dict(entries={})
                if state == "present":
                    exists = entry["action"] != "create"
                    put, deleted, before, after = entries.converge(name, options, exists)
                per_bucket.append(dict(name=name, action=entry["action"], stream=entry["stream"],
                                       changed=entry["changed"] or bool(put or deleted), put=put, deleted=deleted,
                                       **dict((k, entry[k]) for k in ("leader",) if k in entry)))
                if module._diff:
                    diffs.append(dict(before=dict((entry.get("diff") or {}).get("before") or {}, **before),
                                      after=dict((entry.get("diff") or {}).get("after") or {}, **after)))
    except NatsEdgeError as exc:
        fail_from(module, exc, changed=any(b["changed"] for b in per_bucket) or manager.result(True)["changed"],
                  actions=manager.js.actions if manager.js else [])
    result = dict(changed=any(b["changed"] for b in per_bucket), actions=manager.js.actions)
    if params.get("buckets") is not None:
        result["buckets"] = per_bucket
        if module._diff:
            result["diff"] = [d for d, b in zip(diffs, per_bucket) if b["changed"]]
    else:
        single = per_bucket[0]
        result.update(bucket=single["stream"], put=single["put"], deleted=single["deleted"])
        if "leader" in single:
            result["leader"] = single["leader"]
        if module._diff:
            result["diff"] = diffs[0]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
