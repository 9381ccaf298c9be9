"""An unknown fact subset raises HostStateError, worded as ansible.builtin.setup words it."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _host_state as hs
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError


def test_host_state_unknown_gather_subset_raises():
    with pytest.raises(hs.HostStateError) as caught:
        hs.gather_facts(None, ["no_such_subset"])
    assert isinstance(caught.value, NatsEdgeError)
    assert str(caught.value).startswith("gather_subset: ") and "no_such_subset" in str(caught.value)
    assert caught.value.__cause__ is not None
