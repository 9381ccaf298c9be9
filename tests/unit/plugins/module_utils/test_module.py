"""What every module of the collection shares: credentials inside URLs never
reach the output."""

from ansible_collections.nats_edge.fleet.plugins.module_utils._module import redact, url_secrets


def test_redact_hides_userinfo_of_every_url():
    assert redact("cannot connect to nats://alice:s3cret@hub:4222, tls://TOKEN@edge:4222: refused") == (
        "cannot connect to nats://***@hub:4222, tls://***@edge:4222: refused")
    assert redact("nats://hub:4222 and user@example (not a URL)") == "nats://hub:4222 and user@example (not a URL)"
    assert redact(None) is None


def test_url_secrets_are_the_password_and_the_bare_token():
    assert url_secrets(["nats://alice:s3cret@hub:4222", "nats://T0KEN@edge", "nats://hub:4222"]) == {
        "alice:s3cret", "s3cret", "T0KEN"}
    assert url_secrets(None) == set()


def test_nats_py_loads_without_its_websocket_transport_unless_a_server_needs_it():
    import subprocess
    import sys

    probe = ("import sys; from ansible_collections.nats_edge.fleet.plugins.module_utils import _nats_client as c; "
             "assert c.load_nats_py(%r); print('aiohttp' in sys.modules and sys.modules['aiohttp'] is not None)")
    plain = subprocess.run([sys.executable, "-c", probe % (["nats://hub:4222"],)], capture_output=True, text=True,
                           check=True, env={"PYTHONPATH": ":".join(sys.path)})
    assert plain.stdout.strip() == "False"
    import importlib.util
    if importlib.util.find_spec("aiohttp") is None:
        return  # this nats-py has no websocket transport to load
    websocket = subprocess.run([sys.executable, "-c", probe % (["ws://hub:8080"],)], capture_output=True, text=True,
                               check=True, env={"PYTHONPATH": ":".join(sys.path)})
    assert websocket.stdout.strip() == "True"


class _PlaceholderClient(object):
    """Answers 10039 until register_account_everywhere ran, as a meta leader holding a placeholder does."""

    def __init__(self, heals=True):
        self.heals = heals
        self.registered = 0
        self.requests = []

    def register_account_everywhere(self):
        self.registered += 1
        return True

    def request_json(self, subject, body=None, timeout=None):
        self.requests.append(subject)
        if self.registered and self.heals:
            return {"ok": True}
        return {"error": {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"}}


def test_a_10039_makes_the_client_connect_to_every_server_once_and_ask_again(monkeypatch):
    from ansible_collections.nats_edge.fleet.plugins.module_utils import _nats_client as client_module
    monkeypatch.setattr(client_module.time, "sleep", lambda _seconds: None)
    client = _PlaceholderClient()
    js = client_module.JetStream(client, domain="hub")
    assert js.call("STREAM.INFO.x") == {"ok": True}
    assert client.registered == 1 and client.requests == ["$JS.hub.API.STREAM.INFO.x"] * 2


def test_an_account_without_jetstream_still_gets_10039_after_a_bounded_retry(monkeypatch):
    from ansible_collections.nats_edge.fleet.plugins.module_utils import _nats_client as client_module
    monkeypatch.setattr(client_module.time, "sleep", lambda _seconds: None)
    client = _PlaceholderClient(heals=False)
    js = client_module.JetStream(client)
    for _attempt in range(2):
        try:
            js.call("INFO")
        except client_module.JetStreamError as exc:
            assert exc.err_code == 10039
        else:
            raise AssertionError("no error")
    # connects once per run, then each 10039 is final
    assert client.registered == 1 and len(client.requests) == 5


class _StoreFailingClient(object):
    """Answers a stream create with 10049 a number of times, then (while the meta leader drops the
    failed assignment) 10058, then creates it: what 2.9.10 did under load."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []

    def register_account_everywhere(self):
        raise AssertionError("not a placeholder")

    def request_json(self, subject, body=None, timeout=None):
        self.requests.append(subject)
        err_code = self.replies.pop(0) if self.replies else None
        if err_code is None:
            return {"config": body}
        description = {10049: "error creating store for stream", 10058: "stream name already in use",
                       10052: "stream not found"}[err_code]
        return {"error": {"code": 500, "err_code": err_code, "description": description}}


def test_a_stream_create_whose_store_failed_is_sent_again(monkeypatch):
    from ansible_collections.nats_edge.fleet.plugins.module_utils import _nats_client as client_module
    slept = []
    monkeypatch.setattr(client_module.time, "sleep", slept.append)
    client = _StoreFailingClient([10049, 10058])
    js = client_module.JetStream(client, domain="hub")
    assert js.call("STREAM.CREATE.orders", {"name": "orders"}) == {"config": {"name": "orders"}}
    assert client.requests == ["$JS.hub.API.STREAM.CREATE.orders"] * 3 and len(slept) == 2


def test_a_store_that_keeps_failing_is_reported_with_its_tries(monkeypatch):
    from ansible_collections.nats_edge.fleet.plugins.module_utils import _nats_client as client_module
    monkeypatch.setattr(client_module.time, "sleep", lambda _seconds: None)
    client = _StoreFailingClient([10049] * 10)
    try:
        client_module.JetStream(client).call("STREAM.CREATE.orders", {"name": "orders"})
    except client_module.JetStreamError as exc:
        assert exc.err_code == 10049 and "5 tries" in str(exc) and "its log says why" in str(exc), str(exc)
    else:
        raise AssertionError("no error")
    # another error after a retry is reported as it is; other requests are never sent again
    client = _StoreFailingClient([10049, 10052])
    try:
        client_module.JetStream(client).call("STREAM.CREATE.orders", {"name": "orders"})
    except client_module.JetStreamError as exc:
        assert exc.err_code == 10052 and "tries" not in str(exc)
    client = _StoreFailingClient([10049])
    try:
        client_module.JetStream(client).call("STREAM.UPDATE.orders", {"name": "orders"})
    except client_module.JetStreamError as exc:
        assert exc.err_code == 10049 and len(client.requests) == 1


class _RaisingClient(object):
    def __init__(self, exc):
        self.exc = exc

    def request_json(self, subject, body=None, timeout=None):
        raise self.exc


def test_no_responders_is_told_by_its_type_and_names_the_domain():
    """A request nothing answers becomes NoRespondersError naming the domain (from the error it came from); another
    client error goes on as it is, whatever its words."""
    import pytest
    from ansible_collections.nats_edge.fleet.plugins.module_utils import _nats_client as client_module

    cause = client_module.NoRespondersError("nothing answers on $JS.hub.API.INFO")
    with pytest.raises(client_module.NoRespondersError, match=r"no JetStream answers on \$JS\.hub\.API\.INFO "
                                                              r"\(in domain 'hub'\): check domain") as raised:
        client_module.JetStream(_RaisingClient(cause), domain="hub").call("INFO")
    assert raised.value.__cause__ is cause
    other = client_module.NatsClientError("nothing answers, says a message that is no refusal")
    with pytest.raises(client_module.NatsClientError) as passed:
        client_module.JetStream(_RaisingClient(other)).call("INFO")
    assert passed.value is other
