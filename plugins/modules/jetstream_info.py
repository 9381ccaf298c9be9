#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_info
short_description: Streams and their replication across JetStream domains, like C(nats stream report)
description:
  - Reads every stream (or the ones named) of one or several JetStream domains over one
    connection (and those of other accounts over one connection per account, O(accounts)) and
    reports, per stream, messages, bytes, consumers, replicas and leader.
  - Reports every mirror and source with its kind, external API prefix, origin stream, when it
    was last active, its lag and the server's error, and a status that flags inactive, lagging
    and (with O(recheck_after)) stalled replication.
  - Renders the same as text tables (RV(report)) and the replication graph in Graphviz dot (RV(dot)).
author: nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.read_only
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
options:
  domains:
    description:
      - JetStream domains to report, each through C($JS.<domain>.API), over one connection.
      - Without it, the one domain of O(domain) or O(api_prefix), else the local one.
      - Mutually exclusive with O(domain) and O(api_prefix).
    type: list
    elements: str
  streams:
    description:
      - Report only these streams (in every domain that has them). Default is all streams.
      - A name that no reported domain has is an error.
    type: list
    elements: str
  accounts:
    description:
      - Streams of other accounts to read in the same run, each account through a connection of its own with its
        creds (to the task's O(servers), with the task's other connection options), in the domains the task reads.
      - The task's own connection reads O(streams) as before; the rows each item reads carry its name in
        RV(streams[].account) and RV(replication[].account), and RV(report) has a table per account.
      - With O(recheck_after), the run waits once for every account.
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the account, for the rows and the report.
        type: str
        required: true
      creds:
        description: Creds file of a user of the account.
        type: path
        required: true
      streams:
        description: As O(streams), for this account.
        type: list
        elements: str
  inactive_after:
    description:
      - A mirror or source not heard from for longer than this (or never) has status V(inactive),
        like V(10s) or V(1m). Healthy ones hear from their origin about every second.
    type: raw
    default: 10s
  recheck_after:
    description:
      - Read the streams that lag again after this long, like V(3s). A mirror or source whose lag
        did not shrink and whose position did not move in between gets status V(stalled), which
        is what a source whose flow control goes unanswered (a missing C($JS.FC) export between
        accounts) looks like.
      - Unset, nothing is read twice.
    type: raw
  compare_origins:
    description:
      - Also read the origin of every mirror and source the server reports as current, after the
        copy itself, through the copy's external API prefix (else the copy's own domain), and give
        status V(lagging) to a copy that has not reached it yet (RV(replication[].behind)).
      - The server counts lag from the last message it delivered, so a mirror or source created a
        moment ago shows lag 0 and a fresh C(active) before its first message arrives; this tells
        it from one that is current. Use it to wait for new copies to fill.
      - An unfiltered mirror is behind while its last sequence is below its origin's. A source, or a
        filtered mirror, is behind while it has stored nothing and its origin holds messages it
        takes; once it has stored something, the server's lag decides.
      - A copy that looks behind is read once more after its origin, so the newest messages of a
        busy origin, still in flight, do not hold it back.
      - An origin that cannot be read (an API import that does not cover C(STREAM.INFO)) leaves the
        status as the server gives it, with RV(replication[].origin_error).
      - A copy that has copied past its origin's last sequence (RV(replication[].ahead)), whatever its status, gets
        status V(error), as it will skip the origin's next messages.
    type: bool
    default: false
  consumers:
    description:
      - Also read the consumers of every stream reported that has any (one request per such stream) and report
        those whose ack floor or delivered sequence is past their stream's last sequence (RV(consumers_ahead)),
        each with a warning. A stream that lost its last writes in a power cut leaves its consumers so; they
        receive nothing, the new messages included, until M(nats_edge.fleet.jetstream_consumer_repair) puts them
        right. nats-server 2.14 and newer put an R1 consumer right as they start.
    type: bool
    default: true
  system_creds:
    description:
      - Creds file of a user of the system account. With it, the run also asks every server for its health
        (C($SYS.REQ.SERVER.PING.HEALTHZ), what C(/healthz) says, over a connection of its own to the task's
        O(servers)) and reports each that is not healthy in RV(unhealthy), with a warning. A stream that a server
        names in its health error - nats-server 2.14 and newer freeze a stream whose store fails its writes, such
        as failing flash turned read-only - gets that error in RV(streams[].health_error).
    type: path
