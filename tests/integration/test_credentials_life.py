"""Credentials over their whole life, against a real server in operator mode:
a removed user is revoked (a kept copy of its creds is refused), renewal before
expiry, key rotation with no moment without working creds, and rotation of an
account's signing key."""

import asyncio
import os
import shutil
import time

import nats
import pytest

from conftest import free_port, operator_mode_conf


# what the server answers a client it refuses for its credentials (a user unknown, revoked, signed by a retired key,
# or expired); nats-py raises nats.errors.Error with it
REFUSALS = ("Authorization Violation", "Authentication Revoked", "Authentication Expired")


def connects(url, creds):
    """Whether a client with these creds gets in: True once the server answers a flush, False when the server
    refuses the creds. Anything else (no server at the URL, a timeout) fails the test: it is no refusal."""
    async def attempt():
        from nats.errors import Error

        try:
            nc = await asyncio.wait_for(nats.connect(url, user_credentials=creds, allow_reconnect=False,
                                                     connect_timeout=2, max_reconnect_attempts=0), 10)
        except Error as exc:
            if any(refusal in str(exc) for refusal in REFUSALS):
                return False
            raise
        try:
            await nc.flush(timeout=2)
            return True
        finally:
            await nc.close()
    return asyncio.run(attempt())


def keep(path, tmp_path, name):
    """A copy of a creds file, as a host or a departed operator would keep it."""
    copy = str(tmp_path / ("kept-%s.creds" % name))
    shutil.copy(path, copy)
    return copy


