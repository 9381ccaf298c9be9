"""Rows of the bad-input table (test_bad_input.py) for jetstream_domain, jetstream_stream and jetstream_consumer across items."""

FRESH = {"name": "FRESH", "subjects": ["fresh.>"]}


def rows(table):
    """(id, module, arguments, message fragment) rows; ``table`` is test_bad_input, for its constants."""
    js, domain = table.JS, table.DOMAIN
    stream = table.STREAM
    return [
        # -- jetstream_stream: a stream copying itself, a cycle among the streams of one run --------------------
        ("stream-sources-itself", stream, dict(js, name="SELF", subjects=["self.>"], sources=[{"name": "SELF"}]),
         "stream 'SELF': sources[0]: copies in a cycle: stream 'SELF' copies from stream 'SELF'"),
        ("stream-bulk-mirror-cycle", stream, dict(js, streams=[FRESH, {"name": "CA", "mirror": {"name": "CB"}},
                                                               {"name": "CB", "mirror": {"name": "CA"}}]),
         "streams[2] (CB): mirror: copies in a cycle: stream 'CB' copies from stream 'CA', which copies from "
         "stream 'CB'"),
        # -- jetstream_domain: items fine alone, not beside each other; refused before anything is written -------
        ("domain-mirror-cycle", domain, dict(js, streams=[FRESH, {"name": "A", "mirror": {"name": "B"}},
                                                          {"name": "B", "mirror": {"name": "A"}}]),
         "streams[2] (B): mirror: copies in a cycle: stream 'B' copies from stream 'A', which copies from stream 'B'"),
        ("domain-source-cycle", domain, dict(js, streams=[
            {"name": "C", "subjects": ["c.>"], "sources": [{"name": "D"}]},
            {"name": "D", "subjects": ["d.>"], "sources": [{"name": "E"}]},
            {"name": "E", "subjects": ["e.>"], "sources": [{"name": "C"}]}]),
         "streams[2] (E): sources[0]: copies in a cycle: stream 'E' copies from stream 'C', which copies from stream "
         "'D', which copies from stream 'E'"),
        ("domain-streams-overlap", domain, dict(js, streams=[{"name": "A", "subjects": ["a.>"]},
                                                             {"name": "B", "subjects": ["a.b"]}]),
         "streams[1] (B): stream 'B': subjects: 'a.b' overlaps 'a.>' of stream 'A'"),
        ("domain-stream-named-like-a-bucket", domain, dict(js, streams=[{"name": "KV_cfg", "subjects": ["cfg.>"]}],
                                                           kv_buckets=[{"name": "cfg"}]),
         "kv_buckets[0] (cfg): stream 'KV_cfg' is declared more than once"),
        ("domain-store-twice", domain, dict(js, object_stores=[{"name": "files"}, {"name": "files"}]),
         "object_stores[1] (files): stream 'OBJ_files' is declared more than once"),
        ("domain-consumer-twice", domain, dict(js, streams=[FRESH], consumers=[
            {"stream": "FRESH", "name": "c", "max_deliver": 3}, {"stream": "FRESH", "durable": "c", "max_deliver": 4}]),
         "consumers[1] (c): consumer 'c' on stream 'FRESH' is declared twice, also at consumers[0] (c)"),
        ("domain-fetch-one-dest", domain, dict(js, fetches=[{"bucket": "fw", "name": "a", "dest": "{files}/kept.bin"},
                                                            {"bucket": "fw", "name": "b", "dest": "{files}/kept.bin"}]),
         "fetches[1] (fw/b): dest {files}/kept.bin (the file an object is written to) is declared twice, also at "
         "fetches[0] (fw/a)"),
        # every consumer planned against its stream as the run leaves it, before the first change
        ("domain-consumer-undeclared-stream", domain, dict(js, streams=[FRESH], consumers=[{"stream": "NOPE", "name": "c"}]),
         "consumers[0] (c): consumer 'c' on stream 'NOPE' in the local domain: stream 'NOPE' does not exist in the "
         "local domain, and this run does not declare it"),
        ("domain-consumer-backoff-on-a-new-stream", domain, dict(js, streams=[FRESH], consumers=[
            {"stream": "FRESH", "name": "c", "ack_wait": "30s", "backoff": ["1s", "5s"]}]),
         "consumers[0] (c): consumer 'c' on stream 'FRESH' in the local domain: ack_wait: the server replaces it"),
        ("domain-consumer-immutable-after-a-new-stream", domain, dict(js, streams=[FRESH], consumers=[
            {"stream": "ORDERS", "name": "workers", "deliver_policy": "new"}]),
         "consumers[0] (workers): consumer 'workers' on stream 'ORDERS' in the local domain: nats-server cannot change "
         "this on an existing consumer: deliver_policy"),
        ("domain-consumer-on-a-deleted-stream", domain, dict(js, streams=[FRESH, {"name": "cnc", "state": "absent"}],
                                                             consumers=[{"stream": "cnc", "name": "w"}]),
         "consumers[0] (w): consumer 'w' on stream 'cnc' in the local domain: this run deletes its stream 'cnc'"),
        # what the server refuses after other changes: the run deletes what it made, and says so
        ("domain-refused-after-a-new-stream", domain, dict(js, streams=[FRESH, {"name": "COPYCAT",
                                                                                "subjects": ["orders.new"]}]),
         "the server refused to create it: subjects overlap with an existing stream (400 10065, on "
         "$JS.API.STREAM.CREATE.COPYCAT); this run deleted what it had made: stream 'FRESH'"),
        # a stream of its own: rows run side by side, and another row's FRESH would not be this run's to delete
        ("domain-consumer-refused-after-a-new-stream", domain, dict(js, streams=[
            {"name": "SINGLE", "subjects": ["single.>"], "max_consumers": 1}], consumers=[
            {"stream": "SINGLE", "name": "one"}, {"stream": "SINGLE", "name": "two"}]),
         "this run deleted what it had made: stream 'SINGLE'"),
    ]
