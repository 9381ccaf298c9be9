"""jetstream_domain against a hub and a leaf with their own JetStream domains: streams, a key-value bucket
with entries, an object store with an object and a durable consumer converged in one run, predicted
exactly in check mode, unchanged on a second run; copies in the leaf in a second run (defer_copies: one run
when every copy is as declared); bad items refused before anything is sent, naming the list, the item and the
option."""

from conftest import jetstream, publish, run_module


def stream_count(url):
    with jetstream(url, "hub") as js:
        return js.call("INFO").get("streams", 0)


def items(hub_url):
    return dict(
        servers=[hub_url], domain="hub", timeout=3.0,
        streams=[{"name": "ORDERS", "subjects": ["orders.>"]},
                 {"name": "ARCHIVE", "sources": [{"name": "ORDERS"}], "max_age": "30d"}],
        kv_buckets=[{"name": "settings", "history": 3, "entries": {"mode": "normal", "level": "info"}}],
        object_stores=[{"name": "files", "objects": [{"name": "motd.txt", "content": "hello"}]}],
        consumers=[{"stream": "ORDERS", "name": "workers", "ack_policy": "explicit", "max_deliver": 5}])


def test_one_run_converges_every_kind_and_a_second_changes_nothing(hub_and_leaf):
    wanted = items(hub_and_leaf["hub"])
    predicted = run_module("jetstream_domain", wanted, check_mode=True)
    assert predicted["changed"] and not predicted.get("failed"), predicted.get("msg")
    assert stream_count(hub_and_leaf["hub"]) == 0  # check mode made nothing

    made = run_module("jetstream_domain", wanted, diff=True)
    assert made["changed"] and not made.get("failed"), made
    assert [s["action"] for s in made["streams"]] == ["create", "create"]
    assert made["buckets"][0]["put"] == ["level", "mode"] and made["stores"][0]["uploaded"] == ["motd.txt"]
    assert made["consumer_results"][0]["operation"] == "create"
    # what check mode predicted is what the run sent
    assert [a["subject"] for a in predicted["actions"]] == [a["subject"] for a in made["actions"]
                                                            if a["subject"] in [p["subject"] for p in predicted["actions"]]]
    assert len(made["diff"]) == 5

    publish(hub_and_leaf["hub"], "orders.new", 3)
    again = run_module("jetstream_domain", wanted)
    assert not again["changed"] and again["actions"] == [], again
    assert again["consumer_results"][0]["consumer"]["num_pending"] == 3

    changed = run_module("jetstream_domain", dict(wanted, kv_buckets=[
        {"name": "settings", "history": 3, "entries": {"mode": "safe", "level": "info"}}]))
    assert changed["changed"] and changed["buckets"][0]["put"] == ["mode"], changed
    assert not any(s["changed"] for s in changed["streams"])


def test_copies_in_another_domain_in_one_run(hub_and_leaf):
    assert not run_module("jetstream_domain", items(hub_and_leaf["hub"])).get("failed")
    leaf = dict(servers=[hub_and_leaf["leaf"]], domain="leaf", timeout=3.0,
                streams=[{"name": "orders-copy", "mirror": {"name": "ORDERS", "domain": "hub"}}],
                kv_buckets=[{"name": "settings", "mirror": {"name": "settings", "domain": "hub"}}],
                object_stores=[{"name": "files", "mirror": {"name": "files", "domain": "hub"}}])
    made = run_module("jetstream_domain", leaf)
    assert made["changed"] and not made.get("failed"), made
    assert [s["action"] for s in made["streams"]] == ["create"]
    assert made["buckets"][0]["action"] == "create" and made["stores"][0]["action"] == "create"
    again = run_module("jetstream_domain", leaf)
    assert not again["changed"], again


