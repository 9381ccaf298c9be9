"""Unit tests for the pure logic of lab/fleet-check (no lab needed): the nats CLI contexts it connects with, and
what it reads of ansible-playbook's output and of its snapshots."""
import importlib.util
import json
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

FLEET_CHECK = Path(__file__).resolve().parents[2] / "lab" / "fleet-check"


def _load():
    loader = SourceFileLoader("fleet_check", str(FLEET_CHECK))
    spec = importlib.util.spec_from_loader("fleet_check", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fleet_check"] = module
    loader.exec_module(module)
    return module


fc = _load()


@pytest.fixture
def files(tmp_path):
    """A CA, creds, an nkey seed and a client certificate and key, as files (their content does not matter)."""
    out = {}
    for name in ("ca.pem", "leaf.creds", "user.nk", "client.pem", "client-key.pem"):
        out[name] = tmp_path / name
        out[name].write_text("x\n")
    return dict((name, str(path)) for name, path in out.items())


def hub(files, **more):
    """A context as the nats_fleet role writes it (nats_fleet_contexts)."""
    return dict({"description": "JetStream domain hub as TEST/leaf", "ca": files["ca.pem"],
                 "creds": files["leaf.creds"],
                 "url": "nats://127.0.0.1:4222,nats://127.0.0.1:4232, nats://127.0.0.1:4282"}, **more)


def test_a_fleet_context_connects_with_its_servers_creds_and_ca(files):
    options, tls, api = fc.context_options("hub", hub(files))
    assert options == {"servers": ["nats://127.0.0.1:4222", "nats://127.0.0.1:4232", "nats://127.0.0.1:4282"],
                       "user_credentials": files["leaf.creds"]}
    assert tls == {"ca": files["ca.pem"]}
    assert api == "$JS.API"


def test_empty_values_leave_keys_unset_as_natscli_writes_them(files):
    # natscli's own file: every key, most of them empty
    context = dict((key, "") for key in fc.CONTEXT_TEXT)
    context.update(hub(files), tls_first=False, windows_ca_certs_match=[], socks_proxy="", nsc="", user_jwt="",
                   windows_cert_store="")
    options, tls, api = fc.context_options("hub", context)
    assert sorted(options) == ["servers", "user_credentials"] and tls == {"ca": files["ca.pem"]}
    assert api == "$JS.API"


def test_every_key_natscli_connects_with(files, monkeypatch):
    monkeypatch.setenv("FLEET_TEST_DIR", str(Path(files["ca.pem"]).parent))
    context = {"url": "tls://a:4222", "ca": files["ca.pem"], "user": "u", "password": "p", "token": "t",
               "cert": files["client.pem"], "key": files["client-key.pem"], "inbox_prefix": "_MINE",
               "tls_first": True, "jetstream_domain": "spoke-1", "jetstream_api_prefix": "JS.x.API",
               "color_scheme": "dark", "jetstream_event_prefix": "$JS.EVENT"}
    options, tls, api = fc.context_options("all", context)
    assert options == {"servers": ["tls://a:4222"], "user": "u", "password": "p", "token": "t",
                       "inbox_prefix": "_MINE", "tls_handshake_first": True}
    assert tls == {"ca": files["ca.pem"], "cert": files["client.pem"], "key": files["client-key.pem"]}
    assert api == "$JS.spoke-1.API"
    # an API prefix alone; creds with the environment expanded, an nkey seed
    options, _tls, api = fc.context_options("x", {"url": "a", "ca": files["ca.pem"], "jetstream_api_prefix": "JS.x.API",
                                                  "creds": "${FLEET_TEST_DIR}/leaf.creds"})
    assert api == "JS.x.API" and options["user_credentials"] == files["leaf.creds"]
    options, _tls, _api = fc.context_options("x", {"url": "a", "ca": files["ca.pem"], "nkey": files["user.nk"]})
    assert options["nkeys_seed"] == files["user.nk"]


@pytest.mark.parametrize("change, message", [
    ({"ca": ""}, "names no CA (ca)"),
    ({"ca": None}, "names no CA (ca)"),
    ({"url": ""}, "names no server (url)"),
    ({"socks_proxy": "127.0.0.1:1080"}, "names socks_proxy, which this check does not connect with"),
    ({"user_jwt": "eyJ0", "nsc": "nsc://OP/TEST/leaf"}, "names nsc, user_jwt, which this check does not connect"),
    ({"windows_cert_store": "user"}, "names windows_cert_store"),
    ({"servers": ["nats://a:4222"]}, "names servers, which"),
    ({"nkey": "@"}, "names more than one kind of credentials (creds, nkey)"),
    ({"user": "u"}, "names more than one kind of credentials (user, creds)"),
    ({"creds": "", "password": "p"}, "names a password without a user"),
    ({"cert": "@client.pem"}, "names cert without key"),
    ({"key": "@client-key.pem"}, "names key without cert"),
    ({"ca": "/nonexistent/ca.pem"}, "names ca /nonexistent/ca.pem, which is not a file"),
    ({"url": ["nats://a:4222"]}, "url of the wrong type"),
    ({"tls_first": "yes"}, "tls_first of the wrong type"),
])
def test_a_context_that_names_too_little_or_what_is_not_understood_fails(files, change, message):
    change = dict((k, files[v[1:]] if isinstance(v, str) and v.startswith("@") and v[1:] in files
                   else files["user.nk"] if v == "@" else v) for k, v in change.items())
    with pytest.raises(fc.Mismatch) as failed:
        fc.context_options("hub", hub(files, **change))
    assert str(failed.value).startswith("context hub: ") and message in str(failed.value)


def test_a_context_that_is_no_object_fails():
    with pytest.raises(fc.Mismatch, match="not a JSON object"):
        fc.context_options("odd", ["nats://a:4222"])


def test_the_fleets_contexts_pass(files):
    """The contexts nats_fleet_contexts writes (its content, as the role's copy writes it) pass as they are."""
    for name, creds in (("hub", files["leaf.creds"]), ("sys", files["leaf.creds"])):
        content = json.dumps({"ca": files["ca.pem"], "creds": creds, "description": name, "url": "nats://h:4222"},
                             indent=4, sort_keys=True)
        options, tls, _api = fc.context_options(name, json.loads(content))
        assert options["servers"] == ["nats://h:4222"] and tls == {"ca": files["ca.pem"]}


RUN = """
PLAY [Roll the fleet CA, step 1 of 3, trust the new CA beside the current one] ***

TASK [nats_edge.fleet.nats_fleet : Make the key of ca] *************************
ok: [hub-1 -> localhost]

TASK [nats_edge.fleet.nats_fleet : Make the key of ca-next] ********************
\x1b[0;33mchanged: [hub-1 -> localhost]\x1b[0m

TASK [nats_edge.fleet.nats_server : Copy the CA bundle [TLS]] ******************
--- before: /etc/nats-server/tls/ca.pem
+++ after: /etc/nats-server/tls/ca.pem
changed: [spoke1-1]
changed: [hub-2] => (item=ca.pem)
changed: [hub-2] => (item=more.pem)
ok: [hub-3]

RUNNING HANDLER [nats_edge.fleet.nats_server : Reload nats-server] *************
changed: [spoke1-1]

PLAY RECAP *********************************************************************
\x1b[0;33mhub-1\x1b[0m : \x1b[0;32mok=65 \x1b[0m \x1b[0;33mchanged=1 \x1b[0m unreachable=0 failed=0 skipped=23 rescued=0 ignored=0
hub-2                      : ok=32   changed=1    unreachable=0    failed=0    skipped=17   rescued=0    ignored=0
spoke1-1                   : ok=32   changed=2    unreachable=0    failed=0    skipped=17   rescued=0    ignored=0

Playbook run took 0 days, 0 hours, 1 minutes, 16 seconds
"""


def test_play_recap_reads_each_hosts_counts_through_colours():
    recap = fc.play_recap(RUN)
    assert sorted(recap) == ["hub-1", "hub-2", "spoke1-1"]
    assert recap["hub-1"] == {"ok": 65, "changed": 1, "unreachable": 0, "failed": 0, "skipped": 23, "rescued": 0,
                              "ignored": 0}
    assert recap["spoke1-1"]["changed"] == 2
    assert fc.play_recap("PLAY [x] ***\n") == {}


def test_changed_tasks_in_the_order_they_ran_with_their_play_and_hosts():
    assert fc.changed_tasks(RUN) == [(1, "Make the key of ca-next", ["hub-1"]),
                                     (1, "Copy the CA bundle [TLS]", ["spoke1-1", "hub-2"]),
                                     (1, "Reload nats-server", ["spoke1-1"])]
    # the same task in the next play (of the same name: an imported playbook's again) is a change of its own
    again = RUN.split("PLAY RECAP", maxsplit=1)[0] + RUN.split("\n\n", maxsplit=1)[0] + "\n\nTASK [x : Reload nats-server] ***\n"
    again += "changed: [hub-2]\n"
    assert fc.changed_tasks(again)[-2:] == [(1, "Reload nats-server", ["spoke1-1"]),
                                            (2, "Reload nats-server", ["hub-2"])]


def test_differences_name_the_places_not_the_values():
    before = {"controller": {"tls/ca.pem": ["0o100644", "aa"], "tls/ca-key.pem": ["0o100600", "bb"]},
              "hosts": {"hub-1": {"files": {"/etc/nats-server/tls/ca.pem": ["0o100644", 0, 0, "aa"]},
                                  "config_load_time": "t1"}},
              "served": {"hub-1": "cc"}}
    assert fc.differences(before, json.loads(json.dumps(before))) == []
    after = json.loads(json.dumps(before))
    after["controller"]["tls/ca-key.pem"][0] = "0o100644"
    after["controller"]["tls/ca-next-key.pem"] = ["0o100600", "dd"]
    after["hosts"]["hub-1"]["config_load_time"] = "t2"
    after["served"]["hub-1"] = "ee"
    found = fc.differences(before, after)
    assert found == ["controller/tls/ca-key.pem", "controller/tls/ca-next-key.pem", "hosts/hub-1/config_load_time",
                     "served/hub-1"]
    assert not any(value in " ".join(found) for value in ("bb", "dd", "t2", "ee"))
