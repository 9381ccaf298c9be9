#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_stream
short_description: Manage JetStream streams, one or many per task
description:
  - Create, update, promote, recreate or delete JetStream streams in a domain or through an imported API.
  - Only the options a task sets are compared with the server, after both sides are normalised
    (durations, sizes, sorted subjects, metadata the server adds). Options left out keep the value the
    stream has, or get the server's default when the stream is created.
  - Changes the server refuses to make on a live stream (for example O(storage)) are detected before any
    request, from the server's own update rules and its version; O(on_immutable_change) decides what happens.
  - O(streams) converges a list of streams over one connection in one module run. Every item is validated
    and planned before the first change is sent.
  - Returns the JetStream API requests the run made, or would make in check mode.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
attributes:
  check_mode:
    support: full
    description: Plans and returns the requests it would make, sends none of them.
  diff_mode:
    support: full
    description: Returns the normalised configuration before and after, per stream.
  idempotent:
    support: full
    description: A second run with the same options reports no change and sends no request that changes anything.
options:
  # Every stream option is written once, as a suboption of a bulk item (&stream); the single
  # form at the top level takes them all from there (<<: *stream).
  streams:
    description:
      - Streams to converge in one run, over one connection (the bulk form), or one per account when items
        carry their own O(streams[].creds).
      - Each item takes O(streams[].name) and every stream option of the single form, with the same
        meaning (they are documented once, here, and apply at the top level too). Items without
        O(streams[].state), O(streams[].on_immutable_change) or O(streams[].allow_data_loss) take the task's value.
      - Every item is validated and planned before anything is sent, so a bad item, two items whose
        subjects overlap, or a change the rules refuse fails the task with nothing changed.
        Deletions are sent first, then updates and promotions, then recreations, then creations.
      - A refusal by the server while applying (for example subjects that overlap a stream not in the
        list) stops the run; RV(actions) and RV(streams) then show what was already sent.
      - Items of several accounts are all read, planned and checked before the first change to any of them.
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the stream (as O(name)).
        type: str
        required: true
      state:
        description: As O(state); the task's O(state) when left out.
        type: str
        choices: [present, absent]
      on_immutable_change:
        description: As O(on_immutable_change); the task's value when left out.
        type: str
        choices: [fail, recreate]
      allow_data_loss:
        description: As O(allow_data_loss); the task's value when left out.
        type: bool
      creds:
        description:
          - Creds file of a user of the account the stream belongs to, when that is not the task's account.
          - The item is converged through a connection of its own with these creds (one per creds file, shared
            by the items that give it), to the task's O(servers) with the task's other connection options.
          - Stream names and subjects are an account's own, so two items may name the same stream when their
            creds differ. An item that gives the task's own O(creds) is in the task's account.
        type: path
      <<: &stream
        description:
          description: Description of the stream.
          type: str
        subjects:
          description:
            - Subjects the stream stores; wildcards V(*) and V(>) allowed as whole tokens. Compared as a set.
            - Not with O(mirror). Declaring subjects (or O(sources)) for a stream that is a mirror promotes it.
            - A new stream without subjects, mirror or sources listens on its name.
          type: list
          elements: str
        storage:
          description: Storage of the messages. Cannot change on a live stream.
          type: str
          choices: [file, memory]
        retention:
          description:
            - When messages are removed; V(limits) keeps them until a limit is reached, V(interest) while
              consumers need them, V(workqueue) until one consumer acknowledges them.
            - nats-server 2.10 and later switch between V(limits) and V(interest) on a live stream, never to or
              from V(workqueue); 2.9 changes none.
          type: str
          choices: [limits, interest, workqueue]
        discard:
          description: At a limit, V(old) removes the oldest messages, V(new) refuses new ones.
          type: str
          choices: [old, new]
        discard_new_per_subject:
          description: Apply O(discard=new) per subject; needs O(discard=new) and O(max_msgs_per_subject).
          type: bool
        max_consumers:
          description:
            - Most consumers the stream accepts; V(-1) (or V(0)) for unlimited.
            - Cannot change on a live stream before nats-server 2.12.
          type: int
        max_msgs:
          description: Most messages kept; V(-1) (or V(0)) for unlimited.
          type: int
        max_bytes:
          description:
            - Most bytes kept, as bytes or a size such as V(512MB) or V(1GiB); V(-1) (or V(0)) for unlimited.
            - Suffixes as nats-server reads them - V(K), V(M), V(G), V(T) are decimal; V(KB), V(KiB), V(MB),
              V(MiB), V(GB), V(GiB), V(TB), V(TiB) binary.
          type: raw
        max_age:
          description:
            - Oldest message kept; V(0) keeps messages of any age.
            - A duration is a number of seconds or a string of numbers with units V(ns), V(us), V(ms), V(s),
              V(m), V(h), V(d), V(w) such as V(90s), V(1h30m) or V(7d).
          type: raw
        max_msgs_per_subject:
          description: Most messages kept per subject; V(-1) (or V(0)) for unlimited.
          type: int
        max_msg_size:
          description: Largest message accepted, as bytes or a size (see O(max_bytes)); V(-1) (or V(0)) for no limit.
          type: raw
        duplicate_window:
          description:
            - Window in which a repeated C(Nats-Msg-Id) is dropped, as a duration (see O(max_age)); at least
              V(100ms). The server's default is V(2m), or O(max_age) when shorter.
          type: raw
        replicas:
          description: Number of copies in a clustered JetStream, 1 to 5.
          type: int
          aliases: [num_replicas]
        placement:
          description:
            - Where a clustered JetStream places the stream. Only the keys set are compared;
              V({}) removes the placement.
          type: dict
          suboptions:
            cluster:
              description: Name of the cluster.
              type: str
            tags:
              description: Server tags the replicas need. Compared as a set.
              type: list
              elements: str
            preferred:
              description:
                - Name of the server the stream's leader should be on; one of the servers that hold a replica.
                  Needs nats-server 2.11 or later; on an older server the task fails before anything is sent.
                - It is not part of the stream's configuration (nats-server refuses a preferred server there); after
                  the stream is created or updated, a leader elsewhere is moved with a leader step-down that names
                  this server (C(STREAM.LEADER.STEPDOWN)), and the run waits until the stream reports it as its
                  leader. A stream whose leader is there already is left alone, so a second run changes nothing;
                  a leader that moved away since (a restart) is moved back. Changing it moves the leader, never
                  updates or recreates the stream; leaving it out leaves the leader where it is.
                - On its own it leaves O(placement.cluster) and O(placement.tags) as the stream has them.
                - A server that holds no replica is refused, naming the stream's servers (before anything is sent
                  when the run keeps the stream on its servers; a new stream, or one whose replicas or placement
                  change, is checked once the server has placed it). With fewer replicas than servers, use
                  O(placement.tags) to have the server place one there.
                - In check mode, the move of a live stream's leader is reported (RV(leader), RV(actions)), not sent.
              type: str
        no_ack:
          description: Do not acknowledge published messages.
          type: bool
        allow_rollup:
          description: Allow the C(Nats-Rollup) header to purge a subject or the stream. Not with O(deny_purge).
          type: bool
          aliases: [allow_rollup_hdrs]
        deny_delete:
          description: Refuse deleting messages through the API. Once set on a live stream it cannot be unset.
          type: bool
        deny_purge:
          description: Refuse purging the stream through the API. Once set on a live stream it cannot be unset.
          type: bool
        allow_direct:
          description: Allow direct get requests, answered by any replica.
          type: bool
        mirror_direct:
          description:
            - Let a mirror answer direct get requests for its origin.
            - For a mirror of a stream in the same account and domain the server takes this from the origin's
              O(allow_direct); a different value then fails after the write as not applied.
          type: bool
        compression:
          description: Compression of stored messages. Needs nats-server 2.10 or later.
          type: str
          choices: [none, s2]
        first_seq:
          description: Sequence number of the first message of a new stream. Not with O(mirror). Needs nats-server 2.10.
          type: int
        subject_transform:
          description:
            - Rewrite the subject of incoming messages before they are stored. V({}) removes it.
              Needs nats-server 2.10 or later.
          type: dict
          suboptions:
            src:
              description: Subjects to transform.
              type: str
            dest:
              description: Subject to store them under, with mapping functions such as C({{wildcard(1)}}).
              type: str
        republish:
          description:
            - Republish stored messages to another subject. V({}) removes it.
            - Cannot change on a live stream on nats-server 2.9.
          type: dict
          suboptions:
            src:
              description: Subjects of the stream to republish; all when left out.
              type: str
            dest:
              description: Subject to republish to; required.
              type: str
            headers_only:
              description: Republish the headers only.
              type: bool
        consumer_limits:
          description: Defaults and limits for the consumers of the stream. Needs nats-server 2.10 or later.
          type: dict
          suboptions:
            inactive_threshold:
              description: Duration after which an inactive consumer is removed (see O(max_age)).
              type: raw
            max_ack_pending:
              description: Most unacknowledged messages per consumer.
              type: int
        allow_msg_ttl:
          description:
            - Honour the per-message C(Nats-TTL) header. Once set on a live stream it cannot be unset.
              Needs nats-server 2.11 or later.
          type: bool
        subject_delete_marker_ttl:
          description:
            - Leave a delete marker with this lifetime when max age removes the last message of a subject,
              as a duration (see O(max_age)), at least 1 second. Not with O(mirror). Needs nats-server 2.11 or later.
          type: raw
        persist_mode:
          description:
            - How writes reach the disk. V(default) as the server's C(sync_interval) says; V(async) acknowledges before
              the write is flushed (faster, and messages acknowledged in the last moments before a crash can be lost).
              V(async) needs file storage and one replica, and not O(allow_atomic). Cannot change on a live stream.
              Needs nats-server 2.12 or later.
          type: str
          choices: [default, async]
        allow_msg_counter:
          description:
            - Make the stream a distributed counter (C(Nats-Incr) headers). Only with O(retention=limits), not with
              O(discard=new), O(allow_msg_ttl), O(subject_delete_marker_ttl), O(allow_msg_schedules) or O(mirror).
              Cannot change on a live stream. Needs nats-server 2.12 or later.
          type: bool
        allow_atomic:
          description:
            - Accept atomic batch publishes (all messages of a batch stored, or none). Not with O(mirror) or
              O(persist_mode=async). Needs nats-server 2.12 or later.
          type: bool
        allow_msg_schedules:
          description:
            - Accept scheduled messages (C(Nats-Schedule) headers). Needs O(allow_rollup) (left unset or V(true)); not
              with O(discard=new), O(deny_purge), O(mirror), O(sources) or O(allow_msg_counter). Once set on a live stream
              it cannot be unset. Needs nats-server 2.12 or later.
          type: bool
        allow_batched:
          description:
            - Accept fast batch publishes. Not with O(mirror). Needs nats-server 2.14 or later.
          type: bool
        sealed:
          description:
            - Seal the stream - no more messages, deletes or purges, and limits that no longer remove anything. Only
              on a stream that exists (nats-server refuses to create one sealed; create it first, seal it in a later
              run), and never undone. The server then sets O(max_age) to 0, O(discard) to V(new), O(deny_delete) and
              O(deny_purge) on and O(allow_rollup) off; leave those unset or at those values.
          type: bool
        metadata:
          description:
            - String keys and values stored with the stream. Compared as a whole, so keys not listed are removed;
              the keys nats-server adds (C(_nats.*)) are left alone. Needs nats-server 2.10 or later.
          type: dict
        mirror:
          description:
            - Make the stream a copy of one other stream, message for message. Not with O(subjects),
              O(sources) or O(first_seq).
            - A mirror cannot change, be added to or removed from a live stream, except that nats-server 2.12
              and later promote a mirror to a normal stream when the task declares O(subjects) or O(sources)
              for it and leaves O(mirror) out.
          type: dict
          suboptions: &source
            name:
              description: Name of the origin stream.
              type: str
              required: true
            start_seq:
              description: First sequence of the origin to copy.
              type: int
              aliases: [opt_start_seq]
            start_time:
              description:
                - Copy from this time on, in RFC 3339 (a time without offset is UTC).
                - Not with O(mirror.start_seq) (O(sources[].start_seq)).
              type: str
              aliases: [opt_start_time]
            filter_subject:
              description: Copy only the messages on these subjects.
              type: str
            subject_transforms:
              description: Filters with subject rewrites instead of O(mirror.filter_subject) (O(sources[].filter_subject)). Needs nats-server 2.10.
              type: list
              elements: dict
              suboptions:
                src:
                  description: Subjects to copy.
                  type: str
                  required: true
                dest:
                  description: Subject to store them under.
                  type: str
                  required: true
            domain:
              description:
                - JetStream domain of the origin stream; shorthand for an C(external.api) of C($JS.<domain>.API).
                - Not with O(mirror.external) (O(sources[].external)).
              type: str
            external:
              description: API prefix (and delivery prefix) of an origin in another account or domain.
              type: dict
              suboptions:
                api:
                  description: API prefix, for example C($JS.hub.API) or an imported C(JS.test@hub.API).
                  type: str
                  required: true
                deliver:
                  description: Delivery prefix for the copied messages, when the account import needs one.
                  type: str
                  default: ""
            consumer:
              description:
                - Copy through this durable consumer of the origin (a durable sourcing consumer) rather than one the
                  server makes and drops; the server resets it to where the copy stands. Needs nats-server 2.14.
                - The consumer exists on the origin, a push consumer with this C(deliver_subject) and
                  C(ack_policy=flow_control) (M(nats_edge.fleet.jetstream_consumer)).
                - Not with O(mirror.start_seq), O(mirror.start_time) or O(mirror.filter_subject) (nor their
                  O(sources[].start_seq) forms).
              type: dict
              suboptions:
                name:
                  description: The consumer's name.
                  type: str
                  required: true
                deliver_subject:
                  description: Its delivery subject.
                  type: str
                  required: true
        sources:
          description:
            - Streams whose messages this stream also stores, each entry as in O(mirror). Compared as a set;
              V([]) removes every source.
            - Sources can be added and removed on a live stream.
          type: list
          elements: dict
          suboptions: *source
  <<: *stream
  name:
    description:
      - Name of the stream. Required unless O(streams) is used; cannot be combined with it.
      - Names cannot contain whitespace, V(.), V(*), V(>), V(/) or V(\\).
    type: str
  state:
    description:
      - V(present) creates the stream or brings it to the options set; V(absent) deletes it and its messages.
      - With O(streams), the state of every item that does not set its own.
    type: str
    choices: [present, absent]
    default: present
  on_immutable_change:
    description:
      - What to do when an option differs in a way the server cannot change on a live stream
        (see the notes for the rules).
      - V(fail) fails naming the stream, the domain and the field, and changes nothing.
      - V(recreate) deletes the stream and creates it from the options set (options left out get
        the server's defaults). A stream that holds messages or consumers is only recreated with
        O(allow_data_loss=true).
      - With O(streams), the policy of every item that does not set its own.
    type: str
    choices: [fail, recreate]
    default: fail
  allow_data_loss:
    description:
      - Allow O(on_immutable_change=recreate) to delete a stream that holds messages or consumers.
      - With O(streams), the value of every item that does not set its own.
    type: bool
    default: false
  placement_servers:
    description:
      - The JetStream servers of the domain as the inventory declares them (each with its cluster and
        tags); placements are checked against this list instead of asking the servers.
      - Without it, the servers are asked with C($SYS.REQ.SERVER.PING.VARZ) when O(system_creds) is set,
        else with C($SYS.REQ.ACCOUNT.PING.STATZ), which every account may send (see the notes).
    type: list
    elements: dict
    suboptions:
      name:
        description: Server name.
        type: str
        required: true
      cluster:
        description: Name of its cluster; a server without one runs JetStream standalone and ignores placements.
        type: str
      tags:
        description: Its server tags (C(server_tags), the role's C(nats_server_server_tags)).
        type: list
        elements: str
        default: []
      jetstream:
        description: Whether it runs JetStream.
        type: bool
        default: true
  unique_tag:
    description:
      - The cluster's JetStream C(unique_tag) prefix, such as V(az:) (the role's C(nats_server_jetstream_unique_tag)),
        for the placement check; V("") for none.
      - Left out, it is read from the servers with O(system_creds), else placements are checked without it.
    type: str
  system_creds:
    description:
      - Credentials file of a system account user. When set, the placement check reads every server's tags,
        cluster and JetStream C(unique_tag) with C($SYS.REQ.SERVER.PING.VARZ) over a second connection
        to O(servers).
    type: path
notes:
  - "Placement is checked before anything is sent, for every stream the run creates, recreates, or whose
    O(replicas) or O(placement) it changes and that is replicated or placed: the servers of the stream's
    domain (of O(placement.cluster), else of any cluster) that carry every tag of O(placement.tags), none
    of its C(!tag)s and not C(!jetstream) must hold O(replicas) replicas; with a unique tag such as V(az:),
    each on a server with a different C(az:) tag (unless the placement names an C(az:) tag, which turns the
    rule off, as the server does). A placement that fails this fails the task naming the stream, the placement
    and the servers that match, with nothing sent, in check mode too."
  - "What the check knows: C($SYS.REQ.ACCOUNT.PING.STATZ) tells each server's name, cluster, domain and tags,
    but not the JetStream C(unique_tag); without O(unique_tag) or O(system_creds) replicas are only counted
    against the matching servers, not against their zones. Free storage, account limits and offline servers
    are not checked; the server still refuses for those when the stream's turn comes. Before refusing, the
    check asks the servers up to three times more, waits 2 s for each further reply and counts every server
    heard in any round, so a loaded server that answers late is counted. With an O(api_prefix) that is not
    C($JS.<domain>.API) the servers of every domain count. When no server answers, the task warns and the
    placement is not checked."
  - "Changes refused on a live stream, as the servers answer them (verified on 2.9.10, 2.10.26, 2.11.11, 2.12.8,
    2.14.6 and 2.15.1): O(storage) never; O(retention) never on 2.9, never to or from V(workqueue) on any;
    O(max_consumers) before 2.12; O(republish) on 2.9; O(deny_delete), O(deny_purge), O(allow_msg_ttl),
    O(allow_msg_schedules) and O(sealed) once set; O(persist_mode) and O(allow_msg_counter) never;
    O(mirror) never changed or added, removed (promotion) from 2.12 on."
  - The server's version comes from the stream itself (the metadata 2.11 and later add, or the fields a
    server writes), and for a new stream that uses options of 2.10 or later from the account info of the domain.
  - After every change the server's view of the stream (its reply) is checked; an option the server did not take as asked fails the task,
    because it would report a change on every run.
  - Deleting or recreating a stream also deletes its consumers.
