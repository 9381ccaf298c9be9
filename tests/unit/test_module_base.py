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