def test_the_run_waits_until_its_copies_have_caught_up_and_fails_naming_one_that_cannot(hub_and_leaf):
    """wait_seconds: every copy of the run (a stream, a bucket's and a store's) held against its origin."""
    assert not run_module("jetstream_domain", items(hub_and_leaf["hub"])).get("failed")
    publish(hub_and_leaf["hub"], "orders.new", 25)
    leaf = dict(servers=[hub_and_leaf["leaf"]], domain="leaf", timeout=3.0, wait_seconds=30,
                streams=[{"name": "orders-copy", "mirror": {"name": "ORDERS", "domain": "hub"}}],
                kv_buckets=[{"name": "settings", "mirror": {"name": "settings", "domain": "hub"}}],
                object_stores=[{"name": "files", "mirror": {"name": "files", "domain": "hub"}}])
    made = run_module("jetstream_domain", leaf)
    assert made["changed"] and not made.get("failed"), made
    rows = dict((row["stream"], row) for row in made["replication"])
    assert sorted(rows) == ["KV_settings", "OBJ_files", "orders-copy"], rows
    assert all(row["status"] == "ok" for row in rows.values()), rows
    # caught up: everything the origins hold is in the copies when the run returns
    assert rows["orders-copy"]["origin_last_seq"] == 25, rows
    with jetstream(hub_and_leaf["leaf"], "leaf") as js:
        assert js.call("STREAM.INFO.orders-copy")["state"]["messages"] == 25
        assert js.call("STREAM.INFO.KV_settings")["state"]["messages"] == 2
    # check mode waits for nothing; a copy of an origin that is not there fails the wait, named
    assert "replication" not in run_module("jetstream_domain", leaf, check_mode=True)
    stuck = run_module("jetstream_domain", dict(leaf, wait_seconds=2, kv_buckets=[], object_stores=[], streams=[
        {"name": "orders-copy", "mirror": {"name": "ORDERS", "domain": "hub"}},
        {"name": "nothing-copy", "mirror": {"name": "NOTHING", "domain": "hub"}}]))
    assert stuck["failed"] and stuck["msg"].startswith("the copies have not caught up with their origins after 2 s: "), stuck
    assert "nothing-copy (mirror from NOTHING" in stuck["msg"] and "orders-copy" not in stuck["msg"], stuck["msg"]
    assert [s["action"] for s in stuck["streams"]] == ["none", "create"], stuck["streams"]


def test_the_run_fetches_objects_last_digest_checked_and_predicts_in_check_mode(hub_and_leaf, tmp_path):
    """fetches: after the copies have caught up, each object into a file only when its digest differs."""
    import hashlib
    import os
    wanted = items(hub_and_leaf["hub"])
    dest = tmp_path / "motd.txt"
    fetch = dict(wanted, fetches=[{"bucket": "files", "name": "motd.txt", "dest": str(dest), "mode": "0640"}])
    # a store the run would create: check mode reports the file it would write, and writes nothing
    predicted = run_module("jetstream_domain", fetch, check_mode=True)
    assert predicted["changed"] and predicted["fetched"][0]["changed"] and not dest.exists(), predicted
    made = run_module("jetstream_domain", fetch, diff=True)
    assert made["fetched"][0]["changed"] and dest.read_text() == "hello", made
    assert os.stat(dest).st_mode & 0o777 == 0o640
    assert made["fetched"][0]["digest"].startswith("SHA-256=") and made["fetched"][0]["size"] == 5, made["fetched"]
    again = run_module("jetstream_domain", fetch)
    assert not again["changed"] and not again["fetched"][0]["changed"], again
    # from a copy in another domain, once it has caught up, in the same run as the copy
    leaf = dict(servers=[hub_and_leaf["leaf"]], domain="leaf", timeout=3.0, wait_seconds=30,
                object_stores=[{"name": "files", "mirror": {"name": "files", "domain": "hub"}}],
                fetches=[{"bucket": "files", "name": "motd.txt", "dest": str(tmp_path / "from-copy")}])
    copied = run_module("jetstream_domain", leaf)
    assert copied["fetched"][0]["changed"] and (tmp_path / "from-copy").read_text() == "hello", copied
    # a mode that drifted: predicted, then put back; content that drifted: fetched again
    os.chmod(dest, 0o666)
    assert run_module("jetstream_domain", fetch, check_mode=True)["fetched"][0]["changed"]
    assert os.stat(dest).st_mode & 0o777 == 0o666
    assert run_module("jetstream_domain", fetch)["fetched"][0]["changed"] and os.stat(dest).st_mode & 0o777 == 0o640
    dest.write_text("tampered")
    # check mode reads the object (digest checked, nothing written) for the checksum the file would have
    hello = hashlib.sha1(b"hello").hexdigest()
    assert run_module("jetstream_domain", fetch, check_mode=True)["fetched"][0]["checksum"] == hello
    assert dest.read_text() == "tampered"
    refetched = run_module("jetstream_domain", fetch)["fetched"][0]
    assert refetched["changed"] and refetched["checksum"] == hello and dest.read_text() == "hello"
    missing = run_module("jetstream_domain", dict(wanted, fetches=[{"bucket": "files", "name": "nothing",
                                                                    "dest": str(tmp_path / "nothing")}]))
    assert missing["failed"] and missing["msg"].startswith("fetches (files/nothing): it is not in the bucket"), missing
    assert not (tmp_path / "nothing").exists()


