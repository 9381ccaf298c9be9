# -*- coding: utf-8 -*-
"""Which consumers a power cut left ahead of their stream, and how each is put right (pure logic)."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _nats_client
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import consumer_repair as repair
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_tables import render_report, stream_row

STREAM = {"config": {"name": "TELEMETRY", "num_replicas": 1}, "state": {"last_seq": 10, "consumer_count": 1}}


def consumer(floor, delivered, given=5, **config):
    return {"stream_name": "TELEMETRY", "name": "uploader", "ack_floor": {"stream_seq": floor},
            "delivered": {"stream_seq": delivered, "consumer_seq": given},
            "config": dict({"durable_name": "uploader"}, **config)}


def test_a_consumer_past_its_streams_last_sequence_is_ahead():
    row = repair.ahead_row(STREAM, consumer(15, 15), "spoke", None)
    assert row == {"domain": "spoke", "account": None, "stream": "TELEMETRY", "consumer": "uploader",
                   "ack_floor": 15, "delivered": 15, "last_seq": 10, "replicas": 1, "push": False}
    assert repair.row_text(row) == ("consumer 'uploader' of stream 'TELEMETRY' in domain spoke: ack floor 15, "
                                    "delivered 15, past the stream's last sequence 10")
    # delivered past it alone is enough; at the last sequence, or behind it, is not
    assert repair.ahead_row(STREAM, consumer(8, 12))["delivered"] == 12
    assert repair.ahead_row(STREAM, consumer(10, 10)) is None
    assert repair.ahead_row(STREAM, consumer(0, 0)) is None
    assert repair.ahead_row(STREAM, consumer(15, 15, deliver_subject="out"))["push"] is True
    # a consumer that starts past the last sequence and has delivered nothing yet waits on purpose (as the server
    # reports one with opt_start_seq 100 on a stream of 10: ack floor and delivered 99)
    assert repair.ahead_row(STREAM, consumer(99, 99, given=0, deliver_policy="by_start_sequence",
                                             opt_start_seq=100)) is None


LEVEL_4 = {"api": {"level": 4}}  # nats-server 2.14
LEVEL_3 = {"api": {"level": 3}}  # 2.12.5 (the level pins the minor release only)


@pytest.mark.parametrize("config, account, way", [
    ({}, LEVEL_4, "reset"),
    ({"deliver_policy": "by_start_sequence", "opt_start_seq": 3}, LEVEL_4, "reset"),
    ({"deliver_subject": "out"}, LEVEL_4, "reset"),
    ({"deliver_policy": "last_per_subject"}, LEVEL_4, "recreate"),
    ({}, LEVEL_3, "recreate"),
    ({"ack_policy": "all"}, {}, "recreate"),
    ({"deliver_policy": "new"}, None, "recreate"),
])
def test_the_reset_where_the_server_has_it_else_the_consumer_is_created_again(config, account, way):
    assert repair.repair_way(config, account) == way


@pytest.mark.parametrize("config, account, words", [
    ({"durable_name": "out", "deliver_subject": "deliver.out"}, LEVEL_3,
     "consumer 'out' is a push consumer: creating it again would deliver again what its stream holds; on "
     "nats-server 2.14 or newer the consumer reset puts it right (the servers run 2.12.0 or newer), or delete it"),
    ({"durable_name": "fire", "ack_policy": "none"}, None, "consumer 'fire' has ack_policy none"),
    ({"durable_name": "out", "deliver_subject": "d", "deliver_policy": "new"}, LEVEL_4, "is a push consumer"),
])
def test_what_cannot_be_put_right_without_delivering_again_is_refused_naming_it(config, account, words):
    with pytest.raises(repair.RepairError, match=words.replace("(", r"\(").replace(")", r"\)")):
        repair.repair_way(config, account)


def test_the_last_activity_is_the_later_of_delivery_and_acknowledgement():
    info = {"delivered": {"last_active": "2026-11-29T01:00:00.5Z"}, "ack_floor": {"last_active": "2026-11-29T01:00:01Z"}}
    assert repair.last_active_ns(info) == 1795914001 * 10**9
    assert repair.last_active_ns({"delivered": {"last_active": "2026-11-29T01:00:00.5Z"}}) == 1795914000 * 10**9 + 5 * 10**8
    assert repair.last_active_ns({"delivered": {"stream_seq": 3}}) is None
    assert repair.last_active_ns({"delivered": {"last_active": "soon"}}) is None


def test_a_consumer_is_created_again_with_its_own_config_and_name():
    info = dict(consumer(15, 15, ack_policy="explicit"), created="2026-11-29T01:00:00Z")
    info["config"]["created"] = "x"
    assert repair.create_subject(info) == "CONSUMER.DURABLE.CREATE.TELEMETRY.uploader"
    assert repair.create_body(info) == {"stream_name": "TELEMETRY", "config": {
        "durable_name": "uploader", "ack_policy": "explicit"}}
    stamped = dict(info, config=dict(info["config"], metadata={"_nats.ver": "2.12.8", "_nats.level": "1", "team": "a"}))
    assert repair.create_body(stamped)["config"]["metadata"] == {"team": "a"}  # the server writes its own again
    only = dict(info, config=dict(info["config"], metadata={"_nats.ver": "2.12.8"}))
    assert "metadata" not in repair.create_body(only)["config"]
    named = {"stream_name": "S", "name": "n", "config": {"name": "n"}}
    assert repair.create_subject(named) == "CONSUMER.CREATE.S.n"


def test_a_deliverys_reply_subject_tells_the_stream_sequence_and_when_it_was_stored():
    v1 = "$JS.ACK.TELEMETRY.uploader.1.11.3.1795914001000000000.4"
    v2 = "$JS.ACK.spoke.HASH.TELEMETRY.uploader.1.11.3.1795914001000000000.4"
    for reply in (v1, v2):
        assert _nats_client._stream_sequence(reply) == 11
        assert _nats_client._stored_at(reply) == 1795914001000000000
    assert _nats_client._stored_at("_INBOX.x") is None


def test_the_report_has_a_table_of_the_consumers_ahead():
    row = repair.ahead_row(STREAM, consumer(15, 15), "spoke", None)
    stream = stream_row(STREAM, "spoke")
    lines = render_report([stream], [], ["spoke"], consumers_ahead=[row])
    at = lines.index(next(line for line in lines if line.startswith("Consumers Ahead of Their Stream: domain spoke")))
    assert "uploader" in "".join(lines[at:]) and "15" in "".join(lines[at:])
    assert not any("Consumers Ahead" in line for line in render_report([stream], [], ["spoke"]))