seealso:
  - name: JetStream streams
    description: What every stream option means.
    link: https://docs.nats.io/nats-concepts/jetstream/streams
"""

EXAMPLES = r"""
---
- name: A stream of orders, kept for a week on file
  nats_edge.fleet.jetstream_stream:
    servers: nats://hub-1:4222
    creds: /etc/nats/admin.creds
    name: ORDERS
    subjects: [orders.>]
    storage: file
    max_age: 7d
    max_bytes: 1GiB
    duplicate_window: 2m
    metadata:
      owner: shop

- name: Command and control in the hub, declared in the hub's domain
  nats_edge.fleet.jetstream_stream:
    servers: nats://hub-1:4222
    domain: hub
    name: cnc
    subjects: [cnc.>]
    max_msgs_per_subject: 10

- name: Each spoke mirrors the hub's cnc stream into its own domain
  nats_edge.fleet.jetstream_stream:
    servers: nats://spoke1-1:4222
    domain: spoke-1
    name: recv-cnc
    mirror:
      name: cnc
      domain: hub

- name: The hub aggregates the spokes' test streams
  nats_edge.fleet.jetstream_stream:
    servers: nats://hub-1:4222
    domain: hub
    name: aggregate
    sources:
      - name: test
        domain: spoke-1
      - name: test
        domain: spoke-2
        start_time: "2024-05-01T00:00:00Z"