notes:
  - A domain that does not answer is listed in RV(unanswered) with a warning; the module fails
    only when none answers. The key is not called C(unreachable), which Ansible would read as the host
    being unreachable, stopping the play.
  - Status is V(error) when the server reports an error for a mirror or source, V(inactive)
    when it has not been active within O(inactive_after), V(stalled) (see O(recheck_after)),
    V(lagging) when messages are still to be copied, else V(ok).
seealso:
  - module: nats_edge.fleet.jetstream_consumer
"""

EXAMPLES = r"""
---
- name: Report the hub and two edge domains in one run
  nats_edge.fleet.jetstream_info:
    servers: nats://hub-1:4222
    domains: [hub, spoke-1, spoke-2]
    recheck_after: 3s
  register: js

- name: Show the report
  ansible.builtin.debug:
    msg: "{{ js.report }}"

- name: Keep the replication graph (render with `dot -Tsvg`)
  ansible.builtin.copy:
    content: "{{ js.dot }}"
    dest: /tmp/replication.dot
  delegate_to: localhost

- name: Fail when replication is unhealthy
  ansible.builtin.assert:
    that: js.replication | rejectattr('status', 'in', ['ok', 'lagging']) | list | length == 0
    fail_msg: "{{ js.replication | rejectattr('status', 'in', ['ok', 'lagging']) | list }}"

- name: Wait until the copies just created hold what their origins hold
  nats_edge.fleet.jetstream_info:
    servers: nats://hub-1:4222
    domain: spoke-1
    streams: [recv-cnc]
    compare_origins: true
  register: copies
  until: copies.replication | rejectattr('status', 'eq', 'ok') | list | length == 0
  retries: 30
  delay: 1

- name: Wait for the copies of two accounts in the hub, in one run
  nats_edge.fleet.jetstream_info:
    servers: nats://hub-1:4222
    domain: hub
    creds: /etc/nats/admin.creds
    streams: [aggregate]
    accounts:
      - {name: OPS, creds: /etc/nats/ops.creds, streams: [audit-copy]}
    compare_origins: true
  register: copies
  until: copies.replication | rejectattr('status', 'eq', 'ok') | list | length == 0
  retries: 30
  delay: 1

- name: One stream, read through the JetStream API imported from another account
  nats_edge.fleet.jetstream_info:
    servers: nats://hub-1:4222
    creds: /etc/nats/ops.creds
    api_prefix: JS.test@hub.API
    streams: [test-inbox]
"""

RETURN = r"""
streams:
  description: One entry per stream, domain and account, sorted by domain, name and account.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Stream name.
      type: str
    domain:
      description: JetStream domain it was read from (C((local)) when the servers have none).
      type: str
    account:
      description: The O(accounts[].name) it was read as; null for the task's own connection.
      type: str
    storage:
      description: V(file) or V(memory).
      type: str
    subjects:
      description: The stream's subjects.
      type: list
      elements: str
    messages:
      description: Messages stored.
      type: int
    bytes:
      description: Bytes stored.
      type: int
    first_seq:
      description: First sequence stored.
      type: int
    last_seq:
      description: Last sequence stored.
      type: int
    deleted:
      description: Deleted messages between first and last sequence.
      type: int
    consumers:
      description: Number of consumers.
      type: int
    replicas:
      description: Configured replicas.
      type: int
    leader:
      description: Server leading the stream.
      type: str
    health_error:
      description:
        - The health error of a server that names the stream (its store failed a write, and the server froze the
          stream); only with O(system_creds), only on such a stream.
      type: str
    cluster:
      description: Cluster the stream lives in, when clustered.
      type: str
    peers:
      description: The other replicas, with C(name), C(current), C(lag), C(active) (seconds) and C(offline).
      type: list
      elements: dict
    placement:
      description: Placement of the stream's config (cluster, tags), if any.
      type: dict
    mirror:
      description: Name of the stream it mirrors, if any.
      type: str
    sources:
      description: Names of the streams it sources from.
      type: list
      elements: str
    created:
      description: When the stream was created.
      type: str
