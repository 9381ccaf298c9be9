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
