"""A stream asked for and found in no domain read raises, with what did not answer in its result."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_reader import InfoFailure, Report


def test_report_check_found_raises_naming_the_missing_streams():
    report = Report(None, None, 0, account="ops")
    report.streams = [{"name": "ORDERS"}]
    report.unanswered = [{"domain": "leaf", "error": "timeout"}]
    assert report.check_found(["ORDERS"]) is None
    with pytest.raises(InfoFailure) as caught:
        report.check_found(["ORDERS", "A", "B"])
    assert str(caught.value) == "streams 'A', 'B' not found in  as account ops"
    assert caught.value.result == {"unanswered": [{"domain": "leaf", "error": "timeout"}]}