replication:
  description: One entry per mirror or source of the reported streams.
  returned: always
  type: list
  elements: dict
  contains:
    stream:
      description: The stream receiving the messages.
      type: str
    domain:
      description: Its domain.
      type: str
    account:
      description: The O(accounts[].name) it was read as; null for the task's own connection.
      type: str
    kind:
      description: V(mirror) or V(source).
      type: str
    source:
      description: The origin stream.
      type: str
    source_domain:
      description: Domain of the origin (from C($JS.<domain>.API)), else its external API prefix.
      type: str
    external_api:
      description: External API prefix the origin is read through, if any.
      type: str
    deliver_prefix:
      description: External delivery prefix, if any.
      type: str
    filter:
      description: Filter subject or subject transforms, if any.
      type: str
    active:
      description: Seconds since the origin was last heard from; null for never.
      type: float
    lag:
      description: Messages of the origin not copied yet.
      type: int
    seq:
      description: Last origin sequence copied, where the server reports it.
      type: int
    origin_last_seq:
      description: Last sequence of the origin, with O(compare_origins); else null.
      type: int
    origin_messages:
      description: Messages in the origin, with O(compare_origins); else null.
      type: int
    behind:
      description:
        - With O(compare_origins), the messages of the origin the copy still misses (for a filtered
          copy, at least this many); null when the states cannot tell or without the option.
      type: int
    ahead:
      description:
        - With O(compare_origins), how far the copy has copied past its origin's last sequence (it reports the origin
          sequence it copied last on nats-server 2.10 and newer). An origin that came back shorter, as a power cut
          leaves it, gives its new messages the lost ones' sequences, and the copy skips that many of them without an
          error of its own; such a copy gets status V(error), RV(replication[].error) saying so, and a warning.
          0 when not ahead; null without the option or when the server does not tell.
      type: int
    origin_error:
      description: Why the origin could not be read, with O(compare_origins); else null.
      type: str
    error:
      description: The server's error for this mirror or source, if any.
      type: str
    error_code:
      description: The JetStream error code of RV(replication[].error).
      type: int
    status:
      description: V(ok), V(lagging), V(inactive), V(stalled) or V(error).
      type: str
  sample:
    - {stream: recv-cnc, domain: leaf, kind: mirror, source: cnc, source_domain: hub,
       external_api: $JS.hub.API, active: 0.58, lag: 0, error: null, status: ok}
report:
  description: Text tables like C(nats stream report), per domain; one line per item.
  returned: always
  type: list
  elements: str
dot:
  description:
    - The replication graph in Graphviz dot; one cluster per domain, edges from origin to receiver.
    - A replicated or placed stream's node also shows its replicas, storage, placement and the servers
      holding it, leader first.
  returned: always
  type: str
domains:
  description: The domains reported.
  returned: always
  type: list
  elements: str
unanswered:
  description: Domains that did not answer, with C(domain) and C(error).
  returned: always
  type: list
  elements: dict
unhealthy:
  description:
    - The servers that are not healthy (see O(system_creds)) - C(server), C(domain), C(status) and C(error), as
      their C(/healthz) says. Empty without O(system_creds).
  returned: always
  type: list
  elements: dict
  sample: [{"server": "edge-7", "domain": "spoke-7", "status": "unavailable",
            "error": "JetStream stream '$G > telemetry' write error: ... read-only file system"}]
consumers_ahead:
  description:
    - Consumers whose ack floor or delivered sequence is past their stream's last sequence (see O(consumers)) -
      C(domain), C(account), C(stream), C(consumer), C(ack_floor), C(delivered), C(last_seq), C(replicas) and
      C(push) (it has a deliver subject). Empty with O(consumers=false).
  returned: always
  type: list
  elements: dict
  sample: [{"domain": "spoke-1", "account": null, "stream": "telemetry", "consumer": "uploader", "ack_floor": 1500,
            "delivered": 1500, "last_seq": 1420, "replicas": 1, "push": false}]
