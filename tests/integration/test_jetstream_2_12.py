"""The stream and consumer options of nats-server 2.11-2.14 through jetstream_stream and jetstream_consumer, against
one real server: counters, atomic and fast batches, schedules, persist modes, sealing, priority groups and pausing,
each created, run again unchanged, and refused where the server's rules refuse a change; on Debian's 2.9.10 each is
refused before anything is sent, naming the option and the version it needs."""

import datetime

from conftest import _js_conf, free_port, jetstream


def stream_info(url, name):
    with jetstream(url) as js:
        return js.call("STREAM.INFO.%s" % name)


def names(url):
    with jetstream(url) as js:
        return sorted(js.call("STREAM.NAMES").get("streams") or [])


def in_an_hour():
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    return moment.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def converged(module, name, args):
    """Run twice: the first changes, the second reports no change."""
    first = module(name, args)
    assert first.get("changed") and not first.get("failed"), first
    again = module(name, args)
    assert not again.get("changed") and not again.get("failed"), again
    return first


def test_new_stream_and_consumer_options(nats_binary, start_server, tmp_path, module):
    binary, version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, _js_conf("s", port, http, tmp_path / "js", "site"), "s", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    base = dict(servers=[url])

    if version.startswith("2.9."):
        for spec, wanted in ((dict(name="C", subjects=["c.>"], allow_msg_counter=True), "allow_msg_counter"),
                             (dict(name="B", subjects=["b.>"], allow_batched=True), "allow_batched")):
            refused = module("jetstream_stream", dict(base, **spec))
            assert refused.get("failed") and wanted in refused["msg"] and "2.1" in refused["msg"], refused
        with jetstream(url) as js:
            js.call("STREAM.CREATE.W", {"name": "W", "subjects": ["w.>"], "storage": "file"})
        refused = module("jetstream_consumer", dict(base, stream="W", name="paused", pause_until=in_an_hour()))
        assert refused.get("failed") and "pause_until" in refused["msg"] and "2.11" in refused["msg"], refused
        assert names(url) == ["W"]
        return

    # a counter: created as asked, and never turned off
    counter = dict(base, name="COUNTS", subjects=["counts.>"], allow_msg_counter=True)
    converged(module, "jetstream_stream", counter)
    assert stream_info(url, "COUNTS")["config"]["allow_msg_counter"] is True
    refused = module("jetstream_stream", dict(counter, allow_msg_counter=False))
    assert refused.get("failed") and "allow_msg_counter" in refused["msg"], refused
    assert stream_info(url, "COUNTS")["config"]["allow_msg_counter"] is True

    # a counter does not go with discard new: refused before anything is sent
    refused = module("jetstream_stream", dict(base, name="BAD", subjects=["bad.>"], allow_msg_counter=True,
                                              discard="new"))
    assert refused.get("failed") and "allow_msg_counter" in refused["msg"] and "discard" in refused["msg"], refused
    assert "BAD" not in names(url)

    # batches, schedules and a persist mode; check mode predicts and sends nothing
    jobs = dict(base, name="JOBS", subjects=["jobs.>"], allow_atomic=True, allow_batched=True,
                allow_msg_schedules=True, allow_rollup=True, persist_mode="default")
    predicted = module("jetstream_stream", jobs, check_mode=True, diff=True)
    assert predicted.get("changed") and "JOBS" not in names(url), predicted
    converged(module, "jetstream_stream", jobs)
    config = stream_info(url, "JOBS")["config"]
    assert (config.get("allow_atomic"), config.get("allow_batched"), config.get("allow_msg_schedules")) == (
        True, True, True), config

    # a pull consumer with priority groups, then paused and resumed in place
    consumer = dict(base, stream="JOBS", name="workers", ack_policy="explicit", priority_groups=["jobs"],
                    priority_policy="pinned_client", priority_timeout="2m")
    converged(module, "jetstream_consumer", consumer)
    with jetstream(url) as js:
        info = js.call("CONSUMER.INFO.JOBS.workers")
    assert (info["config"]["priority_groups"], info["config"]["priority_policy"]) == (["jobs"], "pinned_client"), info
    until = in_an_hour()
    paused = converged(module, "jetstream_consumer", dict(consumer, pause_until=until))
    assert paused["operation"] == "update", paused
    with jetstream(url) as js:
        info = js.call("CONSUMER.INFO.JOBS.workers")
    assert info.get("paused") is True, info
    resume = dict(consumer, paused=False)
    predicted = module("jetstream_consumer", resume, check_mode=True)
    assert predicted.get("changed"), predicted
    with jetstream(url) as js:
        assert js.call("CONSUMER.INFO.JOBS.workers").get("paused") is True
    converged(module, "jetstream_consumer", resume)
    with jetstream(url) as js:
        assert not js.call("CONSUMER.INFO.JOBS.workers").get("paused")

    # sealed: only on a stream that exists, and never undone
    done = dict(base, name="DONE", subjects=["done.>"])
    converged(module, "jetstream_stream", done)
    predicted = module("jetstream_stream", dict(done, sealed=True), check_mode=True, diff=True)
    assert predicted.get("changed") and not stream_info(url, "DONE")["config"].get("sealed"), predicted
    converged(module, "jetstream_stream", dict(done, sealed=True))
    assert stream_info(url, "DONE")["config"]["sealed"] is True
    refused = module("jetstream_stream", dict(done, sealed=False))
    assert refused.get("failed") and "sealed" in refused["msg"], refused
    refused = module("jetstream_stream", dict(base, name="NEW", subjects=["new.>"], sealed=True))
    assert refused.get("failed") and "sealed" in refused["msg"] and "NEW" not in names(url), refused
