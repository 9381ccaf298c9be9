"""The stream and replication report and the dot graph, from STREAM.INFO replies as servers sent them."""

import copy
import re

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import report_tables as ji
from ansible_collections.nats_edge.fleet.plugins.modules.jetstream_info import Report

SECOND = 10 ** 9
INACTIVE_AFTER = 10 * SECOND

# hub (2.15.1): "cnc" with subjects; "aggregate" sourcing the leaf's "test" and a stream of a domain that
# does not exist. The server lists sources in any order.
CNC = {
    "config": {"name": "cnc", "subjects": ["cnc.>"], "storage": "file", "num_replicas": 1,
               "metadata": {"_nats.ver": "2.15.1"}},
    "created": "2026-11-22T17:16:17.5Z",
    "state": {"messages": 3, "bytes": 111, "first_seq": 1, "last_seq": 3, "num_subjects": 1, "consumer_count": 1},
    "domain": "hub", "cluster": {"leader": "hub15"},
}
AGGREGATE = {
    "config": {"name": "aggregate", "storage": "file", "num_replicas": 1,
               "sources": [{"name": "test", "external": {"api": "$JS.leaf.API", "deliver": ""}},
                           {"name": "ghost", "external": {"api": "$JS.nowhere.API", "deliver": ""}}]},
    "state": {"messages": 3, "bytes": 333, "first_seq": 1, "last_seq": 3, "consumer_count": 0},
    "domain": "hub", "cluster": {"leader": "hub15"},
    "sources": [{"name": "ghost", "external": {"api": "$JS.nowhere.API", "deliver": ""}, "lag": 0, "active": -1},
                {"name": "test", "external": {"api": "$JS.leaf.API", "deliver": ""}, "lag": 0, "seq": 3,
                 "active": 527616434}],
}
# leaf (2.9.10): the mirror of the hub's "cnc"; 2.9 reports no cluster block for a single server.
RECV_CNC = {
    "config": {"name": "recv-cnc", "storage": "file", "num_replicas": 1,
               "mirror": {"name": "cnc", "external": {"api": "$JS.hub.API", "deliver": ""}}},
    "state": {"messages": 3, "bytes": 111, "first_seq": 1, "last_seq": 3, "consumer_count": 0},
    "domain": "leaf",
    "mirror": {"name": "cnc", "external": {"api": "$JS.hub.API", "deliver": ""}, "lag": 0, "active": 554259824},
}
TEST = {
    "config": {"name": "test", "subjects": ["test.>"], "storage": "memory", "num_replicas": 3,
               "placement": {"cluster": "edge", "tags": ["site:a"]}},
    "state": {"messages": 1500, "bytes": 3 * 1024 ** 2, "first_seq": 1, "last_seq": 1500, "num_deleted": 2,
              "consumer_count": 2},
    "domain": "leaf",
    "cluster": {"name": "edge", "leader": "leaf-1",
                "replicas": [{"name": "leaf-2", "current": True, "active": 120000000, "lag": 0},
                             {"name": "leaf-3", "current": False, "active": 9 * SECOND, "lag": 12}]},
}


def collect(*infos, **kwargs):
    streams, rows = [], []
    for info in infos:
        domain = ji.domain_of(info)
        streams.append(ji.stream_row(info, domain))
        rows.extend(ji.replication_rows(info, domain, kwargs.get("inactive_after", INACTIVE_AFTER)))
    return streams, rows


def test_stream_rows_carry_the_counts_and_the_leader():
    streams, _rows = collect(CNC, TEST)
    cnc, test = streams
    assert (cnc["name"], cnc["domain"], cnc["messages"], cnc["bytes"], cnc["consumers"], cnc["replicas"],
            cnc["leader"]) == ("cnc", "hub", 3, 111, 1, 1, "hub15")
    assert (test["deleted"], test["cluster"], test["leader"], test["storage"]) == (2, "edge", "leaf-1", "memory")
    assert test["peers"][1] == {"name": "leaf-3", "current": False, "lag": 12, "active": 9.0, "offline": False}