def test_defer_copies_converges_the_origins_alone_while_a_copy_is_not_as_declared(hub_and_leaf, tmp_path):
    """defer_copies: a copy to make leaves the copies, consumers, wait and fetches to a second run; copies found
    as declared make it one run; an object a copy cannot give yet is deferred, not failed."""
    assert not run_module("jetstream_domain", items(hub_and_leaf["hub"])).get("failed")
    publish(hub_and_leaf["hub"], "orders.new", 4)
    dest = tmp_path / "motd.txt"
    copies = dict(streams=[{"name": "orders-copy", "mirror": {"name": "ORDERS", "domain": "hub"}}],
                  object_stores=[{"name": "files", "mirror": {"name": "files", "domain": "hub"}}])
    leaf = dict(copies, servers=[hub_and_leaf["leaf"]], domain="leaf", timeout=3.0, wait_seconds=30,
                streams=[{"name": "local", "subjects": ["local.>"]}] + copies["streams"],
                consumers=[{"stream": "orders-copy", "name": "readers"}],
                fetches=[{"bucket": "files", "name": "motd.txt", "dest": str(dest)}])
    predicted = run_module("jetstream_domain", dict(leaf, defer_copies=True), check_mode=True)
    first = run_module("jetstream_domain", dict(leaf, defer_copies=True))
    assert first["changed"] and sorted(first["deferred"]) == ["OBJ_files", "orders-copy"], first
    assert predicted["deferred"] == first["deferred"] and predicted["actions"] == first["actions"], predicted
    # the origin alone: no copy, consumer, wait or fetch yet, and no warning about origins
    assert [s["name"] for s in first["streams"]] == ["local"] and first["stores"] == [], first
    assert first["consumer_results"] == [] and first["fetched"] == [] and "replication" not in first, first
    assert not first.get("warnings"), first["warnings"]
    with jetstream(hub_and_leaf["leaf"], "leaf") as js:
        assert js.call("INFO")["streams"] == 1
    second = run_module("jetstream_domain", dict(leaf, streams=copies["streams"]))
    assert second["changed"] and second["deferred"] == [] and dest.read_text() == "hello", second
    # every copy as declared: one run does it all, reads only
    once = run_module("jetstream_domain", dict(leaf, defer_copies=True))
    assert not once["changed"] and once["deferred"] == [] and once["actions"] == [], once
    assert [s["action"] for s in once["streams"]] == ["none", "none"] and len(once["consumer_results"]) == 1, once
    assert once["replication"] and not once["fetched"][0]["changed"], once
    # an object the copy does not hold yet: deferred with its store, not a failure; without defer_copies, a failure
    # (two of them from one store: the store named once)
    later = dict(leaf, fetches=leaf["fetches"] + [{"bucket": "files", "name": "later", "dest": str(tmp_path / "l")},
                                                  {"bucket": "files", "name": "later-2", "dest": str(tmp_path / "l2")}])
    deferred = run_module("jetstream_domain", dict(later, defer_copies=True))
    assert not deferred.get("failed") and deferred["deferred"] == ["OBJ_files"], deferred
    assert [f["name"] for f in deferred["fetched"]] == ["motd.txt"], deferred["fetched"]
    failed = run_module("jetstream_domain", later)
    assert failed["failed"] and "fetches (files/later): it is not in the bucket" in failed["msg"], failed