- name: Orders and returns, archived together, reported from a mirror; one task, one connection
  nats_edge.fleet.jetstream_stream:
    servers: nats://hub-1:4222
    streams:
      - name: ORDERS
        subjects: [orders.>]
      - name: RETURNS
        subjects: [returns.>]
      - name: ARCHIVE
        sources: [{name: ORDERS}, {name: RETURNS}]
        max_age: 365d
        deny_delete: true
      - name: REPORT
        mirror: {name: ARCHIVE}
        storage: memory
        max_age: 1d

- name: The streams of two accounts in the hub, in one run; the other account's items name its creds
  nats_edge.fleet.jetstream_stream:
    servers: nats://hub-1:4222
    domain: hub
    creds: /etc/nats/admin.creds
    streams:
      - name: audit
        subjects: [audit.>]
      - name: audit
        creds: /etc/nats/ops.creds
        subjects: [audit.>]
      - name: audit-copy
        creds: /etc/nats/ops.creds
        mirror: {name: audit}

- name: Many streams from the inventory, with defaults for every item
  nats_edge.fleet.jetstream_stream:
    servers: nats://hub-1:4222
    on_immutable_change: fail
    streams: "{{ site_streams }}"

- name: A stream of the account TEST in the hub, managed by another account through its import of TEST's hub API
  nats_edge.fleet.jetstream_stream:
    servers: nats://hub-1:4222
    creds: /etc/nats/ops.creds
    api_prefix: JS.test@hub.API
    name: test-inbox
    subjects: [inbox.>]

