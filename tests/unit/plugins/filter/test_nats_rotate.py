"""The plan of nats_edge.fleet.rotate_creds: which users get new keys, which links move."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.nats_edge.fleet.plugins.filter.nats_rotate import (
    nats_rotate_links, nats_rotate_moved, nats_rotate_plan)

ACCOUNTS = [
    {"name": "TEST", "jetstream": {}, "users": [{"name": "leaf", "expires_in": "90d"}, {"name": "app"}]},
    {"name": "EDGE", "signing_key": True, "users": [{"name": "link"}]},
    {"name": "PLAIN", "users": [{"name": "u"}]},
]
REMOTES = [{"hub_group": "hub", "system_account": True}, {"hub_group": "hub", "account": "TEST", "user": "leaf"},
           {"hub_group": "hub", "account": "EDGE", "user": "link"}]
HOSTVARS = {"hub1": {}, "site1": {"nats_server_leafnode_remotes": REMOTES},
            "site2": {"nats_server_leafnode_remotes": REMOTES[:2]}}
HOSTS = ["hub1", "site1", "site2"]


def plan(users="all", signing=None):
    return nats_rotate_plan(ACCOUNTS, HOSTVARS, HOSTS, users, signing)


def test_all_means_every_user_a_leaf_remote_connects_as_but_the_system_user():
    result = plan()
    assert [(u["key"], u["rotate"]) for u in result["users"]] == [("EDGE/link", True), ("TEST/leaf", True)]
    assert result["users"][1]["expires_in"] == "90d" and result["users"][1]["account"] == "TEST"
    assert result["leaf_users"] == {"SYS/sys": ["site1", "site2"], "TEST/leaf": ["site1", "site2"],
                                    "EDGE/link": ["site1"]}


def test_a_selection_rotates_only_its_users_and_still_issues_the_leaf_users():
    result = plan(["TEST/app"])
    assert [(u["key"], u["rotate"]) for u in result["users"]] == [
        ("EDGE/link", False), ("TEST/app", True), ("TEST/leaf", False)]
    assert [u["rotate"] for u in plan([])["users"]] == [False, False]


def test_the_spark_jobs_users_with_the_stores_creds_are_rotated_too():
    jobs = {"hub1": "/f/creds/PLAIN/u.creds", "hub2": "/f/creds/PLAIN/u.creds", "hub3": "/elsewhere/PLAIN/u.creds",
            "hub4": "", "hub5": "/f/creds/TEST/undeclared.creds"}
    result = nats_rotate_plan(ACCOUNTS, HOSTVARS, HOSTS, "all", None, "SYS", "sys", jobs, "/f/creds/")
    assert result["job_users"] == {"PLAIN/u": ["hub1", "hub2"], "TEST/undeclared": ["hub5"]}
    assert [(u["key"], u["rotate"]) for u in result["users"]] == [
        ("EDGE/link", True), ("PLAIN/u", True), ("TEST/leaf", True)]
    # without the jobs (no spark_driver group) nothing changes
    assert plan()["job_users"] == {}


@pytest.mark.parametrize("users, message", [
    (["TEST"], "nats_fleet_rotate_users[0]: expected ACCOUNT/user"),
    (["TEST/nobody"], "nats_fleet_rotate_users[0]: no user 'TEST/nobody' in nats_accounts"),
    (["SYS/sys"], "is the operator's system user"),
    ("some", "expected 'all' or a list"),
])
def test_a_bad_selection_names_the_item(users, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("[", r"\[").replace("]", r"\]")):
        plan(users)


def test_signing_key_rotation_needs_an_account_with_a_signing_key():
    assert [(a["name"], a["rotate"]) for a in plan([], ["EDGE"])["signing"]] == [("EDGE", True)]
    # every account with a signing key is listed: an earlier run may have left a key to retire
    assert [(a["name"], a["rotate"]) for a in plan([])["signing"]] == [("EDGE", False)]
    with pytest.raises(AnsibleFilterError, match="account 'PLAIN' has no signing key"):
        plan([], ["PLAIN"])
    with pytest.raises(AnsibleFilterError, match=r"nats_fleet_rotate_signing_keys\[0\]: no account 'NOPE'"):
        plan([], ["NOPE"])


def test_moved_users_are_those_with_new_creds_or_a_key_not_revoked_yet():
    issued = {"results": [
        {"item": {"account": "TEST", "name": "leaf"}, "changed": True, "previous_keys": ["UOLD"]},
        {"item": {"account": "TEST", "name": "app"}, "changed": False, "previous_keys": []},
        {"item": {"account": "EDGE", "name": "renewed"}, "changed": True, "previous_keys": []},
        {"item": {"account": "EDGE", "name": "left"}, "changed": False, "previous_keys": ["UOLDER"]},
    ]}
    signing = {"results": [{"item": {"name": "EDGE"}, "reissued_users": ["link"]}]}
    assert nats_rotate_moved(issued, signing) == {
        "moved": ["EDGE/left", "EDGE/link", "EDGE/renewed", "TEST/leaf"], "pending": ["EDGE/left", "TEST/leaf"],
        "retiring": {}}
    assert nats_rotate_moved({"results": []}, {"results": [], "skipped": True}) == {
        "moved": [], "pending": [], "retiring": {}}


def test_the_users_of_an_account_whose_replaced_signing_key_waits_to_be_retired_move():
    """A run that stopped after the new signing key: the next one moves (places, reopens) every user
    of that account, even those it issued nothing new for, and retires the old key."""
    issued = {"results": [
        {"item": {"account": "EDGE", "name": "link"}, "changed": False, "previous_keys": []},
        {"item": {"account": "TEST", "name": "leaf"}, "changed": False, "previous_keys": []},
    ]}
    signing = {"results": [{"item": {"name": "EDGE"}, "changed": False, "previous_signing_keys": ["AOLD"]}]}
    assert nats_rotate_moved(issued, signing) == {"moved": ["EDGE/link"], "pending": [],
                                                  "retiring": {"EDGE": ["AOLD"]}}


def test_links_pair_each_remote_with_its_creds_file():
    remotes = [{"account": "ASYS", "credentials_src": "/f/creds/SYS/sys.creds"},
               {"account": "ATEST", "credentials_src": "/f/creds/TEST/leaf.creds"},
               {"account": "AOTHER"}]
    files = [{"src": "/f/creds/SYS/sys.creds", "dest": "/etc/nats-server/creds/ASYS.creds"},
             {"src": "/f/creds/TEST/leaf.creds", "dest": "/etc/nats-server/creds/ATEST.creds"}]
    assert nats_rotate_links(remotes, files, "/f/creds/") == [
        {"key": "SYS/sys", "account": "ASYS", "src": files[0]["src"], "dest": files[0]["dest"]},
        {"key": "TEST/leaf", "account": "ATEST", "src": files[1]["src"], "dest": files[1]["dest"]}]
    with pytest.raises(AnsibleFilterError, match="2 leaf remotes with creds but 1 creds files"):
        nats_rotate_links(remotes, files[:1], "/f/creds")