def test_bad_items_are_refused_before_anything_is_sent(hub_and_leaf):
    wanted = items(hub_and_leaf["hub"])
    cases = [
        (dict(kv_buckets=[{"name": "settings", "histroy": 3}]), "kv_buckets[0] (settings)", "histroy"),
        (dict(consumers=[{"stream": "ORDERS", "name": "w", "ack_policy": "maybe"}]), "consumers[0] (w)", "ack_policy"),
        (dict(object_stores=[{"name": "files", "objects": [{"name": "a", "src": "/nonexistent/file"}]}]),
         "files", "/nonexistent/file"),
        (dict(streams=["ORDERS"]), "streams", "dict"),
        (dict(fetches=[{"bucket": "files", "name": "motd.txt", "dest": "/nonexistent/dir/motd"}]),
         "fetches[0] (files/motd.txt)", "dest: the directory of /nonexistent/dir/motd does not exist"),
        (dict(fetches=[{"bucket": "files", "name": "motd.txt", "dest": "/tmp/motd", "mode": "rw"}]),
         "fetches[0] (files/motd.txt)", "mode: 'rw' is not an octal mode"),
        (dict(fetches=[{"bucket": "fi.les", "name": "motd.txt", "dest": "/tmp/motd"}]), "fetches[0]", "fi.les"),
        (dict(fetches=[{"bucket": "files", "dest": "/tmp/motd"}]), "fetches[0]", "name"),
    ]
    for change, where, field in cases:
        refused = run_module("jetstream_domain", dict(wanted, **change))
        assert refused.get("failed") and where in refused["msg"] and field in refused["msg"], refused
        assert refused.get("actions", []) == [] and not refused.get("changed"), refused
    assert stream_count(hub_and_leaf["hub"]) == 0


def stream_names(url):
    with jetstream(url, "hub") as js:
        return sorted(js.call("STREAM.NAMES").get("streams") or [])


def consumer_names(url, stream):
    with jetstream(url, "hub") as js:
        return sorted(js.call("CONSUMER.NAMES.%s" % stream).get("consumers") or [])


def test_checked_before_anything_is_written(hub_and_leaf, tmp_path):
    """The module's promise: every refusal the run can foresee - items that are fine alone but not beside each
    other, and consumers planned against their streams as the run leaves them - comes before the first change."""
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=3.0)
    assert not run_module("jetstream_domain", dict(hub, streams=[{"name": "ORDERS", "subjects": ["orders.>"]}],
                                                   consumers=[{"stream": "ORDERS", "name": "workers"}])).get("failed")
    fresh = {"name": "FRESH", "subjects": ["fresh.>"]}
    cases = [
        # a cycle of copies: without the check, A was made before the server refused B
        (dict(streams=[{"name": "A", "mirror": {"name": "B"}}, {"name": "B", "mirror": {"name": "A"}}]),
         "streams[1] (B): mirror: copies in a cycle: stream 'B' copies from stream 'A', which copies from stream 'B'"),
        (dict(streams=[fresh, {"name": "C", "subjects": ["c.>"], "sources": [{"name": "D"}]},
                       {"name": "D", "subjects": ["d.>"], "sources": [{"name": "C"}]}]),
         "streams[2] (D): sources[0]: copies in a cycle"),
        # a consumer of a stream that neither exists nor is declared: without the look-up, FRESH was made first
        (dict(streams=[fresh], consumers=[{"stream": "NOPE", "name": "c"}]),
         "consumers[0] (c): consumer 'c' on stream 'NOPE' in domain 'hub': stream 'NOPE' does not exist in domain "
         "'hub', and this run does not declare it"),
        # what the server would refuse of a consumer on a stream the run makes, and of one it has
        (dict(streams=[fresh], consumers=[{"stream": "FRESH", "name": "c", "ack_wait": "30s", "backoff": ["1s", "5s"]}]),
         "consumers[0] (c): consumer 'c' on stream 'FRESH' in domain 'hub': ack_wait: the server replaces it"),
        (dict(streams=[fresh], consumers=[{"stream": "ORDERS", "name": "workers", "deliver_policy": "new"}]),
         "consumers[0] (workers): consumer 'workers' on stream 'ORDERS' in domain 'hub': nats-server cannot change "
         "this on an existing consumer: deliver_policy"),
        (dict(streams=[fresh, {"name": "ORDERS", "state": "absent"}], consumers=[{"stream": "ORDERS", "name": "w"}]),
         "consumers[0] (w): consumer 'w' on stream 'ORDERS' in domain 'hub': this run deletes its stream 'ORDERS'"),
        # one thing declared twice would change back and forth on every run
        (dict(streams=[fresh], consumers=[{"stream": "FRESH", "name": "c", "max_deliver": 3},
                                          {"stream": "FRESH", "name": "c", "max_deliver": 4}]),
         "consumers[1] (c): consumer 'c' on stream 'FRESH' is declared twice, also at consumers[0] (c)"),
        (dict(streams=[fresh], object_stores=[{"name": "files", "objects": [{"name": "a", "content": "a"},
                                                                            {"name": "b", "content": "b"}]}],
              fetches=[{"bucket": "files", "name": "a", "dest": str(tmp_path / "f")},
                       {"bucket": "files", "name": "b", "dest": str(tmp_path / "f")}]),
         "fetches[1] (files/b): dest %s (the file an object is written to) is declared twice, also at fetches[0] "
         "(files/a)" % (tmp_path / "f")),
        # a stream named like a bucket's
        (dict(streams=[{"name": "KV_cfg", "subjects": ["cfg.>"]}], kv_buckets=[{"name": "cfg"}]),
         "kv_buckets[0] (cfg): stream 'KV_cfg' is declared more than once"),
    ]
    for change, message in cases:
        for check_mode in (True, False):
            refused = run_module("jetstream_domain", dict(hub, **change), check_mode=check_mode)
            assert refused.get("failed") and message in refused["msg"], (message, refused)
            assert refused.get("actions") == [] and not refused.get("changed"), refused
            assert stream_names(hub_and_leaf["hub"]) == ["ORDERS"], (message, refused)
    assert consumer_names(hub_and_leaf["hub"], "ORDERS") == ["workers"]


