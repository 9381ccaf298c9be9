# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Regional aggregation: the streams a domain declares with ``nats_fleet_aggregates``.

nats-server copies every message a stream sources through one goroutine per target stream, so one stream that
sources every site has a ceiling however many cores the hub has. An aggregate splits that work by region: each
region's stream (``<name>-<region>``) sources the sites of its region, and an optional total (``<name>``) sources
the regions. Readers that want the throughput read the regional streams side by side.

An aggregate is data on the aggregating domain's group:

    nats_fleet_aggregates:
      - name: telemetry
        account: TELEMETRY
        origin: telemetry-{site}        # each site's stream; {site} is its JetStream domain
        regions:                        # each region's sites: domains, or shell patterns of them
          north: [spoke-1]
          south: ["spoke-2*"]
        total: true                     # also <name>, sourcing every region
        durable: true                   # each region reads each site through a consumer made at the site
        stream: {replicas: 3}           # options of every stream made (jetstream_stream's)

The streams it makes are items of ``nats_streams`` like any other: the preflight checks them, the streams stage
converges them, the outage budgets and the monitoring read their sources.

With ``durable`` (nats-server 2.14, ADR-60), each regional stream sources each site through a durable consumer of
the site's origin (``consumers``: items of the site's ``nats_consumers``, made by the site's domain before the
copies): a leader change or a restart of the hub resets that consumer where the copy stands instead of making a
new one, and the site's consumer says what the region holds (its ack floor).
"""

from __future__ import annotations

import fnmatch
import re

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.plugin_utils._fleet import _some

SETTING = "nats_fleet_aggregates"
_KEYS = {"name", "account", "origin", "regions", "total", "durable", "stream"}
# what an aggregate decides for each stream it makes
_OWN = {"name", "subjects", "sources", "mirror", "account", "state"}


class AggregateError(NatsEdgeError, ValueError):
    """An aggregate the fleet cannot make, worded for the user."""


def streams(aggregates, domains, own_domain="", first=0):
    """The stream items (as nats_streams takes them) of ``aggregates`` in the domain ``own_domain``; ``domains``:
    every JetStream domain of the fleet, in order; ``first``: the index of the first aggregate in its list. Raises
    AggregateError naming the aggregate and the field."""
    out = []
    for index, aggregate in enumerate(aggregates or [], first):
        out.extend(_streams(index, aggregate, [d for d in domains if d and d != own_domain], own_domain))
    return out


def consumers(aggregating, own_domain, domains):
    """The durable sourcing consumers (items of ``nats_consumers``) that the aggregates of other domains read the
    origins of ``own_domain`` through: ``aggregating``, {domain: (its aggregates, its default account)}; ``domains``,
    every JetStream domain of the fleet. Each consumer is in the account of the stream that reads through it. An
    aggregate its own domain cannot make is left out here: that domain's preflight names it."""
    out = []
    for domain, (aggregates, default_account) in aggregating.items():
        if not own_domain or domain == own_domain or not isinstance(aggregates, list):
            continue
        for index, aggregate in enumerate(aggregates):
            try:
                made = _streams(index, aggregate, [d for d in domains if d and d != domain], domain)
            except AggregateError:
                continue
            for stream in made:
                for source in stream["sources"]:
                    if source.get("domain") == own_domain and source.get("consumer"):
                        account = stream.get("account") or default_account
                        out.append(dict(source["consumer"], stream=source["name"], ack_policy="flow_control",
                                        **({"account": account} if account else {})))
    return out


def _durable(copying, stream, site):
    """The consumer of ``site``'s origin that ``stream`` of the domain ``copying`` reads through: its name at the
    site, and the subject it delivers on (one per site: every site's consumer delivers into the same account)."""
    return {"name": "%s-%s" % (stream, copying), "deliver_subject": "_nats_edge.src.%s.%s.%s" % (copying, stream, site)}


def _streams(index, aggregate, domains, own_domain=""):
    here = "%s[%d]" % (SETTING, index)
    if not isinstance(aggregate, dict):
        raise AggregateError("%s: expected a mapping with name, origin and regions, got %r" % (here, aggregate))
    here = "%s (%s)" % (here, aggregate.get("name"))
    unknown = sorted(set(aggregate) - _KEYS)
    if unknown:
        raise AggregateError("%s: unknown key %s (%s)" % (here, ", ".join(unknown), ", ".join(sorted(_KEYS))))
    for key in ("name", "origin"):
        if not isinstance(aggregate.get(key), str) or not aggregate[key]:
            raise AggregateError("%s.%s: a string is required" % (here, key))
    if "{site}" not in aggregate["origin"] or re.search(r"\{(?!site\})", aggregate["origin"]):
        raise AggregateError("%s.origin: %r names each site's stream with {site}, its JetStream domain (such as "
                             "'telemetry-{site}'), and nothing else in braces" % (here, aggregate["origin"]))
    regions = aggregate.get("regions")
    if not isinstance(regions, dict) or not regions:
        raise AggregateError("%s.regions: a mapping of each region to its sites (JetStream domains or patterns of "
                             "them) is required" % here)
    options = aggregate.get("stream") or {}
    if not isinstance(options, dict):
        raise AggregateError("%s.stream: expected the options of every stream it makes (a mapping), got %r" % (
            here, options))
    taken = sorted(set(options) & _OWN)
    if taken:
        raise AggregateError("%s.stream: %s: the aggregate sets these itself" % (here, ", ".join(taken)))
    durable = aggregate.get("durable", False)
    if not isinstance(durable, bool):
        raise AggregateError("%s.durable: true or false is required, got %r" % (here, durable))
    if durable and not own_domain:
        raise AggregateError("%s.durable: the aggregating servers need a JetStream domain (nats_server_jetstream_domain)"
                             ": the consumers at the sites are named after it" % here)
    account = {"account": aggregate["account"]} if aggregate.get("account") else {}
    seen, made = {}, []
    for region, patterns in regions.items():
        where = "%s.regions.%s" % (here, region)
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not patterns:
            raise AggregateError("%s: a list of JetStream domains or patterns of them is required" % where)
        sites = []
        for pattern in patterns:
            matched = [d for d in domains if fnmatch.fnmatchcase(d, str(pattern))]
            if not matched:
                raise AggregateError("%s: %r matches no JetStream domain of the fleet's other sites (%s)" % (
                    where, pattern, _some(domains) or "none"))
            sites.extend(d for d in matched if d not in sites)
        for site in sites:
            if site in seen:
                raise AggregateError("%s: site %r is in region %r too; a site belongs to one region (its messages "
                                     "would reach the total twice)" % (where, site, seen[site]))
            seen[site] = region
        name = "%s-%s" % (aggregate["name"], region)
        made.append(dict(options, name=name, **dict(account, sources=[
            dict({"name": aggregate["origin"].replace("{site}", site), "domain": site},
                 **({"consumer": _durable(own_domain, name, site)} if durable else {})) for site in sites])))
    if aggregate.get("total"):
        made.append(dict(options, name=aggregate["name"], **dict(account, sources=[
            {"name": stream["name"]} for stream in made])))
    return made
