# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading the streams of JetStream domains and their replication over one connection, as one account, and
holding copies against their origins. Private to the collection; jetstream_info reports with it and
jetstream_domain waits with it for the copies it converged to catch up.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_repair import ConsumerRepair, row_text
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_tables import (
    LOCAL, STATUS_OK, apply_ahead, apply_origin, domain_of, entry_filters, mark_stalled, replication_entries, replication_rows,
    row_key, stream_row)
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JetStream, JetStreamError, NatsClientError)

# a copy whose origin has been quiet longer than this is called inactive (jetstream_info's default)
INACTIVE_AFTER = "10s"


class InfoFailure(NatsEdgeError):
    pass


class DomainReader(object):
    """Every stream of one domain (or imported API)."""

    def __init__(self, client, domain=None, api_prefix=None):
        self.js = JetStream(client, domain=domain, api_prefix=api_prefix)
        self.domain = domain
        self.api_prefix = api_prefix
        self.infos = []

    def names(self):
        return self.js.every_page("STREAM.NAMES", "streams")

    def info(self, name):
        try:
            return self.js.lookup("STREAM.INFO.%s" % name)
        except JetStreamError as exc:
            raise InfoFailure("stream %r %s: %s (err_code %s)" % (name, self.js.where(), exc.description,
                                                                  exc.err_code)) from exc

    def read(self, wanted=None):
        for name in (wanted if wanted is not None else self.names()):
            info = self.info(name)
            if info is not None:
                self.infos.append(info)
        return self.infos

    def label(self):
        first = self.infos[0] if self.infos else {}
        return self.domain or first.get("domain") or self.api_prefix or LOCAL


