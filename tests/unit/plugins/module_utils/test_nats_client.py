"""The client facade: the missing-library check raises instead of failing the module; lookup tells "not found" from other errors."""

import pytest

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.nats_edge.fleet.plugins.module_utils import _nats_client as nc
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError


def test_require_nats_py_raises_with_the_missing_lib_text_and_traceback(monkeypatch):
    monkeypatch.setattr(nc, "load_nats_py", lambda servers=(): False)
    monkeypatch.setattr(nc, "_IMPORT_ERROR", "Traceback: no module named nats")
    with pytest.raises(NatsEdgeError) as caught:
        nc.require_nats_py({"servers": ["nats://a:4222"]})
    assert str(caught.value) == missing_required_lib(nc.NATS_PY)
    assert caught.value.result == {"exception": "Traceback: no module named nats"}


def test_require_nats_py_passes_with_the_library(monkeypatch):
    asked = []
    monkeypatch.setattr(nc, "load_nats_py", lambda servers=(): asked.append(list(servers)) or True)
    nc.require_nats_py({"servers": ["ws://a:8080"]})
    nc.require_nats_py({})
    assert asked == [["ws://a:8080"], []]


class _Answers(object):
    """A client whose JetStream API answers each request with the error code given for it (None: a reply)."""

    def __init__(self, err_code):
        self.err_code = err_code

    def request_json(self, subject, body=None, timeout=None):
        if self.err_code is None:
            return {"subject": subject}
        return {"error": {"code": 404, "err_code": self.err_code, "description": "not found"}}


@pytest.mark.parametrize("err_code, missing, found", [
    (None, nc.JS_STREAM_NOT_FOUND, {"subject": "$JS.API.STREAM.INFO.A"}),
    (nc.JS_STREAM_NOT_FOUND, nc.JS_STREAM_NOT_FOUND, None),
    (nc.JS_CONSUMER_NOT_FOUND, nc.JS_CONSUMER_NOT_FOUND, None),
])
def test_lookup_is_none_only_for_what_it_looks_for(err_code, missing, found):
    assert nc.JetStream(_Answers(err_code)).lookup("STREAM.INFO.A", missing) == found


def test_lookup_raises_any_other_error():
    with pytest.raises(nc.JetStreamError) as caught:
        nc.JetStream(_Answers(nc.JS_CONSUMER_NOT_FOUND)).lookup("STREAM.INFO.A")
    assert caught.value.err_code == nc.JS_CONSUMER_NOT_FOUND


class _Pages(object):
    """A JetStream API that lists ``total`` names 256 to a page from the offset asked for."""

    def __init__(self, total):
        self.total, self.asked = total, []

    def request_json(self, subject, body=None, timeout=None):
        self.asked.append((subject, body["offset"]))
        names = ["s%d" % n for n in range(body["offset"], min(body["offset"] + 256, self.total))]
        return {"total": self.total, "offset": body["offset"], "limit": 256, "streams": names}


@pytest.mark.parametrize("total, requests", [(0, 1), (5, 1), (256, 1), (600, 3)])
def test_every_page_reads_a_paged_list_to_its_end(total, requests):
    api = _Pages(total)
    found = nc.JetStream(api, domain="hub").every_page("STREAM.NAMES", "streams")
    assert found == ["s%d" % n for n in range(total)]
    assert [offset for _subject, offset in api.asked] == [256 * n for n in range(requests)]
    assert {subject for subject, _offset in api.asked} == {"$JS.hub.API.STREAM.NAMES"}


# --------------------------------------------------------------------------
# tls_handshake_first


def test_tls_handshake_first_is_a_connection_option_off_by_default():
    assert nc.CONNECTION_ARGSPEC["tls_handshake_first"] == {"type": "bool", "default": False}


def test_tls_handshake_first_asks_nats_py_to_start_tls_first_with_the_systems_cas_or_tls_ca():
    import ssl

    assert nc.load_nats_py()
    options = nc.NatsClient({"tls_handshake_first": True})._options(["nats://a:4222"])
    assert options["tls_handshake_first"] is True and isinstance(options["tls"], ssl.SSLContext)
    assert "tls_handshake_first" not in nc.NatsClient({})._options(["nats://a:4222"])


def test_tls_handshake_first_is_refused_for_websocket_urls():
    assert nc.load_nats_py()
    with pytest.raises(nc.NatsClientError) as caught:
        nc.NatsClient({"tls_handshake_first": True})._options(["nats://a:4222", "wss://user:pw@b:443"])
    assert str(caught.value).startswith("tls_handshake_first: wss://") and "pw" not in str(caught.value)
    assert "a websocket connection runs TLS with wss://" in str(caught.value)


def test_tls_handshake_first_is_refused_by_a_nats_py_without_it(monkeypatch):
    assert nc.load_nats_py()
    from nats.aio.client import Client

    async def connect(self, servers=None, tls=None, tls_hostname=None):  # an older nats-py's signature, in short
        return None

    monkeypatch.setattr(Client, "connect", connect)
    with pytest.raises(nc.NatsClientError) as caught:
        nc.NatsClient({"tls_handshake_first": True})._options(["nats://a:4222"])
    assert str(caught.value) == ("tls_handshake_first: this nats-py cannot start TLS before the server's INFO; it "
                                 "needs nats-py 2.6.0 or later on the host the module runs on")
    # without the option the same nats-py connects as before
    assert "tls_handshake_first" not in nc.NatsClient({})._options(["nats://a:4222"])


@pytest.mark.parametrize("first, error, hint", [
    (False, Exception("nats: empty response from server when expecting INFO message"), "set tls_handshake_first: true"),
    (True, TimeoutError(), "set tls_handshake_first: false"),
    (True, Exception("[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"),
     "set tls_handshake_first: false"),
    (True, Exception("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"), None),
    (False, TimeoutError(), None),
    (False, Exception("nats: 'Authorization Violation'"), None),
])
def test_a_connection_that_fails_as_a_tls_first_mismatch_says_which_side_wants_what(first, error, hint):
    text = nc._handshake_hint({"tls_handshake_first": first}, error)
    assert (hint in text) if hint else text == ""


@pytest.mark.parametrize("prefix", ["_INBOX_ops", "fleet.replies", "a"])
def test_an_inbox_prefix_is_tokens_of_a_subject(prefix):
    assert nc.check_inbox_prefix(prefix) == prefix


@pytest.mark.parametrize("prefix", ["", "_INBOX.*", "a.>", "a..b", ".a", "a.", "with space", "tab\there"])
def test_an_inbox_prefix_that_cannot_lead_a_subject_is_refused_naming_the_option(prefix):
    with pytest.raises(nc.NatsClientError, match="inbox_prefix: .* is not a subject prefix"):
        nc.check_inbox_prefix(prefix)
