"""Rows of the bad-input table (test_bad_input.py) for host_state, nats_server_state and nats_leaf_reconnect."""

SERVER_STATE = "nats_server_state"
HOST_STATE = "host_state"
RECONNECT = "nats_leaf_reconnect"
WAIT = "nats_server_wait"

# a user's public key, where an account's is expected
USER_KEY = "U" + "A" * 55
# an account's public key the server has never seen (its link could be on its way back: it is waited for)
ANY_ACCOUNT_KEY = "A" + "B" * 55


def rows(table):
    """(id, module, arguments, message fragment) rows; ``table`` is test_bad_input, for its constants."""
    system = dict(servers=["{url}"], creds="{sys_creds}", timeout=2.0)
    return [
        # -- nats_server_state: only an http or https monitoring port is read; a time to wait is above 0 -------------
        ("server-state-monitor-url-file", SERVER_STATE, dict(monitor_url="file://{files}"),
         "monitor_url: 'file://{files}' is not an http or https URL; only http:// and https:// URLs are read"),
        ("server-state-monitor-url-ftp", SERVER_STATE, dict(monitor_url="ftp://127.0.0.1:{dead}"),
         "monitor_url: 'ftp://127.0.0.1:{dead}' is not an http or https URL"),
        ("server-state-monitor-url-no-scheme", SERVER_STATE, dict(monitor_url="127.0.0.1:{dead}"),
         "monitor_url: '127.0.0.1:{dead}' is not an http or https URL; write it with its scheme, such as "
         "http://127.0.0.1:{dead}"),
        ("server-state-monitor-url-no-host", SERVER_STATE, dict(monitor_url="http:///varz"),
         "monitor_url: 'http:///varz' names no host"),
        ("server-state-monitor-url-not-a-url", SERVER_STATE, dict(monitor_url="http://[::1:{dead}"),
         "monitor_url: 'http://[::1:{dead}' is not a URL"),
        ("server-state-timeout-zero", SERVER_STATE, dict(monitor_url="http://127.0.0.1:{dead}", timeout=0),
         "timeout: 0: use a number of seconds above 0"),
        ("server-state-timeout-negative", SERVER_STATE, dict(binary="{files}/kept.bin", timeout=-2),
         "timeout: -2: use a number of seconds above 0"),
        # -- host_state: status pages over http or https only ----------------------------------------------------------
        ("host-state-urls-file", HOST_STATE, dict(urls=["http://127.0.0.1:{dead}/json/", "file://{files}/kept.bin"]),
         "urls: 'file://{files}/kept.bin' is not an http or https URL; only http:// and https:// URLs are read"),
        ("host-state-urls-no-scheme", HOST_STATE, dict(urls=["localhost:{dead}/json/"]),
         "urls: 'localhost:{dead}/json/' is not an http or https URL; write it with its scheme, such as "
         "http://localhost:{dead}/json/"),
        ("host-state-urls-no-host", HOST_STATE, dict(urls=["https:///json/"]), "urls: 'https:///json/' names no host"),
        ("host-state-timeout-zero", HOST_STATE, dict(urls=["http://127.0.0.1:{dead}/json/"], timeout=0),
         "timeout: 0: use a number of seconds above 0"),
        # -- nats_server_wait: refused before the first read -------------------------------------------------------------
        ("server-wait-url-file", WAIT, dict(url="file://{files}", endpoint="healthz"),
         "url: 'file://{files}' is not an http or https URL; only http:// and https:// URLs are read"),
        ("server-wait-endpoint-choice", WAIT, dict(url="http://127.0.0.1:{dead}", endpoint="connz"),
         "endpoint must be one of: healthz, varz, routez, leafz, jsz"),
        ("server-wait-loaded-after-healthz", WAIT, dict(url="http://127.0.0.1:{dead}", endpoint="healthz", loaded_after=1.5),
         "loaded_after: the config load time is read from varz, not healthz"),
        ("server-wait-ca-missing", WAIT, dict(url="https://127.0.0.1:{dead}", endpoint="healthz", ca_path="{files}/no-ca.pem"),
         "ca_path: {files}/no-ca.pem: no such file on the host"),
        ("server-wait-timeout-negative", WAIT, dict(url="http://127.0.0.1:{dead}", endpoint="healthz", timeout=-1),
         "timeout: -1: use a number of seconds, 0 or more"),
        # -- nats_leaf_reconnect: what accounts and remote_name take, refused before any wait ------------------------
        ("leaf-reconnect-account-name", RECONNECT, dict(system, server_name="n1", accounts=["APP"], wait=60),
         "leaf links of n1: accounts: APP is an account name; accounts takes account public keys (A...): APP is A"),
        ("leaf-reconnect-account-unknown-name", RECONNECT, dict(system, server_name="n1", accounts=["NOPE"], wait=60),
         "leaf links of n1: accounts: NOPE is not an account public key (A...), and no account the server knows is "
         "named so"),
        ("leaf-reconnect-user-key", RECONNECT, dict(system, server_name="n1", accounts=[USER_KEY], wait=60),
         "accounts: %s is a user public key; accounts takes account public keys (A...)" % USER_KEY),
        ("leaf-reconnect-unknown-remote", RECONNECT,
         dict(system, remote_name="nowhere", accounts=[ANY_ACCOUNT_KEY], wait=60),
         "leaf links of the hub side of nowhere: remote_name: no server named 'nowhere' has a leaf connection to "
         "these servers; they have no leaf connections"),
        ("leaf-reconnect-wait-negative", RECONNECT,
         dict(system, server_name="n1", accounts=[ANY_ACCOUNT_KEY], wait=-1),
         "wait: -1: use 0 or more seconds"),
    ]