class Report(object):
    """Streams and replication of several domains read over one connection, as one account."""

    def __init__(self, module, client, inactive_after, account=None):
        self.module = module
        self.client = client
        self.inactive_after = inactive_after
        self.account = account  # the name of an O(accounts) item, None for the task's own connection
        self.readers = []
        self.streams = []
        self.replication = []
        self.unanswered = []
        self.origins = {}
        # set by compare_origins: streams read again later (recheck) are held against their origins too
        self.compared = False
        self.consumers_ahead = []

    def collect(self, targets, wanted):
        for domain, api_prefix in targets:
            reader = DomainReader(self.client, domain, api_prefix)
            try:
                reader.read(wanted)
            except JetStreamError:
                raise
            except NatsClientError as exc:
                self.unanswered.append(dict(domain=domain or api_prefix or LOCAL, error=str(exc)))
                self.module.warn("JetStream %s did not answer: %s" % (reader.js.where(), exc))
                continue
            self.readers.append(reader)
            for info in reader.infos:
                here = domain_of(info, domain)
                self.streams.append(self._stream_row(info, here))
                self.replication.extend(self._replication_rows(info, here))

    def find_consumers_ahead(self):
        """Every consumer of the streams read whose ack floor or delivered sequence is past its stream's last
        sequence (what a power cut can leave), each warned of."""
        for reader in self.readers:
            for row, _info in ConsumerRepair(self.client, reader.js).ahead(reader.infos, reader.label(), self.account):
                self.consumers_ahead.append(row)
                self.module.warn("%s%s: it receives nothing until it is put right (jetstream_consumer_repair)" % (
                    row_text(row), " (account %s)" % self.account if self.account else ""))

    def _stream_row(self, info, here):
        return dict(stream_row(info, here), account=self.account)

    def _replication_rows(self, info, here):
        return [dict(row, account=self.account) for row in replication_rows(info, here, self.inactive_after)]

    def compare_origins(self):
        """Read the origin of every mirror and source the server calls current,
        after the copy itself, and call lagging what has not reached it yet.
        A copy that looks behind is read once more, so a busy origin's newest
        messages, still in flight, do not hold it back."""
        self.compared = True
        behind = []
        for reader in self.readers:
            for info in reader.infos:
                here = domain_of(info, reader.domain)
                if self._compare(reader, info, self._rows_of(here, info)):
                    behind.append((reader, here, info["config"]["name"]))
        streams, rows = [], []
        for reader, here, name in behind:
            fresh = reader.info(name)
            if fresh is None:
                continue
            fresh_rows = self._replication_rows(fresh, here)
            self._compare(reader, fresh, fresh_rows)
            streams.append(self._stream_row(fresh, here))
            rows.extend(fresh_rows)
        self._replace(streams, rows)

    def _rows_of(self, here, info):
        name = info["config"]["name"]
        return [r for r in self.replication if (r["domain"], r["stream"]) == (here, name)]

    def _compare(self, reader, info, rows):
        """Apply the origins' states to ``rows`` (in the order of the entries); True when one is behind."""
        state = info.get("state") or {}
        for row, (_kind, entry, config) in zip(rows, replication_entries(info)):
            # a copy the server does not call current is still checked for being ahead of its origin
            if row["status"] != STATUS_OK and row.get("seq") is None:
                continue
            filters = entry_filters(config) or entry_filters(entry)
            origin, matching, error = self._origin(row["external_api"] or reader.js.prefix, row["source"], filters)
            if error:
                row["origin_error"] = error
                continue
            if row["status"] != STATUS_OK:
                apply_ahead(row, origin)
                continue
            apply_origin(row, state, origin, origin_has_matching=matching,
                         starts_late=bool(config.get("opt_start_seq") or config.get("opt_start_time")))
        return any(row["behind"] for row in rows)

    def _origin(self, api, name, filters):
        """The origin's state, whether it holds messages the filters take, or an error; read once per run."""
        key = (api, name, tuple(filters))
        if key not in self.origins:
            js = JetStream(self.client, api_prefix=api)
            try:
                state = js.call("STREAM.INFO.%s" % name).get("state") or {}
                matching = None
                if filters and state.get("messages"):
                    matching = any((js.call("STREAM.INFO.%s" % name, {"subjects_filter": subject}).get("state")
                                    or {}).get("subjects") for subject in filters)
                self.origins[key] = (state, matching, None)
            except NatsClientError as exc:  # a JetStreamError too
                self.origins[key] = (None, None, "origin %r %s: %s" % (name, js.where(), exc))
        return self.origins[key]

    def _replace(self, streams, rows):
        """Streams and replication rows read anew take the places of the ones they repeat."""
        fresh_rows = dict((row_key(r), r) for r in rows)
        self.replication = [fresh_rows.get(row_key(r), r) for r in self.replication]
        fresh_streams = dict(((s["domain"], s["name"]), s) for s in streams)
        self.streams = [fresh_streams.get((s["domain"], s["name"]), s) for s in self.streams]

    def lagging(self):
        """(domain, stream) of every stream with a lagging mirror or source."""
        return set((r["domain"], r["stream"]) for r in self.replication if r["lag"])

    def recheck(self, lagging):
        """Read the ``lagging`` streams again (a while after the first read) and mark what did not move
        as stalled."""
        if not lagging:
            return
        streams, rows, read = [], [], []
        for reader in self.readers:
            for info in reader.infos:
                here = domain_of(info, reader.domain)
                if (here, info["config"]["name"]) in lagging:
                    fresh = reader.info(info["config"]["name"])
                    if fresh is not None:
                        fresh_rows = self._replication_rows(fresh, here)
                        streams.append(self._stream_row(fresh, here))
                        rows.extend(fresh_rows)
                        read.append((reader, fresh, fresh_rows))
        mark_stalled(self.replication, rows, self.streams, streams)
        if self.compared:
            for reader, fresh, fresh_rows in read:
                self._compare(reader, fresh, fresh_rows)
        self._replace(streams, rows)

    def domains(self):
        return [reader.label() for reader in self.readers]

    def check_found(self, wanted):
        """Raise InfoFailure (with ``unanswered`` in its result) when a stream asked for is in none of the domains
        read."""
        found = set(s["name"] for s in self.streams)
        missing = [name for name in wanted if name not in found]
        if missing:
            raise InfoFailure("stream%s %s not found in %s%s" % (
                "s" if len(missing) > 1 else "", ", ".join(repr(m) for m in missing),
                ", ".join("domain %s" % d for d in self.domains()),
                " as account %s" % self.account if self.account else ""), unanswered=self.unanswered)
