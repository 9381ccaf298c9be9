# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Consumers ahead of their stream: what an unclean stop (a power cut) can leave behind. The stream loses the
writes it had not synced while the consumer's state kept its ack floor, so the consumer waits for a sequence past
the stream's last and receives nothing, the new messages included (nats-server#5412). nats-server 2.14 and newer put
an R1 consumer right as they start; older ones, and replicated consumers, stay stuck.

Finding them is pure (``ahead_row``, ``repair_way``); ``ConsumerRepair`` reads a domain's consumers and puts
right those it finds: with the consumer reset API where the server has it (2.14+), else by creating the consumer
again with its own config and acknowledging, on the repair's own connection, what the stream still holds up to its
last sequence, so the application receives only what is new. Private to the collection: jetstream_info reports with
it, jetstream_consumer_repair repairs with it.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import epoch_seconds
from ansible_collections.nats_edge.fleet.plugins.module_utils._versions import SERVER_METADATA_PREFIX, account_level_version

# the first release with $JS.API.CONSUMER.RESET (and that reconciles an R1 consumer as it starts)
RESET_SINCE = (2, 14, 0)
# deliver policies the reset API takes a sequence for (consumer.go resetStartingSeqLocked)
RESET_POLICIES = ("all", "by_start_sequence", "by_start_time")
# what a consumer's info holds that its create request does not take
_INFO_ONLY = ("created",)


class RepairError(NatsEdgeError):
    """A consumer ahead of its stream that cannot be put right here, worded for the user."""


def _seq(info, key):
    return int(((info or {}).get(key) or {}).get("stream_seq") or 0)


def ahead_row(stream_info, consumer_info, domain=None, account=None):
    """The row of a consumer whose ack floor or delivered sequence is past its stream's last sequence, else None:
    domain, account, stream, consumer, ack_floor, delivered, last_seq, replicas, push (it has a deliver subject)."""
    last = int(((stream_info or {}).get("state") or {}).get("last_seq") or 0)
    floor, delivered = _seq(consumer_info, "ack_floor"), _seq(consumer_info, "delivered")
    if floor <= last and delivered <= last:
        return None
    if not int((consumer_info.get("delivered") or {}).get("consumer_seq") or 0):
        return None  # it has delivered nothing: a start past the last sequence (opt_start_seq) is its own choice
    config = consumer_info.get("config") or {}
    return dict(domain=domain, account=account, stream=consumer_info.get("stream_name"),
                consumer=consumer_info.get("name"), ack_floor=floor, delivered=delivered, last_seq=last,
                replicas=config.get("num_replicas") or ((stream_info.get("config") or {}).get("num_replicas") or 1),
                push=bool(config.get("deliver_subject")))


def row_text(row):
    return "consumer %r of stream %r%s: ack floor %d, delivered %d, past the stream's last sequence %d" % (
        row["consumer"], row["stream"], " in domain %s" % row["domain"] if row.get("domain") else "",
        row["ack_floor"], row["delivered"], row["last_seq"])


def repair_way(config, account_info):
    """How a consumer of ``config`` ahead of its stream is put right on the servers ``account_info`` (a
    $JS.API.INFO reply) tells of: ``reset`` (2.14+, a deliver policy the reset takes), else ``recreate`` (a
    pull consumer whose messages are acknowledged: each, or the last for ack policy all). Anything else raises
    RepairError naming the consumer's setting that stands in the way."""
    level = account_level_version(account_info)
    policy = config.get("deliver_policy") or "all"
    if level and level >= RESET_SINCE and policy in RESET_POLICIES:
        return "reset"
    name = config.get("durable_name") or config.get("name")
    if config.get("deliver_subject"):
        raise RepairError("consumer %r is a push consumer: creating it again would deliver again what its stream "
                          "holds; on nats-server 2.14 or newer the consumer reset puts it right (the servers run "
                          "%s), or delete it and create it with deliver_policy new" % (
                              name, _version_text(level)))
    if (config.get("ack_policy") or "explicit") == "none":
        raise RepairError("consumer %r has ack_policy none: what it is given cannot be told from what it was given "
                          "before; on nats-server 2.14 or newer the consumer reset puts it right (the servers run "
                          "%s)" % (name, _version_text(level)))
    return "recreate"