- name: Move a stream to memory storage, recreating it (its messages are lost)
  nats_edge.fleet.jetstream_stream:
    name: SCRATCH
    subjects: [scratch.>]
    storage: memory
    on_immutable_change: recreate
    allow_data_loss: true

- name: Promote the spoke's mirror when the hub is gone for good (nats-server 2.12 or later)
  nats_edge.fleet.jetstream_stream:
    servers: nats://spoke1-1:4222
    domain: spoke-1
    name: recv-cnc
    subjects: [cnc.>]

- name: Remove a stream and its messages
  nats_edge.fleet.jetstream_stream:
    name: SCRATCH
    state: absent
"""

RETURN = r"""
name:
  description: Name of the stream (single form).
  returned: when O(name) is used
  type: str
  sample: ORDERS
leader:
  description:
    - Where the run moved the stream's leader for O(placement.preferred) (in check mode, would move it) - C(before),
      the leader it had, and C(after), the preferred server; in each entry of RV(streams) too.
  returned: when the leader moved (single form)
  type: dict
  sample: {before: hub-3, after: hub-2}
action:
  description: What the run did, or would do in check mode (single form).
  returned: when O(name) is used
  type: str
  choices: [none, create, update, promote, recreate, delete]
  sample: update
stream:
  description:
    - The stream as the server reports it after the run (STREAM.INFO without the response envelope),
      with C(config), C(state), C(created), and C(cluster), C(mirror), C(sources), C(domain) when the server sends them.
    - Durations in nanoseconds, as the server reports them.
    - In check mode, the stream as it is before the run. Empty when the stream does not exist.
  returned: when O(name) is used
  type: dict
  sample:
    config:
      name: ORDERS
      subjects: [orders.>]
      retention: limits
      storage: file
      max_age: 604800000000000
      num_replicas: 1
    state:
      messages: 42
      bytes: 5100
      first_seq: 1
      last_seq: 42
      consumer_count: 1
    created: "2024-05-01T10:00:00.123456789Z"