"""

import contextlib
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_tables import (
    mark_frozen, render_dot, render_report, unhealthy_servers)
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_reader import INACTIVE_AFTER, InfoFailure, Report
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import duration_ns
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    NatsClient, NatsClientError, connection_params, nats_module, require_nats_py)

ARGUMENT_SPEC = dict(
    domains=dict(type="list", elements="str"),
    streams=dict(type="list", elements="str"),
    inactive_after=dict(type="raw", default=INACTIVE_AFTER),
    recheck_after=dict(type="raw"),
    compare_origins=dict(type="bool", default=False),
    consumers=dict(type="bool", default=True),
    system_creds=dict(type="path"),
    accounts=dict(type="list", elements="dict", options=dict(
        name=dict(type="str", required=True),
        creds=dict(type="path", required=True),
        streams=dict(type="list", elements="str"),
    )),
)


def merged_result(reports):
    """One result of the reports of every account: rows sorted by domain, stream and account."""
    domains, streams, replication, unanswered, report, ahead = [], [], [], [], [], []
    for each in reports:
        domains += [d for d in each.domains() if d not in domains]
        streams += each.streams
        replication += each.replication
        unanswered += each.unanswered
        ahead += each.consumers_ahead
        report += ([""] if report else []) + render_report(each.streams, each.replication, each.domains(),
                                                           account=each.account, consumers_ahead=each.consumers_ahead)
    streams.sort(key=lambda s: (s["domain"], s["name"], s["account"] or ""))
    ahead.sort(key=lambda r: (r["domain"], r["stream"], r["consumer"], r["account"] or ""))
    replication.sort(key=lambda r: (r["domain"], r["stream"], r["account"] or "", r["kind"] != "mirror", r["source"]))
    # the graph tells accounts apart by their domains' names
    dot = render_dot([_in_account(s, "domain") for s in streams],
                     [_in_account(_in_account(r, "domain"), "source_domain") if not r["external_api"]
                      else _in_account(r, "domain") for r in replication])
    return dict(changed=False, streams=streams, replication=replication, domains=domains, unanswered=unanswered,
                report=report, dot=dot, consumers_ahead=ahead)


def _in_account(row, key):
    if not row.get("account"):
        return row
    return dict(row, **{key: "%s, account %s" % (row[key], row["account"])})


def _duration(params, option):
    value = params[option]
    if value is None:
        return None
    try:
        return duration_ns(value)
    except ValueError as exc:
        raise InfoFailure("%s: %s" % (option, exc)) from exc


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True,
                         mutually_exclusive=[["domains", "domain"], ["domains", "api_prefix"]])
    params = module.params
    try:
        require_nats_py(params)
        inactive_after = _duration(params, "inactive_after")
        recheck_after = _duration(params, "recheck_after")
    except NatsEdgeError as exc:
        fail_from(module, exc)
    if params["domains"]:
        targets = [(domain, None) for domain in params["domains"]]
    else:
        targets = [(params["domain"], params["api_prefix"])]
    # the task's own connection, then one per item of accounts
    readers = [(None, params, params["streams"])] + [
        (account["name"], connection_params(params, account["creds"]), account["streams"])
        for account in params["accounts"] or []]

    reports, reading = [], None
    try:
        with contextlib.ExitStack() as connections:
            for account, connection, wanted in readers:
                reading = account
                report = Report(module, connections.enter_context(NatsClient(connection)), inactive_after, account)
                report.collect(targets, wanted)
                if params["consumers"]:
                    report.find_consumers_ahead()
                if params["compare_origins"]:
                    report.compare_origins()
                reports.append(report)
            if recheck_after is not None:
                lagging = [report.lagging() for report in reports]
                if any(lagging):
                    time.sleep(recheck_after / 1e9)  # once, for every account
                for report, streams in zip(reports, lagging):
                    report.recheck(streams)
    except InfoFailure as exc:
        fail_from(module, exc)
    except NatsClientError as exc:
        module.fail_json(msg="cannot read streams%s: %s" % (" as account %s" % reading if reading else "", exc))

    result = merged_result(reports)
    for row in result["replication"]:
        if row.get("ahead"):
            module.warn("%s %r of stream %r in domain %s: %s (the origin came back shorter, as after a power cut; "
                        "see the guide for edge devices in the field)" % (
                            row["kind"], row["source"], row["stream"], row["domain"] or "(none)", row["error"]))
    result["unhealthy"] = []
    if params["system_creds"]:
        try:
            with NatsClient(connection_params(params, params["system_creds"])) as system:
                result["unhealthy"] = unhealthy_servers(system.gather(
                    "$SYS.REQ.SERVER.PING.HEALTHZ", b"", idle=0.5))
        except NatsClientError as exc:
            module.fail_json(msg="cannot read the servers' health with system_creds: %s" % exc)
        for row in result["unhealthy"]:
            module.warn("server %s%s is not healthy: %s" % (
                row["server"], " (domain %s)" % row["domain"] if row["domain"] else "", row["error"]))
        mark_frozen(result["streams"], result["unhealthy"])
    if not result["domains"]:
        module.fail_json(msg="no JetStream domain answered: %s" % "; ".join(
            "%s: %s" % (u["domain"], u["error"]) for u in result["unanswered"]), unanswered=result["unanswered"])
    try:
        for report, (_account, _connection, wanted) in zip(reports, readers):
            if wanted:
                report.check_found(wanted)
    except InfoFailure as exc:
        fail_from(module, exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