def test_mirror_across_domains():
    _streams, rows = collect(RECV_CNC)
    assert rows == [{
        "stream": "recv-cnc", "domain": "leaf", "kind": "mirror", "source": "cnc", "source_domain": "hub",
        "external_api": "$JS.hub.API", "deliver_prefix": None, "filter": None, "lag": 0, "active": 0.554,
        "seq": None, "error": None, "error_code": None, "origin_last_seq": None, "origin_messages": None,
        "behind": None, "ahead": None, "origin_error": None, "status": "ok"}]


def _row(kind="mirror", flt=None, status="ok"):
    return {"kind": kind, "filter": flt, "status": status}


def test_a_new_mirror_is_behind_its_origin_until_it_has_its_last_sequence():
    """The server says lag 0 and active now before the first message arrives."""
    origin = {"messages": 3, "first_seq": 4, "last_seq": 6}
    row = ji.apply_origin(_row(), {"messages": 0, "last_seq": 0}, origin)
    assert (row["behind"], row["status"], row["origin_last_seq"], row["origin_messages"]) == (6, "lagging", 6, 3)
    assert ji.origin_gap(_row(), {"last_seq": 5}, origin) == 1
    assert ji.origin_gap(_row(), {"last_seq": 6}, origin) == 0
    # copied past what the origin showed when read (messages kept arriving): caught up
    assert ji.origin_gap(_row(), {"last_seq": 9}, origin) == 0
    # an empty origin has nothing to wait for, whatever its sequences
    assert ji.origin_gap(_row(), {"last_seq": 0}, {"messages": 0, "last_seq": 6}) == 0


def test_a_source_or_filtered_copy_is_behind_only_while_it_has_nothing():
    origin = {"messages": 4, "last_seq": 9}
    assert ji.origin_gap(_row("source"), {"last_seq": 0}, origin) == 4
    # it has received something: its own sequences say nothing about the origin's, the server's lag rules
    assert ji.origin_gap(_row("source"), {"last_seq": 2}, origin) is None
    # starting later than the origin's messages, it may rightly stay empty
    assert ji.origin_gap(_row("source"), {"last_seq": 0}, origin, starts_late=True) is None
    # filtered: behind only when the origin holds messages the filter takes
    assert ji.origin_gap(_row("source", "test.a"), {"last_seq": 0}, origin, origin_has_matching=True) == 1
    assert ji.origin_gap(_row("source", "test.a"), {"last_seq": 0}, origin, origin_has_matching=False) == 0
    assert ji.origin_gap(_row("mirror", "test.a"), {"last_seq": 0}, origin, origin_has_matching=False) == 0
    assert ji.origin_gap(_row("mirror", "test.a"), {"last_seq": 0}, origin) is None


def test_the_origin_does_not_hide_a_worse_status():
    row = ji.apply_origin(_row(status="inactive"), {"last_seq": 0}, {"messages": 1, "last_seq": 1})
    assert (row["behind"], row["status"]) == (1, "inactive")
    assert ji.apply_origin(_row(), {"last_seq": 1}, {"messages": 1, "last_seq": 1})["status"] == "ok"


def test_a_copy_past_its_origins_last_sequence_is_an_error_naming_what_it_will_skip():
    # the origin came back shorter (a power cut): the copy had copied up to 2475, the origin's last is now 1595
    row = ji.apply_origin(dict(_row("source"), seq=2475), {"last_seq": 2475}, {"messages": 1595, "last_seq": 1595})
    assert (row["ahead"], row["status"]) == (880, "error")
    assert "copied up to sequence 2475, the origin's last is 1595; the origin's next 880 messages" in row["error"]
    # whatever the server says of the copy (inactive: its origin was away)
    row = ji.apply_ahead(dict(_row("source", status="inactive"), seq=2475), {"messages": 1595, "last_seq": 1595})
    assert (row["ahead"], row["status"]) == (880, "error")
    # level, behind, or a server that does not report the sequence: not ahead
    for seq in (1595, 1000, None):
        row = ji.apply_origin(dict(_row("source"), seq=seq), {"last_seq": 10}, {"messages": 1595, "last_seq": 1595})
        assert row["ahead"] == 0 and row["status"] != "error", row
    assert ji.apply_ahead(dict(_row("source"), seq=5), None)["ahead"] == 0