def _version_text(level):
    return "%s or newer" % ".".join(str(n) for n in level) if level else "an older release than 2.11"


def last_active_ns(info):
    """The last time the consumer delivered or had a message acknowledged before the stop (ns since the epoch),
    from its info (nats-server 2.10 and newer report it); None when it tells none. Every message the stream still
    holds from before the stop was stored no later than that, every message published since the restart later."""
    times = [((info or {}).get(key) or {}).get("last_active") for key in ("delivered", "ack_floor")]
    found = []
    for text in times:
        try:
            found.append(int(round(epoch_seconds(text) * 10**9)) if text else None)
        except ValueError:
            found.append(None)
    found = [n for n in found if n]
    return max(found) if found else None


def create_body(info):
    """The create request of a consumer, from its info: its config as the server has it, for the same name, without
    the metadata the server writes itself (``_nats.`` keys, which it sets again)."""
    config = dict((k, v) for k, v in (info.get("config") or {}).items() if k not in _INFO_ONLY)
    metadata = dict((k, v) for k, v in (config.get("metadata") or {}).items()
                    if not k.startswith(SERVER_METADATA_PREFIX))
    if "metadata" in config:
        config["metadata"] = metadata
        if not metadata:
            del config["metadata"]
    return {"stream_name": info["stream_name"], "config": config}


def create_subject(info):
    config = info.get("config") or {}
    if config.get("durable_name"):
        return "CONSUMER.DURABLE.CREATE.%s.%s" % (info["stream_name"], config["durable_name"])
    return "CONSUMER.CREATE.%s.%s" % (info["stream_name"], info["name"])


class ConsumerRepair(object):
    """The consumers of a domain's streams ahead of their stream, read over one JetStream API, and their repair."""

    def __init__(self, client, js, check_mode=False):
        self.client = client
        self.js = js
        self.check_mode = check_mode

    def ahead(self, stream_infos, domain=None, account=None):
        """(row, consumer info) of every consumer ahead of its stream, of the streams that have consumers."""
        out = []
        for info in stream_infos:
            if not ((info.get("state") or {}).get("consumer_count")):
                continue
            for consumer in self.js.every_page("CONSUMER.LIST.%s" % info["config"]["name"], "consumers"):
                row = ahead_row(info, consumer, domain, account)
                if row:
                    out.append((row, consumer))
        return out

    def repair(self, row, consumer, how):
        """Put one consumer right the way ``how`` (repair_way: reset or recreate) says; the row with ``how`` and
        ``acknowledged`` (messages the repair acknowledged for it). In check mode the requests are noted (the
        JetStream's actions), not sent."""
        out = dict(row, how=how, acknowledged=0)
        stream, name = row["stream"], row["consumer"]
        if how == "reset":
            # to the sequence after the stream's last (what the stream holds was acknowledged before the stop), not
            # below the consumer's own start
            start = int((consumer.get("config") or {}).get("opt_start_seq") or 0)
            self.js.change("CONSUMER.RESET.%s.%s" % (stream, name), {"seq": max(row["last_seq"] + 1, start)},
                           self.check_mode)
            return out
        self.js.change("CONSUMER.DELETE.%s.%s" % (stream, name), None, self.check_mode)
        self.js.change(create_subject(consumer), create_body(consumer), self.check_mode)
        if not self.check_mode:
            # what the stream held before the stop: up to its last sequence and, where the server tells when the
            # consumer was last active, stored by then (a message published since the restart is not)
            out["acknowledged"] = self.client.acknowledge_through(
                self.js.prefix, stream, name, row["last_seq"],
                (consumer["config"].get("ack_policy") or "explicit") == "all", last_active_ns(consumer))
        return out