@pytest.fixture
def fleet(nats_binary, start_server, module, tmp_path):
    binary, _version = nats_binary
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = module("nsc_operator", dict(base, signing_key=True))
    port, http = free_port(), free_port()
    server = start_server(binary, operator_mode_conf(tmp_path, operator, port, http), "op", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    push = dict(push=True, servers=[url], timeout=2.0)
    assert not module("nsc_account", dict(base, name="APP", signing_key=True, **push)).get("failed")
    return dict(base=base, url=url, push=push)


def user(module, fleet, name, **options):
    result = module("nsc_user", dict(fleet["base"], account="APP", name=name, **options))
    assert not result.get("failed"), result
    return result


def test_a_removed_user_is_revoked_and_its_kept_creds_are_refused(fleet, module, tmp_path):
    u1, u2 = user(module, fleet, "u1"), user(module, fleet, "u2")
    kept = keep(u1["creds_file"], tmp_path, "u1")
    assert connects(fleet["url"], kept) and connects(fleet["url"], u2["creds_file"])

    checked = module("nsc_user", dict(fleet["base"], account="APP", name="u1", state="absent", **fleet["push"]),
                     check_mode=True)
    assert checked["changed"] and checked["revoked_keys"] == [u1["user_public_key"]] and os.path.exists(
        u1["creds_file"]), checked
    removed = module("nsc_user", dict(fleet["base"], account="APP", name="u1", state="absent", **fleet["push"]))
    assert removed["changed"] and removed["account_jwt_changed"] and removed["unconfirmed"] == [], removed
    assert not os.path.exists(u1["creds_file"]) and not os.path.exists(removed["jwt_path"])
    assert not connects(fleet["url"], kept)  # the copy no longer gets in
    assert connects(fleet["url"], u2["creds_file"])  # the others still do
    again = module("nsc_user", dict(fleet["base"], account="APP", name="u1", state="absent", **fleet["push"]))
    assert not again["changed"], again

    u3 = user(module, fleet, "u3")
    kept3 = keep(u3["creds_file"], tmp_path, "u3")
    unrevoked = module("nsc_user", dict(fleet["base"], account="APP", name="u3", state="absent", revoke=False))
    assert unrevoked["changed"] and any("stay valid" in w for w in unrevoked["warnings"]), unrevoked
    assert connects(fleet["url"], kept3)


def test_a_revoked_user_keeps_its_files_and_a_new_issue_brings_it_back(fleet, module):
    u4 = user(module, fleet, "u4")
    revoked = module("nsc_user", dict(fleet["base"], account="APP", name="u4", state="revoked", **fleet["push"]))
    assert revoked["changed"] and os.path.exists(u4["creds_file"]), revoked
    assert not connects(fleet["url"], u4["creds_file"])
    assert not module("nsc_user", dict(fleet["base"], account="APP", name="u4", state="revoked",
                                       **fleet["push"]))["changed"]
    back = user(module, fleet, "u4")
    assert back["changed"] and connects(fleet["url"], back["creds_file"]), back
    missing = module("nsc_user", dict(fleet["base"], account="APP", name="nobody", state="revoked"))
    assert missing.get("failed") and "it is not in the store" in missing["msg"], missing


def test_a_jwt_due_for_renewal_is_issued_again_with_a_fresh_expiry(fleet, module):
    first = user(module, fleet, "sensor", expires_in=1000, renew_before=100)
    assert first["changed"] and not first["renewed"] and abs(first["expires_at"] - time.time() - 1000) < 30, first
    same = user(module, fleet, "sensor", expires_in=1000, renew_before=100)
    assert not same["changed"] and same["expires_at"] == first["expires_at"], same
    time.sleep(2)
    due = user(module, fleet, "sensor", expires_in=1000, renew_before=999)
    assert due["changed"] and due["renewed"] and due["expires_at"] > first["expires_at"], due
    assert os.stat(due["creds_file"]).st_mode & 0o777 == 0o600
    assert connects(fleet["url"], due["creds_file"])
    assert not user(module, fleet, "sensor", expires_in=1000, renew_before=100)["changed"]

    too_long = module("nsc_user", dict(fleet["base"], account="APP", name="sensor", expires_in="1h",
                                       renew_before="2h"))
    assert too_long.get("failed") and "renew_before (2h) is not shorter than the user's lifetime" in too_long["msg"]
    fixed = module("nsc_user", dict(fleet["base"], account="APP", name="sensor", expires="2035-01-01T00:00:00Z",
                                    renew_before="1d"))
    assert fixed.get("failed") and "renew_before needs expires_in" in fixed["msg"], fixed


def test_a_rotated_key_works_at_every_moment_and_the_old_one_is_refused_at_the_end(fleet, module, tmp_path):
    before = user(module, fleet, "leaf")
    old = keep(before["creds_file"], tmp_path, "leaf-old")
    rotated = user(module, fleet, "leaf", rotate=True)
    assert rotated["changed"] and rotated["rotated_from"] == before["user_public_key"], rotated
    assert rotated["user_public_key"] != before["user_public_key"]
    assert rotated["previous_keys"] == [before["user_public_key"]]
    # both work while the new creds travel to the hosts
    assert connects(fleet["url"], old) and connects(fleet["url"], rotated["creds_file"])
    assert not user(module, fleet, "leaf")["changed"]  # nothing forgotten, nothing redone
    finished = module("nsc_user", dict(fleet["base"], account="APP", name="leaf", revoke_previous=True,
                                       **fleet["push"]))
    assert finished["changed"] and finished["revoked_keys"] == [before["user_public_key"]], finished
    assert finished["previous_keys"] == []
    assert not connects(fleet["url"], old) and connects(fleet["url"], rotated["creds_file"])


def test_an_account_signing_key_rotation_reissues_its_users(fleet, module, tmp_path):
    a, b = user(module, fleet, "a"), user(module, fleet, "b")
    old_a = keep(a["creds_file"], tmp_path, "a-old")
    old_key = a["issuer"]
    rotated = module("nsc_account", dict(fleet["base"], name="APP", signing_key=True, rotate_signing_key=True,
                                         **fleet["push"]))
    assert rotated["changed"] and rotated["reissued_users"] == ["a", "b"], rotated
    assert rotated["previous_signing_keys"] == [old_key], rotated
    new_key, = set(rotated["signing_keys"]) - {old_key}
    # both keys are in the account: the re-issued creds and the old ones work while the new travel to the hosts
    assert connects(fleet["url"], a["creds_file"]) and connects(fleet["url"], b["creds_file"])
    assert connects(fleet["url"], old_a)
    steady = module("nsc_user", dict(fleet["base"], account="APP", name="a"))
    assert not steady["changed"] and steady["issuer"] == new_key, steady
    again = module("nsc_account", dict(fleet["base"], name="APP", signing_key=True, **fleet["push"]))
    assert not again["changed"] and again["previous_signing_keys"] == [old_key], again
    checked = module("nsc_account", dict(fleet["base"], name="APP", signing_key=True, retire_signing_keys=True,
                                         **fleet["push"]), check_mode=True)
    assert checked["changed"] and checked["retired_signing_keys"] == [old_key], checked
    assert connects(fleet["url"], old_a)
    retired = module("nsc_account", dict(fleet["base"], name="APP", signing_key=True, retire_signing_keys=True,
                                         **fleet["push"]))
    assert retired["changed"] and retired["retired_signing_keys"] == [old_key], retired
    assert retired["signing_keys"] == [new_key] and retired["previous_signing_keys"] == []
    assert retired["reissued_users"] == []
    assert not connects(fleet["url"], old_a)  # signed by the retired key
    assert connects(fleet["url"], a["creds_file"]) and connects(fleet["url"], b["creds_file"])
    done = module("nsc_account", dict(fleet["base"], name="APP", signing_key=True, retire_signing_keys=True,
                                      **fleet["push"]))
    assert not done["changed"] and done["retired_signing_keys"] == [], done


def test_a_leaked_signing_key_goes_at_once(fleet, module, tmp_path):
    a = user(module, fleet, "a")
    old_a = keep(a["creds_file"], tmp_path, "a-old")
    replaced = module("nsc_account", dict(fleet["base"], name="APP", signing_key=True, rotate_signing_key=True,
                                          retire_signing_keys=True, **fleet["push"]))
    assert replaced["retired_signing_keys"] == [a["issuer"]] and replaced["reissued_users"] == ["a"], replaced
    assert replaced["previous_signing_keys"] == [] and a["issuer"] not in replaced["signing_keys"]
    assert not connects(fleet["url"], old_a) and connects(fleet["url"], a["creds_file"])