streams:
  description: One entry per item of O(streams), in the order given.
  returned: when O(streams) is used
  type: list
  elements: dict
  contains:
    name:
      description: Name of the stream.
      type: str
    action:
      description: What the run did to it, as RV(action).
      type: str
    changed:
      description: Whether the run changed it (or would, in check mode).
      type: bool
    creds:
      description: The item's own O(streams[].creds), when it gives them.
      type: str
    leader:
      description: Where the run moved the stream's leader, as RV(leader); only when it moved.
      type: dict
    stream:
      description: The stream as the server reports it, as RV(stream).
      type: dict
    diff:
      description: Normalised configuration before and after, in diff mode.
      type: dict
actions:
  description:
    - The JetStream API requests that change something, in the order sent; in check mode the ones that
      would be sent. Read-only requests (STREAM.INFO, INFO) are not listed.
  returned: always
  type: list
  elements: dict
  contains:
    subject:
      description: API subject, with the domain or import prefix.
      type: str
      sample: $JS.hub.API.STREAM.UPDATE.ORDERS
    body:
      description: Request body (the stream config), null for deletions.
      type: dict
  sample:
    - subject: $JS.hub.API.STREAM.UPDATE.ORDERS
      body: {name: ORDERS, subjects: [orders.>], max_age: 604800000000000}
