"""The client's missing-library check raises instead of failing the module."""

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