def test_replication_entries_pair_state_and_config_in_row_order():
    info = copy.deepcopy(AGGREGATE)
    info["config"]["sources"][0]["opt_start_seq"] = 7
    info["config"]["sources"][1]["subject_transforms"] = [{"src": "a.>", "dest": "b.>"}]
    entries = ji.replication_entries(info)
    assert [(kind, state["name"], config.get("opt_start_seq")) for kind, state, config in entries] == [
        ("source", "test", 7), ("source", "ghost", None)]
    assert entries[0][1]["active"] == 527616434
    assert [ji.entry_filters(config) for _kind, _state, config in entries] == [[], ["a.>"]]
    assert ji.entry_filters({"filter_subject": "x.*"}) == ["x.*"]
    assert [kind for kind, _s, _c in ji.replication_entries(RECV_CNC)] == ["mirror"]


def test_sources_follow_the_config_order_and_show_a_domain_that_never_answered():
    _streams, rows = collect(AGGREGATE)
    assert [(r["source"], r["source_domain"], r["active"], r["status"]) for r in rows] == [
        ("test", "leaf", 0.528, "ok"), ("ghost", "nowhere", None, "inactive")]


def test_sources_of_one_name_in_two_domains_keep_their_own_state():
    aggregate = {
        "config": {"name": "aggregate", "sources": [
            {"name": "test", "external": {"api": "$JS.spoke-1.API", "deliver": ""}},
            {"name": "test", "external": {"api": "$JS.spoke-2.API", "deliver": ""}}]},
        "state": {"messages": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "consumer_count": 0},
        "domain": "hub",
        "sources": [{"name": "test", "external": {"api": "$JS.spoke-2.API", "deliver": ""}, "lag": 7,
                     "active": SECOND},
                    {"name": "test", "external": {"api": "$JS.spoke-1.API", "deliver": ""}, "lag": 0,
                     "active": 2 * SECOND}],
    }
    _streams, rows = collect(aggregate)
    assert [(r["source_domain"], r["external_api"], r["lag"], r["active"]) for r in rows] == [
        ("spoke-1", "$JS.spoke-1.API", 0, 2.0), ("spoke-2", "$JS.spoke-2.API", 7, 1.0)]


def test_errors_lag_and_silence_set_the_status():
    info = copy.deepcopy(AGGREGATE)
    ghost, test = info["sources"]
    ghost.update(error={"code": 404, "err_code": 10059, "description": "stream not found"})
    test.update(active=SECOND)
    _streams, rows = collect(info)
    assert rows[0]["status"] == "ok"
    assert (rows[1]["status"], rows[1]["error"], rows[1]["error_code"]) == ("error", "stream not found", 10059)
    test.update(lag=7)
    _streams, rows = collect(info)
    assert rows[0]["status"] == "lagging"
    test.update(active=30 * SECOND)
    _streams, rows = collect(info)
    assert rows[0]["status"] == "inactive"


def test_source_domain():
    assert ji.source_domain({"api": "$JS.hub.API"}, "leaf") == "hub"
    assert ji.source_domain({"api": "$JS.hub.API."}, "leaf") == "hub"
    assert ji.source_domain(None, "leaf") == "leaf"
    assert ji.source_domain({"api": "JS.acc@hub.API"}, "leaf") == "JS.acc@hub.API"


def test_filters_and_transforms_are_shown():
    info = copy.deepcopy(AGGREGATE)
    info["config"]["sources"][0]["filter_subject"] = "test.a"
    info["config"]["sources"][1]["subject_transforms"] = [{"src": "x.>", "dest": "y.>"}]
    _streams, rows = collect(info)
    assert [r["filter"] for r in rows] == ["test.a", "x.> to y.>"]