def test_a_refusal_after_changes_undoes_what_the_run_made(hub_and_leaf):
    """Where the server refuses what no plan can know (a subject another stream of the account takes, a stream's
    consumer limit), after other changes were made: the streams and consumers the run made are deleted again, and
    the message says so and what stays changed."""
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=3.0)
    made = run_module("jetstream_domain", dict(hub, streams=[{"name": "ORDERS", "subjects": ["orders.>"]}]))
    assert not made.get("failed"), made
    refused = run_module("jetstream_domain", dict(hub, streams=[
        {"name": "FRESH", "subjects": ["fresh.>"]}, {"name": "COPYCAT", "subjects": ["orders.new"]}],
        kv_buckets=[{"name": "cfg", "entries": {"a": "1"}}],
        consumers=[{"stream": "ORDERS", "name": "early"}]))
    assert refused.get("failed") and "stream 'COPYCAT' in domain 'hub': the server refused to create it" in refused["msg"]
    assert refused["msg"].endswith("; this run deleted what it had made: stream 'FRESH'"), refused["msg"]
    assert not refused["changed"], refused
    assert stream_names(hub_and_leaf["hub"]) == ["ORDERS"]
    assert [(s["name"], s["action"], s.get("undone")) for s in refused["streams"]] == [
        ("FRESH", "create", True), ("COPYCAT", "create", None)], refused["streams"]
    # the bucket's stream came after the refused one, the consumer after the streams: neither was made
    assert [a["subject"].rsplit(".", 2)[-2:] for a in refused["actions"]] == [
        ["CREATE", "FRESH"], ["CREATE", "COPYCAT"], ["DELETE", "FRESH"]], refused["actions"]

    # a consumer the server refuses (the stream takes one consumer), after a stream update, a new stream and a
    # consumer on the stream that was there: the update stays, the rest is deleted
    refused = run_module("jetstream_domain", dict(hub, streams=[
        {"name": "ORDERS", "subjects": ["orders.>"], "max_age": "1d"},
        {"name": "FRESH", "subjects": ["fresh.>"], "max_consumers": 1}],
        consumers=[{"stream": "ORDERS", "name": "early"}, {"stream": "FRESH", "name": "one"},
                   {"stream": "FRESH", "name": "two"}]))
    assert refused.get("failed") and "consumer 'two' on stream 'FRESH'" in refused["msg"], refused
    assert "this run deleted what it had made: consumer 'early' on stream 'ORDERS', stream 'FRESH'" in refused["msg"]
    assert "these changes stay: stream 'ORDERS' (update)" in refused["msg"] and refused["changed"], refused["msg"]
    assert stream_names(hub_and_leaf["hub"]) == ["ORDERS"] and consumer_names(hub_and_leaf["hub"], "ORDERS") == []
    assert [(c["name"], c.get("undone")) for c in refused["consumer_results"]] == [("early", True), ("one", True)]
    # the next run makes it all, once the cause is gone, and a second changes nothing
    fixed = dict(hub, streams=[{"name": "ORDERS", "subjects": ["orders.>"], "max_age": "1d"},
                               {"name": "FRESH", "subjects": ["fresh.>"], "max_consumers": 2}],
                 consumers=[{"stream": "ORDERS", "name": "early"}, {"stream": "FRESH", "name": "one"},
                            {"stream": "FRESH", "name": "two"}])
    assert run_module("jetstream_domain", fixed)["changed"]
    assert not run_module("jetstream_domain", fixed)["changed"]
