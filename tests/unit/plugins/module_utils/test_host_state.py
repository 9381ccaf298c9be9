"""_host_state's checks of what it is given: an unknown fact subset raises HostStateError, worded as
ansible.builtin.setup words it; status URLs, timeouts and the errors of commands."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _host_state as hs
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError


def test_host_state_unknown_gather_subset_raises():
    with pytest.raises(hs.HostStateError) as caught:
        hs.gather_facts(None, ["no_such_subset"])
    assert isinstance(caught.value, NatsEdgeError)
    assert str(caught.value).startswith("gather_subset: ") and "no_such_subset" in str(caught.value)
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize("url", ["http://127.0.0.1:8222", "https://hub-1:8222/", "HTTP://10.0.0.5:8080/json/",
                                 "http://[::1]:8222/varz"])
def test_a_status_url_is_http_or_https_with_a_host(url):
    assert hs.check_status_url("monitor_url", url) == url


@pytest.mark.parametrize("url, message", [
    ("file:///etc/passwd", "urls: 'file:///etc/passwd' is not an http or https URL; only http:// and https:// URLs "
                           "are read"),
    ("ftp://mirror/varz", "urls: 'ftp://mirror/varz' is not an http or https URL; only http:// and https:// URLs are "
                          "read"),
    ("127.0.0.1:8222", "urls: '127.0.0.1:8222' is not an http or https URL; write it with its scheme, such as "
                       "http://127.0.0.1:8222"),
    ("localhost:8222/varz", "write it with its scheme, such as http://localhost:8222/varz"),
    ("http:///varz", "urls: 'http:///varz' names no host; write http://HOST:PORT/varz"),
    ("http://[::1:8222", "urls: 'http://[::1:8222' is not a URL"),
])
def test_any_other_url_is_refused_naming_the_option_and_the_value(url, message):
    with pytest.raises(hs.HostStateError) as caught:
        hs.check_status_url("urls", url)
    assert message in str(caught.value)


@pytest.mark.parametrize("seconds, refused", [(5.0, False), (0.25, False), (0, True), (-1.0, True),
                                              (float("nan"), True), (float("inf"), True)])
def test_a_timeout_is_a_number_of_seconds_above_0(seconds, refused):
    if refused:
        with pytest.raises(hs.HostStateError, match="timeout: .*: use a number of seconds above 0"):
            hs.check_timeout("timeout", seconds)
    else:
        assert hs.check_timeout("timeout", seconds) == seconds


def test_a_command_error_names_the_command_and_reports_it():
    error = hs.CommandError("/usr/bin/systemctl show x.service", "did not finish within 2s and was killed",
                            timed_out=True)
    assert isinstance(error, NatsEdgeError) and error.timed_out
    assert str(error) == "/usr/bin/systemctl show x.service: did not finish within 2s and was killed"
    assert error.result == {"cmd": "/usr/bin/systemctl show x.service"}


def test_a_status_page_answering_an_error_is_read_only_when_its_body_is_asked_for():
    """json_url: /healthz answers 503 with its reason as JSON; nats_server_wait reads that body (error_body), every
    other reader takes the error as no answer. A body that is not JSON is no answer either way."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"status": "unavailable", "error": "JetStream is not current"}' if self.path == "/healthz" else b"down"
            self.send_response(503)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = "http://127.0.0.1:%d" % server.server_port
        assert hs.HostReader.json_url(base + "/healthz", 5, error_body=True) == (
            {"status": "unavailable", "error": "JetStream is not current"}, "")
        data, error = hs.HostReader.json_url(base + "/healthz", 5)
        assert data is None and "503" in error
        data, error = hs.HostReader.json_url(base + "/varz", 5, error_body=True)
        assert data is None and "503" in error
    finally:
        server.shutdown()