diff:
  description:
    - Normalised configuration before and after (durations in nanoseconds, sizes in bytes);
      a list with one entry per stream for O(streams).
  returned: in diff mode
  type: raw
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import where
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.domain import refuse_stream_cycles
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_apply import AccountStreams
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    nats_module, require_nats_py)


def main():
    module = nats_module(js_stream.module_argspec(), jetstream=True, supports_check_mode=True,
                         required_one_of=[["name", "streams"]], mutually_exclusive=[["name", "streams"]])
    try:
        declared = js_stream.desired_items(module.params)
        places = [where("streams", index, desired.name) for index, desired in enumerate(declared)] \
            if module.params.get("streams") is not None else ["stream %r" % desired.name for desired in declared]
        refuse_stream_cycles(declared, places, module.params.get("domain"))
    except NatsEdgeError as exc:
        fail_from(module, exc, changed=False, actions=[])
    for desired in declared:
        for warning in desired.warnings:
            module.warn(warning)
    try:
        require_nats_py(module.params)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    bulk = module.params.get("streams") is not None
    manager = AccountStreams(module, declared)
    try:
        manager.run()
    except NatsEdgeError as exc:
        fail_from(module, exc, **manager.result(bulk))
    module.exit_json(**manager.result(bulk))


if __name__ == "__main__":
    main()