def test_a_source_that_keeps_lagging_without_moving_is_stalled():
    first = copy.deepcopy(AGGREGATE)
    first["sources"][1].update(lag=50, seq=10)  # the source "test"
    first_streams, first_rows = collect(first)
    moving = copy.deepcopy(first)
    moving["sources"][1].update(lag=50, seq=20)
    stuck = copy.deepcopy(first)
    stuck["sources"][1].update(lag=55, seq=10)
    shrinking = copy.deepcopy(first)
    shrinking["sources"][1].update(lag=20, seq=10)
    for info, expected in ((moving, "lagging"), (stuck, "stalled"), (shrinking, "lagging")):
        streams, rows = collect(info)
        ji.mark_stalled(first_rows, rows, first_streams, streams)
        assert rows[0]["status"] == expected, info["sources"][1]


def test_without_source_sequences_the_receiving_stream_shows_progress():
    first = copy.deepcopy(RECV_CNC)
    first["mirror"]["lag"] = 9
    first_streams, first_rows = collect(first)
    same = copy.deepcopy(first)
    streams, rows = collect(same)
    ji.mark_stalled(first_rows, rows, first_streams, streams)
    assert rows[0]["status"] == "stalled"
    grown = copy.deepcopy(first)
    grown["state"]["last_seq"] = 5
    streams, rows = collect(grown)
    ji.mark_stalled(first_rows, rows, first_streams, streams)
    assert rows[0]["status"] == "lagging"


def test_report_has_a_stream_table_and_a_replication_table_per_domain():
    streams, rows = collect(CNC, AGGREGATE, RECV_CNC, TEST)
    lines = ji.render_report(streams, rows, ["hub", "leaf"])
    text = "\n".join(lines)
    assert lines[0] == "Stream Report: domain hub"
    assert text.index("Stream Report: domain hub") < text.index("Replication Report: domain hub") < \
        text.index("Stream Report: domain leaf") < text.index("Replication Report: domain leaf")
    assert re.search(r"\| aggregate \| Source \| \$JS\.nowhere\.API +\| ghost +\| +\| never +\| 0 +\| inactive", text)
    assert re.search(r"\| recv-cnc +\| Mirror \| \$JS\.hub\.API \| cnc +\| +\| 554ms +\| 0 +\| ok", text)
    assert re.search(r"\| test +\| Memory +\| cluster: edge tags: site:a \| 2 +\| 1,500 +\| 3 MiB +\| 2 +\| "
                     r"3: leaf-1\*, leaf-2, leaf-3! \| leaf-1 \|", text)
    table_lines = [line for line in lines if line.startswith(("|", "+"))]
    widths = set()
    for line in lines:
        if line.startswith("Stream Report") or line.startswith("Replication Report") or not line:
            widths = set()
        elif line.startswith(("|", "+")):
            widths.add(len(line))
            assert len(widths) == 1, "columns do not line up: %r" % line
    assert table_lines


def test_bytes_and_counts_read_like_nats_stream_report():
    assert [ji.format_bytes(n) for n in (0, 273, 1536, 10 * 1024 ** 3)] == ["0 B", "273 B", "1.5 KiB", "10 GiB"]
    assert ji.format_count(1234567) == "1,234,567"


def test_a_domain_without_streams_says_so():
    assert ji.render_report([], [], ["leaf"]) == ["Stream Report: domain leaf: no streams"]


def test_dot_graph_has_a_cluster_per_domain_and_an_edge_per_replication():
    streams, rows = collect(CNC, AGGREGATE, RECV_CNC, TEST)
    dot = ji.render_dot(streams, rows)
    assert dot.startswith('digraph "replication" {') and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    for domain in ("hub", "leaf", "nowhere"):
        assert 'label="domain %s";' % domain in dot
    assert '"hub/cnc" -> "leaf/recv-cnc" [label="mirror", color=blue];' in dot
    assert '"leaf/test" -> "hub/aggregate" [label="source", color=darkgreen];' in dot
    assert '"nowhere/ghost" -> "hub/aggregate" [label="source (inactive)", color=red, style=dashed];' in dot
    assert '"nowhere/ghost" [label="ghost", style=dashed];' in dot
    assert '"hub/cnc" [label="cnc"];' in dot


