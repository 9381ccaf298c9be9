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
