#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_consumer
short_description: Durable pull and push consumers of a JetStream stream
description:
  - Creates, updates, recreates or deletes one durable consumer of a stream, in the JetStream
    domain or imported API you point it at.
  - Only the options you set are compared with the server's config, after both were normalised
    (durations to nanoseconds, sizes to bytes, times to UTC, filters as a set, metadata the
    server stamps itself left out). Options you leave unset keep whatever the consumer has.
  - Changes the server does not apply to an existing consumer (deliver and ack policy, start
    position, replay policy, pull versus push, heartbeats, flow control, C(max_waiting), and
    from nats-server 2.14 C(mem_storage)) fail before anything is sent, naming the fields,
    unless O(on_immutable_change=recreate).
  - The version of the domain's servers is read from the JetStream API itself (API level,
    version stamps, config fields), so rules and features follow the servers of that domain,
    not the server the connection landed on.
author: nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
attributes:
  check_mode:
    support: full
    description: Reads the stream and consumer, then returns the requests it would send in RV(actions); sends none.
  diff_mode:
    support: full
    description: Returns the consumer's normalised configuration before and after.
  idempotent:
    support: full
    description: A second run with the same options reports no change and sends no request that changes anything.
options:
  stream:
    description: Name of the stream the consumer reads.
    type: str
    required: true
  name:
    description: Durable name of the consumer.
    type: str
    required: true
    aliases: [durable_name, durable]
  state:
    description: Whether the consumer should exist.
    type: str
    choices: [present, absent]
    default: present
  on_immutable_change:
    description:
      - What to do when a setting differs that the server cannot change on an existing consumer.
      - V(fail) stops with an error naming the fields, and nothing is changed.
      - V(recreate) deletes the consumer and creates it again with the new settings. Its
        delivery state (delivered, acknowledged and pending messages) starts over.
    type: str
    choices: [fail, recreate]
    default: fail
  description:
    description: A description of the consumer.
    type: str
  deliver_policy:
    description: Where in the stream delivery starts. Cannot change later.
    type: str
    choices: [all, last, new, by_start_sequence, by_start_time, last_per_subject]
  opt_start_seq:
    description: First stream sequence to deliver, with O(deliver_policy=by_start_sequence).
    type: int
  opt_start_time:
    description: Time (RFC 3339, like V(2024-05-01T08:00:00Z)) to start from, with O(deliver_policy=by_start_time).
    type: raw
  ack_policy:
    description:
      - How messages are acknowledged. Cannot change later.
      - When the consumer is created and this is not set, V(explicit).
      - V(flow_control) (nats-server 2.14 and later) acknowledges by the flow control replies of a push consumer,
        as a durable sourcing consumer does (the C(consumer) of a stream's O(nats_edge.fleet.jetstream_stream#module:sources));
        it takes a O(deliver_subject), no O(ack_wait), O(backoff) or O(max_deliver), and the server sets
        O(flow_control) and an O(idle_heartbeat) of 1 second.
    type: str
    choices: [explicit, all, none, flow_control]
  ack_wait:
    description: How long the server waits for an acknowledgement before redelivering, like V(30s) or V(2m).
    type: raw
  max_deliver:
    description: How often a message is delivered at most; V(-1) for no limit.
    type: int
  backoff:
    description:
      - Redelivery delays, one per attempt, like V([1s, 5s, 30s]).
      - O(max_deliver) must allow for every step (on nats-server 2.9 it must exceed their number).
    type: list
    elements: raw
  filter_subject:
    description:
      - Deliver only messages whose subject matches this one (wildcards allowed).
      - An empty string removes the filter. Mutually exclusive with O(filter_subjects).
    type: str
  filter_subjects:
    description:
      - Several filter subjects (nats-server 2.10 or newer for more than one).
      - Compared as a set. Mutually exclusive with O(filter_subject).
    type: list
    elements: str
  replay_policy:
    description: Replay messages as fast as possible or with their original timing. Cannot change later.
    type: str
    choices: [instant, original]
  sample_freq:
    description: Percentage of acknowledgements to sample for observability, like V(50) or V(50%).
    type: raw
  max_ack_pending:
    description: Most messages delivered and not yet acknowledged; V(-1) for no limit.
    type: int
  inactive_threshold:
    description: Delete the consumer after it was inactive this long, like V(24h).
    type: raw
  headers_only:
    description: Deliver only the headers of messages (and their size), not the payload.
    type: bool
  num_replicas:
    description: Replicas of the consumer's state; V(0) follows the stream.
    type: int
  mem_storage:
    description: Keep the consumer's state in memory. Cannot change later on nats-server 2.14 and newer.
    type: bool
  metadata:
    description:
      - Metadata of the consumer as string keys and values (nats-server 2.10 or newer).
      - Compared as a whole, leaving out the C(_nats.) keys the server adds.
    type: dict
  max_waiting:
    description: Pull consumers. Most pull requests waiting at once. Cannot change later.
    type: int
  max_batch:
    description: Pull consumers. Largest batch one pull request may ask for; V(0) for no limit.
    type: int
  max_expires:
    description: Pull consumers. Longest expiry one pull request may ask for, like V(30s).
    type: raw
  max_bytes:
    description:
      - Pull consumers. Most bytes one pull request may ask for, in bytes or like V(1MiB).
      - As in nats-server's config, V(1M) is 1000000 and V(1MB) or V(1MiB) 1048576.
    type: raw
  deliver_subject:
    description:
      - Push consumers. Subject messages are pushed to; setting it makes the consumer a push consumer.
      - A consumer cannot switch between pull and push later; V('') asks for a pull consumer.
    type: str
  deliver_group:
    description: Push consumers. Queue group of the subscribers sharing the deliveries.
    type: str
  flow_control:
    description: Push consumers. Use flow control (needs O(idle_heartbeat)). Cannot change later.
    type: bool
  idle_heartbeat:
    description: Push consumers. Send a heartbeat after this long without messages, like V(5s). Cannot change later.
    type: raw
  rate_limit_bps:
    description: Push consumers. Delivery rate limit in bits per second; V(0) for none.
    type: int
  priority_groups:
    description:
      - Pull consumers. The priority groups a pull request names (each 1 to 16 letters, digits, C(-), C(_), C(/) or
        C(=)); needs O(priority_policy). Needs nats-server 2.11 or later.
    type: list
    elements: str
  priority_policy:
    description:
      - Pull consumers. How the groups of O(priority_groups) share the messages. V(pinned_client) delivers to one pinned
        client until it stops pulling for O(priority_timeout); V(overflow) only to requests that set a minimum of
        pending or unacknowledged messages; V(prioritized) to the requests with the lowest priority first (nats-server
        2.12 or later). V(none) for no groups. Needs nats-server 2.11 or later.
    type: str
    choices: [none, overflow, pinned_client, prioritized]
  priority_timeout:
    description:
      - Pull consumers. With O(priority_policy=pinned_client), how long a pinned client may go without pulling before
        another one is pinned, like V(2m). Needs nats-server 2.11 or later.
    type: raw
  pause_until:
    description:
      - Pause the consumer until this time (RFC 3339, like V(2026-12-01T06:00:00Z)); it delivers nothing until then.
      - A consumer that exists is paused (or its pause moved) in place with the server's pause request, not
        recreated. A pause whose time has passed counts as no pause, so later runs stay unchanged.
      - Needs nats-server 2.11 or later.
    type: str
  paused:
    description:
      - V(false) resumes a paused consumer now (leave O(pause_until) unset); V(true) only states that O(pause_until) is
        a pause and needs it. Unset, a declared O(pause_until) pauses and a consumer's pause is otherwise left as it is.
    type: bool
notes:
  - Requests use C(CONSUMER.CREATE.<stream>.<name>), which nats-server 2.9.10 and newer answer;
    from 2.10 the request says whether it creates or updates, so a run never overwrites a consumer
    it did not see.
  - In check mode the stream and consumer are read, nothing is sent, and RV(consumer) holds the
    config the run would send.
seealso:
  - module: nats_edge.fleet.jetstream_info
"""

EXAMPLES = r"""
---
- name: Durable pull consumer for the order workers
  nats_edge.fleet.jetstream_consumer:
    servers: nats://hub-1:4222
    domain: hub
    stream: ORDERS
    name: workers
    filter_subject: orders.created
    max_deliver: 5
    backoff: [1s, 10s, 1m]  # the first step is also the ack wait
    max_ack_pending: 1000

- name: Push consumer delivering to a queue group, with heartbeats and flow control
  nats_edge.fleet.jetstream_consumer:
    servers: nats://hub-1:4222
    domain: spoke-1
    stream: test
    name: forwarder
    deliver_subject: deliver.telemetry
    deliver_group: forwarders
    idle_heartbeat: 5s
    flow_control: true

- name: A durable pull consumer managed by another account, through its import of TEST's hub API
  nats_edge.fleet.jetstream_consumer:
    servers: nats://hub-1:4222
    creds: /etc/nats/ops.creds
    api_prefix: JS.test@hub.API
    stream: test-inbox
    name: DUR
    ack_policy: explicit
    deliver_policy: all
    max_ack_pending: 10000

- name: Start over from new messages, accepting that delivery state is lost
  nats_edge.fleet.jetstream_consumer:
    domain: hub
    stream: ORDERS
    name: workers
    deliver_policy: new
    on_immutable_change: recreate

- name: Remove a consumer
  nats_edge.fleet.jetstream_consumer:
    domain: hub
    stream: ORDERS
    name: workers
    state: absent
"""

RETURN = r"""
consumer:
  description:
    - The consumer as the server reports it after the run (config and delivery state).
    - Empty when it does not exist (any more). In check mode, the config the run would send
      for a create or update, else the consumer as it is.
  returned: always
  type: dict
  contains:
    stream_name:
      description: Stream of the consumer.
      type: str
    name:
      description: Name of the consumer.
      type: str
    config:
      description: The consumer's config in the API's units (durations in nanoseconds).
      type: dict
    created:
      description: When the consumer was created.
      type: str
    delivered:
      description: Last delivered consumer and stream sequence.
      type: dict
    ack_floor:
      description: Consumer and stream sequence below which everything is acknowledged.
      type: dict
    num_pending:
      description: Messages in the stream the consumer has not delivered yet.
      type: int
    num_ack_pending:
      description: Messages delivered and not acknowledged yet.
      type: int
    num_redelivered:
      description: Messages delivered more than once.
      type: int
    num_waiting:
      description: Pull requests waiting.
      type: int
    cluster:
      description: Leader and replicas, when the server reports them.
      type: dict
  sample:
    stream_name: ORDERS
    name: workers
    config: {durable_name: workers, ack_policy: explicit, ack_wait: 30000000000, max_deliver: 5}
    num_pending: 0
    num_ack_pending: 0
actions:
  description: The API requests this run sent, or in check mode would send, in order.
  returned: always
  type: list
  elements: dict
  contains:
    subject:
      description: Subject of the request.
      type: str
    body:
      description: Body of the request (null for none).
      type: dict
  sample:
    - subject: $JS.hub.API.CONSUMER.CREATE.ORDERS.workers
      body: {stream_name: ORDERS, action: update, config: {durable_name: workers, ack_wait: 30000000000}}
operation:
  description: What the run did (or would do) - V(none), V(create), V(update), V(recreate) or V(delete).
  returned: always
  type: str
  sample: update
changed_fields:
  description: Options whose value differed from the server's.
  returned: always
  type: list
  elements: str
  sample: [ack_wait]
diff:
  description: Before and after of the changed options, durations written as text.
  returned: when diff mode is on
  type: dict
  sample: {before: {ack_wait: 30s}, after: {ack_wait: 1m}}
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_model import ConsumerInputError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_apply import (
    ARGUMENT_SPEC, ConsumerFailure, ConsumerManager, checked_consumer, consumer_label)
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JetStream, NatsClient, nats_module, require_nats_py)


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True,
                         mutually_exclusive=[["filter_subject", "filter_subjects"]])
    params = module.params
    try:
        require_nats_py(params)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    label = consumer_label(params)
    try:
        desired = checked_consumer(module, params)
    except ConsumerInputError as exc:
        module.fail_json(msg="%s: %s" % (label, exc), field=exc.field, changed=False, actions=[])

    try:
        with NatsClient(params) as client:
            js = JetStream(client, domain=params.get("domain"), api_prefix=params.get("api_prefix"))
            result = ConsumerManager(module, js).run(desired)
    except ConsumerFailure as exc:
        fail_from(module, exc, actions=exc.result.get("actions", []))
    except NatsEdgeError as exc:
        module.fail_json(msg="%s: %s" % (label, exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
