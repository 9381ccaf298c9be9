"""rotate_creds' selections as a user types them on the command line: a single account given as a string
(-e nats_fleet_rotate_signing_keys=EDGE) is that account, as the argument spec's list type reads it - not its
letters - and a value no list type takes is refused, naming the variable and the value, before any key changes.
The first play's plan and new keys (tasks_from: rotate_issue) run on localhost against an nsc store of its own."""

import json

from conftest import run_playbook
from test_nsc_modules import tree_hash

ISSUE = """
- name: The rotation's plan and new keys in the store
  ansible.builtin.include_role:
    name: nats_edge.fleet.nats_fleet
    tasks_from: rotate_issue
  vars:
    nats_fleet_dir: {fleet_dir}
    nats_accounts: {accounts}

- name: Show what was replaced
  ansible.builtin.debug:
    msg:
      selected: "{{{{ _nats_fleet_rotate_plan.signing | selectattr('rotate') | map(attribute='name') | list }}}}"
      users: "{{{{ _nats_fleet_rotate_plan.users | selectattr('rotate') | map(attribute='key') | list }}}}"
      # a replaced key stays in its account until the last play retires it
      waiting: "{{{{ _nats_fleet_rotate_signing.results | selectattr('previous_signing_keys', 'defined')
        | selectattr('previous_signing_keys') | map(attribute='item.name') | list }}}}"
"""
ACCOUNTS = [{"name": "EDGE", "signing_key": True, "users": [{"name": "leaf"}]}, {"name": "APP", "signing_key": True},
            {"name": "PLAIN"}]


def store(tmp_path, module):
    base = dict(store_dir=str(tmp_path / "nsc" / "stores"), keys_dir=str(tmp_path / "nsc" / "keys"), operator="fleet")
    assert not module("nsc_operator", dict(base)).get("failed")
    for account in ACCOUNTS:
        assert not module("nsc_account", dict(base, **{k: v for k, v in account.items() if k != "users"})).get("failed")
    return tmp_path


def issue(tmp_path, *extra):
    """(return code, the accounts selected and those whose replaced signing key waits to be retired, the first
    failure's message)."""
    tasks = ISSUE.format(fleet_dir=json.dumps(str(tmp_path)), accounts=json.dumps(ACCOUNTS))
    proc = run_playbook(tmp_path / "play", tasks, extra_args=list(extra), env={"ANSIBLE_STDOUT_CALLBACK": "json"})
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    shown, failure = None, None
    for task in report["plays"][0]["tasks"]:
        result = task["hosts"].get("localhost", {})
        if result.get("failed") and failure is None:
            failure = " ".join(str(result.get("msg")).split())
        if task["task"]["name"] == "Show what was replaced":
            shown = result.get("msg")
    return proc.returncode, shown, failure


def replaced(outcome):
    code, shown, failure = outcome
    assert code == 0 and failure is None, failure
    return shown


def test_one_account_given_as_a_string_is_that_account(tmp_path, module):
    fleet = store(tmp_path, module)
    (tmp_path / "play").mkdir()
    outcome = replaced(issue(fleet, "-e", "nats_fleet_rotate_signing_keys=EDGE"))
    assert outcome == {"selected": ["EDGE"], "users": [], "waiting": ["EDGE"]}
    # several, separated by commas, as the list type reads them
    assert replaced(issue(fleet, "-e", "nats_fleet_rotate_signing_keys=EDGE,APP"))["selected"] == ["EDGE", "APP"]
    # the list itself, as it always was
    assert replaced(issue(fleet, "-e", '{"nats_fleet_rotate_signing_keys": ["APP"]}'))["selected"] == ["APP"]
    # and a user the same way (all stays all)
    assert replaced(issue(fleet, "-e", "nats_fleet_rotate_users=EDGE/leaf"))["users"] == ["EDGE/leaf"]


def test_a_selection_no_list_type_takes_is_refused_before_any_key_changes(tmp_path, module):
    fleet = store(tmp_path, module)
    (tmp_path / "play").mkdir()
    before = tree_hash(str(tmp_path / "nsc"))
    code, _shown, failure = issue(fleet, "-e", '{"nats_fleet_rotate_signing_keys": {"EDGE": true}}')
    assert code != 0
    assert 'nats_fleet_rotate_signing_keys: {"EDGE": true}: give a list of account names, such as [EDGE]' in failure
    # a name that is no account is named as it was given, not letter by letter
    code, _shown, failure = issue(fleet, "-e", "nats_fleet_rotate_signing_keys=EGDE")
    assert code != 0 and "nats_fleet_rotate_signing_keys[0]: no account 'EGDE' in nats_accounts" in failure, failure
    code, _shown, failure = issue(fleet, "-e", "nats_fleet_rotate_users=EDGE")
    assert code != 0 and "nats_fleet_rotate_users[0]: expected ACCOUNT/user, got 'EDGE'" in failure, failure
    assert tree_hash(str(tmp_path / "nsc")) == before