def test_dot_nodes_of_replicated_streams_say_where_the_replicas_live():
    info = copy.deepcopy(CNC)
    info["config"].update(num_replicas=3, placement={"tags": ["rg:2"], "cluster": "xr"})
    info["cluster"] = {"name": "xr", "leader": "n2a", "replicas": [{"name": "n2b", "current": True},
                                                                   {"name": "n2c", "current": True}]}
    streams, rows = collect(info, RECV_CNC)
    dot = ji.render_dot(streams, rows)
    assert '"hub/cnc" [label="cnc\\nR3 file, tags rg:2, cluster xr\\nn2a (leader), n2b, n2c"];' in dot, dot
    assert '"leaf/recv-cnc" [label="recv-cnc"];' in dot  # R1 without placement: the name alone


def test_dot_quotes_what_it_must():
    info = copy.deepcopy(RECV_CNC)
    info["config"]["name"] = 'we"ird'
    streams, rows = collect(info)
    assert '"leaf/we\\"ird"' in ji.render_dot(streams, rows)


def test_dot_for_an_imported_api_labels_the_prefix():
    info = copy.deepcopy(RECV_CNC)
    info["mirror"]["external"]["api"] = "JS.acc@hub.API"
    streams, rows = collect(info)
    assert 'label="JS.acc@hub.API";' in ji.render_dot(streams, rows)


class _Reader(object):
    """A domain's streams as scripted STREAM.INFO replies: the first read, then each read again."""

    def __init__(self, first, again):
        self.domain = "hub"
        self.infos = first
        self.again = dict((info["config"]["name"], info) for info in again)
        self.js = type("JS", (), {"prefix": "$JS.hub.API"})()

    def info(self, name):
        return self.again.get(name)


def _aggregate_info(lag):
    """A hub stream sourcing two spokes: spoke-1's source lags by ``lag``, spoke-2's is current."""
    sources = [{"name": "test", "external": {"api": "$JS.spoke-%d.API" % n}} for n in (1, 2)]
    return {"config": {"name": "aggregate", "sources": sources}, "state": {"messages": 20, "last_seq": 20},
            "sources": [dict(sources[0], lag=lag, active=1000000), dict(sources[1], lag=0, active=1000000)]}


def test_a_stream_read_again_by_recheck_keeps_its_current_sources_held_against_their_origins():
    report = Report(None, None, 30 * SECOND)
    reader = _Reader([_aggregate_info(lag=4)], [_aggregate_info(lag=2)])
    report.readers = [reader]
    report.streams = [ji.stream_row(reader.infos[0], "hub")]
    report.replication = ji.replication_rows(reader.infos[0], "hub", 30 * SECOND)
    # the origins as read once per run
    report.origins[("$JS.spoke-1.API", "test", ())] = ({"messages": 14, "last_seq": 14}, None, None)
    report.origins[("$JS.spoke-2.API", "test", ())] = ({"messages": 10, "last_seq": 10}, None, None)
    report.compare_origins()
    report.recheck(report.lagging())
    rows = dict((r["source_domain"], r) for r in report.replication)
    # spoke-1's source lags by the server's word; spoke-2's, read again, still shows its origin
    assert rows["spoke-1"]["lag"] == 2
    assert (rows["spoke-2"]["origin_last_seq"], rows["spoke-2"]["origin_messages"]) == (10, 10), rows["spoke-2"]


def test_unhealthy_servers_and_the_streams_their_errors_name():
    import json as _json
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_tables import (
        mark_frozen, unhealthy_servers)
    error = ("JetStream stream 'APP > TELEMETRY' write error: write /srv/js/1.blk: read-only file system")
    replies = [_json.dumps({"server": {"name": "edge-7", "domain": "spoke-7"},
                            "data": {"status": "unavailable", "error": error}}).encode(),
               _json.dumps({"server": {"name": "edge-8", "domain": "spoke-8"}, "data": {"status": "ok"}}).encode(),
               b"not json"]
    unhealthy = unhealthy_servers(replies)
    assert unhealthy == [{"server": "edge-7", "domain": "spoke-7", "status": "unavailable", "error": error}]
    streams = [{"name": "TELEMETRY", "domain": "spoke-7"}, {"name": "TELEMETRY", "domain": "spoke-8"},
               {"name": "OTHER", "domain": "spoke-7"}]
    mark_frozen(streams, unhealthy)
    assert [s.get("health_error") for s in streams] == [error, None, None]
