"""Rows of the bad-input table (test_bad_input.py) for jetstream_kv and jetstream_object_store."""


def rows(table):
    """(id, module, arguments, message fragment) rows; ``table`` is test_bad_input, for its constants. A null value
    cannot be a row (the table drops None from the arguments): test_bucket_hardening.py covers it, as it covers a
    copy promoted without promote (the table's server holds no copy)."""
    JS, KV, OBJECTS, DOMAIN = table.JS, table.KV, table.OBJECTS, table.DOMAIN
    return [
        # values a server cannot use, refused as streams refuse them
        ("kv-replicas-0", KV, dict(JS, name="cfg", replicas=0), "bucket 'cfg': replicas: 0; use 1 to 5"),
        ("kv-replicas-6", KV, dict(JS, name="cfg", replicas=6), "bucket 'cfg': replicas: 6; use 1 to 5"),
        ("kv-replicas-true", KV, dict(JS, name="cfg", replicas=True), "bucket 'cfg': replicas: True; use 1 to 5"),
        ("obj-replicas-0", OBJECTS, dict(JS, name="fw", replicas=0), "bucket 'fw': replicas: 0; use 1 to 5"),
        ("obj-sealed-ttl", OBJECTS, dict(JS, name="fw", sealed=True, ttl="30d"),
         "bucket 'fw': ttl: '30d': sealed: a sealed store keeps its objects for good"),
        ("obj-header-name-space", OBJECTS, dict(JS, name="fw", objects=[
            {"name": "a", "content": "x", "headers": {"Bad Name": "x"}}]),
         "bucket 'fw': objects[0] (a).headers: 'Bad Name' is not a header name"),
        ("obj-chunk-size-0", OBJECTS, dict(JS, name="fw", objects=[{"name": "a", "content": "x", "chunk_size": 0}]),
         "bucket 'fw': objects[0] (a).chunk_size: 0; an object's chunks hold at least 1 byte"),
        ("kv-history-true", KV, dict(JS, name="cfg", history=True),
         "bucket 'cfg': history: True; a key keeps 1 to 64 values"),
        ("kv-ttl-50ms", KV, dict(JS, name="cfg", ttl="50ms"),
         "bucket 'cfg': ttl: '50ms': a value lives at least 100ms"),
        ("obj-ttl-50ms", OBJECTS, dict(JS, name="fw", ttl="50ms"),
         "bucket 'fw': ttl: '50ms': an object lives at least 100ms"),
        ("kv-max-value-size-huge", KV, dict(JS, name="cfg", max_value_size="3GiB"),
         "bucket 'cfg': max_value_size: '3GiB' is larger than a server takes"),
        ("kv-max-bytes-words", KV, dict(JS, name="cfg", max_bytes="lots"), "bucket 'cfg': max_bytes: 'lots' is not a size"),
        # entries and objects
        ("kv-key-too-long", KV, dict(JS, name="held", entries={"k" * 1025: "v"}),
         "bucket 'held': entries: a key of 1025 characters is too long"),
        ("obj-name-too-long", OBJECTS, dict(JS, name="fw", objects=[
            {"name": "a", "content": "x"}, {"name": "n" * 5000, "content": "x"}]),
         "bucket 'fw': objects[1].name: a name of 5000 bytes is too long"),
        ("obj-metadata-mapping", OBJECTS, dict(JS, name="fw", objects=[
            {"name": "a", "content": "x", "metadata": {"board": {"rev": 2}}}]),
         "bucket 'fw': objects[0] (a).metadata.board: a mapping is not text"),
        ("obj-metadata-list", OBJECTS, dict(JS, name="fw", objects=[
            {"name": "a", "content": "x", "metadata": {"boards": ["rpi4"]}}]),
         "bucket 'fw': objects[0] (a).metadata.boards: a list is not text"),
        # copies
        ("kv-source-itself", KV, dict(JS, name="held", sources=[{"name": "held"}]),
         "bucket 'held': sources[0]: names this bucket itself"),
        ("kv-mirror-itself", KV, dict(JS, name="cfg", mirror={"name": "cfg"}), "bucket 'cfg': mirror: names this bucket"),
        ("obj-mirror-itself", OBJECTS, dict(JS, name="fw", mirror={"name": "fw"}),
         "bucket 'fw': mirror: names this bucket itself"),
        ("kv-mirror-and-promote", KV, dict(JS, name="cfg", mirror={"name": "cfg", "domain": "hub"}, promote=True),
         "bucket 'cfg': promote makes a copy a bucket of its own"),
        ("obj-mirror-and-promote", OBJECTS, dict(JS, name="fw", mirror={"name": "fw", "domain": "hub"}, promote=True),
         "bucket 'fw': promote makes a copy a bucket of its own"),
        ("kv-bulk-promote-beside", KV, dict(JS, buckets=[{"name": "held"}], promote=True),
         "set bucket options inside each item of buckets, not next to it (found: promote)"),
        # what the bucket holds, read before anything is sent
        ("kv-max-bytes-below-held", KV, dict(JS, name="held", max_bytes=10),
         "key-value bucket 'held' in the local domain: max_bytes: 10 is below the"),
        ("obj-max-bytes-below-held", OBJECTS, dict(JS, name="fw", max_bytes=10),
         "object store 'fw' in the local domain: max_bytes: 10 is below the"),
        # the same checks through jetstream_domain's lists
        ("kv-entry-ttls-without-per-key-ttl", KV, dict(JS, name="cfg", entries={"a": "1"}, entry_ttls={"a": "1h"}),
         "bucket 'cfg': entry_ttls needs per_key_ttl: true"),
        ("kv-entry-ttls-other-key", KV, dict(JS, name="cfg", per_key_ttl=True, entries={"a": "1"},
                                             entry_ttls={"b": "1h"}),
         "bucket 'cfg': entry_ttls.b: 'b' is not a key of entries"),
        ("kv-entry-ttls-half-second", KV, dict(JS, name="cfg", per_key_ttl=True, entries={"a": "1"},
                                               entry_ttls={"a": "500ms"}),
         "bucket 'cfg': entry_ttls.a: '500ms': a value lives whole seconds, at least 1s"),
        ("domain-kv-entry-ttls-alone", DOMAIN, dict(JS, kv_buckets=[{"name": "cfg", "per_key_ttl": True,
                                                                     "entry_ttls": {"a": 60}}]),
         "bucket 'cfg': entry_ttls needs entries"),
        ("domain-kv-replicas-0", DOMAIN, dict(JS, kv_buckets=[{"name": "fresh"}, {"name": "cfg", "replicas": 0}]),
         "bucket 'cfg': replicas: 0; use 1 to 5"),
        ("domain-store-name-too-long", DOMAIN, dict(JS, object_stores=[{"name": "fw", "objects": [
            {"name": "n" * 5000, "content": "x"}]}]), "bucket 'fw': objects[0].name: a name of 5000 bytes"),
        ("domain-store-max-bytes-below-held", DOMAIN, dict(JS, object_stores=[{"name": "fw", "max_bytes": 10}]),
         "object store 'fw' in the local domain: max_bytes: 10 is below the"),
    ]
