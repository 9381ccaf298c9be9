#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_consumer_repair
short_description: Put right the consumers a power cut left ahead of their stream
description:
  - A stream that loses its last, unsynced writes in a power cut (see the nats_server role's C(sync_interval)) can
    come back with a last sequence below what its consumers had acknowledged. Such a consumer waits for a sequence
    past the stream's last and receives nothing, the new messages included (nats-server issue 5412).
    M(nats_edge.fleet.jetstream_info) reports them (its C(consumers_ahead)); this module puts them right.
  - Reads every consumer of the streams of the domain (O(streams), default all) and repairs each whose ack floor or
    delivered sequence is past its stream's last sequence; every other consumer is left alone, so a second run
    changes nothing.
  - Where the servers have the consumer reset API (nats-server 2.14 or newer, a deliver policy of V(all),
    V(by_start_sequence) or V(by_start_time)), the consumer is reset to the sequence after the stream's last
    (C($JS.API.CONSUMER.RESET)).
  - Elsewhere a pull consumer is created again with its own config, and what its stream still holds up to its last
    sequence - what the consumer had acknowledged before the cut - is acknowledged on the module's own connection,
    so its application receives only what is new. The first message past that is given back at once.
  - To tell what the stream held before the cut from what was published since the restart, a message counts as
    before the cut only when it was stored no later than the consumer's last activity, where the server reports it.
    nats-server 2.9 reports none after a restart; there every message up to the stream's last sequence counts, with
    a warning, so run the repair before the site's publishers resume.
  - A push consumer, or one with ack policy V(none), on a server older than 2.14 is refused, naming it and why
    (creating it again would deliver again what the stream holds); nothing is changed.
  - nats-server 2.14 and newer put an R1 consumer right by themselves as they start; replicated consumers and older
    servers need this module.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
attributes:
  check_mode:
    support: full
    description: Reads the streams and their consumers and returns the consumers it would repair and how; sends no
      change.
  diff_mode:
    support: none
    description: Returns no diff; RV(repaired) names each consumer with its positions before the repair.
  idempotent:
    support: full
    description: A consumer put right is no longer ahead of its stream; a second run finds nothing to repair.
options:
  streams:
    description: The streams whose consumers are checked. Left out, every stream of the account in the domain.
    type: list
    elements: str
notes:
  - Run it after a site's server comes back from an unclean stop, before its applications resume (their
    consumers' pending messages are cleared by a repair).
seealso:
  - module: nats_edge.fleet.jetstream_info
  - module: nats_edge.fleet.jetstream_consumer
"""

EXAMPLES = r"""
---
- name: Put right the consumers a power cut left ahead of their streams at the site
  nats_edge.fleet.jetstream_consumer_repair:
    servers: nats://edge-1.example.net:4222
    creds: /etc/fleet/admin.creds
    domain: spoke-1
  register: repair

- name: Say which were repaired, and how
  ansible.builtin.debug:
    msg: "{{ repair.repaired | map(attribute='consumer') | list }}"
  when: repair.changed
"""

RETURN = r"""
repaired:
  description:
    - Each consumer put right (or, in check mode, that would be) - C(domain), C(stream), C(consumer), C(ack_floor),
      C(delivered) and C(last_seq) as found, C(replicas), C(push), C(how) (V(reset) or V(recreate)) and
      C(acknowledged), the messages the repair acknowledged for a consumer created again.
  returned: always
  type: list
  elements: dict
  sample: [{"domain": "spoke-1", "stream": "telemetry", "consumer": "uploader", "ack_floor": 1500,
            "delivered": 1500, "last_seq": 1420, "replicas": 1, "push": false, "how": "recreate",
            "acknowledged": 1420}]
actions:
  description: The JetStream API requests the run made (or, in check mode, would make).
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_repair import (
    ConsumerRepair, last_active_ns, repair_way, row_text)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_reader import DomainReader
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    NatsClient, nats_module, require_nats_py)
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import check_name

ARGUMENT_SPEC = dict(streams=dict(type="list", elements="str"))


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True)
    p = module.params
    try:
        for name in p["streams"] or ():
            try:
                check_name(name)
            except ValueError as exc:
                raise NatsEdgeError("streams: %r is not a stream name: %s" % (name, exc)) from exc
        require_nats_py(p)
    except NatsEdgeError as exc:
        fail_from(module, exc, repaired=[], actions=[])
    repaired, reader = [], None
    try:
        with NatsClient(p) as client:
            reader = DomainReader(client, domain=p.get("domain"), api_prefix=p.get("api_prefix"))
            infos = reader.read(p["streams"])
            missing = sorted(set(p["streams"] or ()) - set(info["config"]["name"] for info in infos))
            if missing:
                raise NatsEdgeError("stream%s %s not found %s" % (
                    "s" if len(missing) > 1 else "", ", ".join(repr(m) for m in missing), reader.js.where()))
            repair = ConsumerRepair(client, reader.js, module.check_mode)
            found = repair.ahead(infos, reader.label())
            account = reader.js.call("INFO") if found else None
            ways = []
            for row, consumer in found:  # every one decided before the first is changed
                try:
                    ways.append(repair_way(consumer.get("config") or {}, account))
                except NatsEdgeError as exc:
                    raise NatsEdgeError("%s: %s; nothing was changed" % (row_text(row), exc)) from exc
            for (row, consumer), how in zip(found, ways):
                try:
                    repaired.append(repair.repair(row, consumer, how))
                except NatsEdgeError as exc:
                    raise NatsEdgeError("%s: %s" % (row_text(row), exc)) from exc
                if how == "recreate" and last_active_ns(consumer) is None:
                    module.warn("consumer %r of stream %r: the server tells no time of its last activity, so what "
                                "the stream holds up to sequence %d counts as acknowledged before the stop; a message "
                                "published since the restart among them is not delivered (run the repair before the "
                                "site's publishers resume)" % (row["consumer"], row["stream"], row["last_seq"]))
    except (NatsEdgeError, OSError) as exc:
        fail_from(module, exc, changed=bool(repaired) and not module.check_mode, repaired=repaired,
                  actions=reader.js.actions if reader else [])
    module.exit_json(changed=bool(repaired), repaired=repaired, actions=reader.js.actions)


if __name__ == "__main__":
    main()
