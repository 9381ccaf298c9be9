"""One error path for the nsc side: converge(run) returns the result or raises a NatsEdgeError carrying what was
done, the bulk forms turn the first failing item into an error naming it, and nothing under module_utils/_nsc ends
a module run itself (test_errors.py holds that for all of module_utils). Stores written in tmp dirs with the collection's own code."""

import os

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import ItemChecker, ItemError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, bulk, export, operator, user
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


def params(spec, **given):
    result = ArgumentSpecValidator(spec).validate(given)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


@pytest.fixture
def dirs(tmp_path):
    """Store and key dirs with operator 'fleet', its system account SYS and user sys."""
    where = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"))
    result = operator.converge(bulk.Run(params(operator.ARGUMENT_SPEC, operator="fleet", **where)))
    assert result["changed"] and result["operator_public_key"].startswith("O")
    return where


def test_a_converge_returns_its_result_and_warns_through_the_run(dirs):
    run = bulk.Run(params(account.ARGUMENT_SPEC, operator="fleet", name="APP", **dirs), diff=True)
    result = account.converge(run)
    assert result["changed"] and result["account_id"].startswith("A") and result["diff"]["before"] == {}
    again = account.converge(bulk.Run(params(account.ARGUMENT_SPEC, operator="fleet", name="APP", **dirs)))
    assert not again["changed"] and "diff" not in again
    gone = bulk.Run(params(account.ARGUMENT_SPEC, operator="fleet", name="APP", state="absent", push=True, **dirs),
                    check_mode=True)
    assert account.converge(gone)["changed"]
    assert gone.warnings == ["account 'APP' was removed from the store; the resolver keeps it"]
    assert "APP" in Store(dirs["store_dir"], dirs["keys_dir"], "fleet").accounts()


def test_a_failed_converge_carries_its_partial_result(dirs):
    # no creds given and none of the system user in the store: refused after the plan, before any write
    os.remove(Store(dirs["store_dir"], dirs["keys_dir"], "fleet").creds_path("SYS", "sys"))
    run = bulk.Run(params(account.ARGUMENT_SPEC, operator="fleet", name="APP", push=True, **dirs), diff=True)
    with pytest.raises(NatsEdgeError) as caught:
        account.converge(run)
    exc = caught.value
    assert str(exc).startswith("account 'APP' of operator 'fleet': push needs creds of a system account user")
    assert exc.result["changed"] is False and exc.result["account_id"].startswith("A")
    assert exc.result["diff"]["before"] == {} and exc.result["diff"]["after"]
    assert isinstance(exc.__cause__, NatsEdgeError)
    assert "APP" not in Store(dirs["store_dir"], dirs["keys_dir"], "fleet").accounts()


def test_a_failed_user_carries_what_it_had_decided(dirs):
    account.converge(bulk.Run(params(account.ARGUMENT_SPEC, operator="fleet", name="APP", **dirs)))
    run = bulk.Run(params(user.ARGUMENT_SPEC, operator="fleet", account="APP", name="ghost", state="revoked", **dirs))
    with pytest.raises(NatsEdgeError) as caught:
        user.converge(run)
    assert str(caught.value).startswith("user 'ghost' of account 'APP': cannot revoke it: it is not in the store")
    assert caught.value.result == dict(
        changed=False, revoked_keys=[], account_jwt_changed=False,
        jwt_path=Store(dirs["store_dir"], dirs["keys_dir"], "fleet").user_jwt_path("APP", "ghost"),
        creds_file=Store(dirs["store_dir"], dirs["keys_dir"], "fleet").creds_path("APP", "ghost"))


class FakeModule(object):
    """What the bulk form reads of an AnsibleModule."""

    def __init__(self, params, check_mode=False, diff=False):
        self.params = params
        self.check_mode = check_mode
        self._diff = diff
        self.warnings = []
        self.no_log_values = set()

    def warn(self, text):
        self.warnings.append(text)


def bulk_module(dirs, items, diff=False):
    given = dict(params(bulk.bulk_spec(account.ARGUMENT_SPEC, "accounts", required=("name",)), operator="fleet",
                        **dirs), accounts=items)
    return FakeModule(given, diff=diff)


def test_the_bulk_form_names_the_first_failing_item_and_reports_those_before_it(dirs):
    module = bulk_module(dirs, [{"name": "APP"}, {"name": "BAD", "rotate_signing_key": True}, {"name": "LATER"}],
                         diff=True)
    with pytest.raises(NatsEdgeError) as caught:
        bulk.run(module, "accounts", account.ARGUMENT_SPEC, account.converge, account.label)
    exc = caught.value
    assert str(exc) == "accounts[1] (BAD): account 'BAD' of operator 'fleet': rotate_signing_key needs signing_key=true"
    assert exc.result["changed"] is True and len(exc.result["item_results"]) == 2
    assert exc.result["item_results"][0]["changed"] and exc.result["item_results"][1] == {"changed": False}
    assert len(exc.result["diff"]) == 1 and "diff" not in exc.result["item_results"][0]
    assert sorted(Store(dirs["store_dir"], dirs["keys_dir"], "fleet").accounts()) == ["APP", "SYS"]


def test_the_bulk_form_returns_every_items_result(dirs):
    module = bulk_module(dirs, [{"name": "APP"}, {"name": "OTHER"}])
    result = bulk.run(module, "accounts", account.ARGUMENT_SPEC, account.converge, account.label)
    assert result["changed"] and [r["changed"] for r in result["item_results"]] == [True, True]
    assert "diff" not in result


def test_a_bad_item_fails_before_any_is_converged(dirs):
    module = bulk_module(dirs, [{"name": "APP"}, {"name": "BAD", "bogus": 1}])
    with pytest.raises(ItemError) as caught:
        bulk.run(module, "accounts", account.ARGUMENT_SPEC, account.converge, account.label)
    assert str(caught.value).startswith("accounts[1] (BAD): unknown option bogus; an item takes default_permissions, ")
    assert caught.value.result == dict(changed=False, item_results=[])
    assert Store(dirs["store_dir"], dirs["keys_dir"], "fleet").accounts() == ["SYS"]


def test_an_items_secrets_join_the_modules_no_log_values(dirs):
    spec = dict(nsc.STORE_ARGSPEC, name=dict(type="str"), secret=dict(type="str", no_log=True))
    module = FakeModule(dict(params(nsc.STORE_ARGSPEC, operator="fleet", **dirs), items=[{"name": "a", "secret": "s3"}]))
    items = bulk.checked_items(module, "items", spec, lambda item: item.get("name"))
    assert items[0][0] == "items[0] (a)" and items[0][1]["secret"] == "s3" and items[0][1]["operator"] == "fleet"
    assert "s3" in module.no_log_values


class _Module(object):
    def __init__(self, **params):
        self.params = dict(keys_dir="/nonexistent-keys-dir", **params)
        self.check_mode, self._diff, self.warnings = False, False, []

    def warn(self, text):
        self.warnings.append(text)


def test_a_task_without_the_nkeys_library_raises_before_anything(monkeypatch):
    monkeypatch.setattr(jwt, "nkeys", None)
    with pytest.raises(NatsEdgeError, match="nkeys") as caught:
        bulk.task(_Module(), lambda run: pytest.fail("converged without nkeys"))
    assert "exception" in caught.value.result


def test_a_task_runs_the_single_form_without_its_list():
    seen = []
    result = bulk.task(_Module(accounts=None, name="A"), lambda run: seen.append(run.params["name"]) or {"changed": False},
                       "accounts", {"name": {"type": "str"}}, lambda item: item.get("name"))
    assert seen == ["A"] and result == {"changed": False}


@pytest.mark.parametrize("kind, given, message", [
    (account, dict(name="A B"), "account name: 'A B' is not a valid name"),
    (account, dict(name="APP", limits={"conn": -5}), "limits.conn: -5: use -1 for unlimited"),
    (account, dict(name="APP", jetstream={"streams": 2**63}), "jetstream.streams: 9223372036854775808 is larger"),
    (account, dict(name="APP", default_permissions={"sub": {"deny": ["a..b"]}}),
     "default_permissions.sub.deny: 'a..b' is not a subject"),
    (account, dict(name="APP", rotate_signing_key=True), "rotate_signing_key needs signing_key=true"),
    (user, dict(account="A.P", name="u"), "account name: 'A.P' is not a valid name"),
    (user, dict(account="APP", name="u u"), "user name: 'u u' is not a valid name"),
    (user, dict(account="APP", name="u", permissions={"pub": {"allow": ["a.>.b"]}}), "permissions.pub.allow: "),
    (user, dict(account="APP", name="u", expires=True), "expires: true is not a time"),
    (user, dict(account="APP", name="u", expires_in="1h", renew_before="2h"), "renew_before (2h) is not shorter"),
    (export, dict(account="APP", subject="a..b"), "export 'a..b' of account 'APP': subject: 'a..b' is not a subject"),
    (export, dict(account="A P", subject="a"), "export 'a' of account 'A P': account name: 'A P'"),
    (export, dict(account="APP", subject="a.>", importers=[{"account": "APP"}]),
     "export 'a.>' of account 'APP': importers[0]: account 'APP' cannot import its own export"),
    (export, dict(account="APP", subject="a.>", importers=[{"account": "B"}, {"account": "B"}]),
     "export 'a.>' of account 'APP': importers[1]: account 'B' imports it twice, first at importers[0]"),
    (export, dict(account="APP", subject="a.>", importers=[{"account": "B", "subject": "b.>"}]),
     "export 'a.>' of account 'APP': importers[0]: subject 'b.>' is not part of the exported 'a.>'"),
    (export, dict(account="APP", subject="a.*", account_token_position=2,
                  importers=[{"account": "B", "subject": "b.ABC"}]),
     "export 'a.*' of account 'APP': importers[0]: subject 'b.ABC' is not part of"),
    (export, dict(share_stream={"stream": "S", "from_account": "A", "to_account": "A"}),
     "share_stream: from_account and to_account are both 'A'"),
    (export, dict(share_stream={"stream": "S", "from_account": "A.B", "to_account": "C"}),
     "share_stream of 'S' from 'A.B' to 'C': from_account: account name: 'A.B'"),
    (export, dict(share_stream={"stream": "S", "from_account": "A", "to_account": "C", "kind": "consumer"}),
     "share_stream of 'S' from 'A' to 'C': kind consumer needs a durable")])
def test_each_kinds_item_checks(kind, given, message):
    with pytest.raises(StoreError) as caught:
        kind.check_item(params(kind.ARGUMENT_SPEC, operator="fleet", **given))
    assert str(caught.value).startswith(message), str(caught.value)


def test_good_items_pass_and_an_account_token_in_an_importers_subject_is_fine():
    good = params(export.ARGUMENT_SPEC, operator="fleet", account="APP", subject="a.*", account_token_position=2,
                  importers=[{"account": "B", "subject": "a.ABCD"}, {"account": "C"}])
    assert export.check_item(good) is good
    assert account.check_item(params(account.ARGUMENT_SPEC, operator="fleet", name="APP", state="absent",
                                     limits={"conn": -5})) is not None  # a removal needs no limits
    assert user.check_item({"name": "u", "expires": 0})  # the fleet's user items have no account


def test_the_kinds_checks_run_as_an_item_checkers_then():
    """As the fleet's preflight runs them: on the item alone, its place prefixed."""
    spec = {key: value for key, value in account.ARGUMENT_SPEC.items() if key not in bulk.TASK_LEVEL}
    checker = ItemChecker(spec, then=account.check_item)
    with pytest.raises(ItemError, match=r"^nats_accounts\[0\] \(APP\): jetstream.streams: 9223372036854775808"):
        checker.check("nats_accounts[0] (APP)", {"name": "APP", "jetstream": {"streams": 2**63}})


# -- lists ----------------------------------------------------------------------------------------------------------


def test_an_item_listed_twice_names_both():
    items = [{"name": "APP"}, {"name": "OTHER"}, {"name": "X"}, {"name": "APP", "limits": {"conn": 1}}]
    with pytest.raises(ItemError) as caught:
        bulk.refuse_duplicates("accounts", items, account.identity, account.label)
    assert str(caught.value) == "accounts[3] (APP): listed twice, first at accounts[0]"
    with pytest.raises(ItemError, match=r"^users\[1\] \(APP/u\): listed twice, first at users\[0\]$"):
        bulk.refuse_duplicates("users", [{"account": "APP", "name": "u"}, {"account": "APP", "name": "u"}],
                               user.identity, user.label)
    bulk.refuse_duplicates("users", [{"account": "APP", "name": "u"}, {"account": "OTHER", "name": "u"}],
                           user.identity, user.label)
    # an export by its name, and by its subject; a share by its stream and accounts
    same_subject = [{"account": "A", "name": "one", "subject": "a.>", "type": "stream"},
                    {"account": "A", "name": "two", "subject": "a.>", "type": "stream"}]
    with pytest.raises(ItemError, match=r"^exports\[1\] \(A two\): listed twice, first at exports\[0\]$"):
        bulk.refuse_duplicates("exports", same_subject, export.identity, export.label)
    shares = [{"share_stream": {"stream": "S", "from_account": "A", "to_account": "B", "kind": kind}}
              for kind in ("source", "mirror")]
    with pytest.raises(ItemError, match=r"^exports\[1\] \(share of S from A to B\): listed twice"):
        bulk.refuse_duplicates("exports", shares, export.identity, export.label)
    bulk.refuse_duplicates("exports", [dict(same_subject[0]), dict(same_subject[1], type="service")],
                           export.identity, export.label)


def item(key, index, **given):
    return ("%s[%d]" % (key, index), dict(dict(operator="fleet", state="present"), **given))


def test_references_to_accounts_that_will_not_be_there_are_refused():
    accounts = [item("accounts", 0, name="NEW"), item("accounts", 1, name="OLD", state="absent")]
    check = bulk.check_references
    check({"OLD", "KEPT", "SYS"}, ["SYS"], accounts=accounts,
          users=[item("users", 0, account="NEW", name="u"), item("users", 1, account="KEPT", name="u"),
                 item("users", 2, account="SYS", name="u")],
          exports=[item("exports", 0, account="NEW", subject="a", importers=[{"account": "KEPT"}])])
    with pytest.raises(ItemError) as caught:
        check({"OLD"}, ["SYS"], accounts=accounts, users=[item("users", 0, account="NOPE", name="u")])
    assert str(caught.value) == ("users[0]: user 'u' of account 'NOPE': account 'NOPE' is not in the store, nor made "
                                 "by an item of accounts")
    with pytest.raises(ItemError) as caught:
        check({"OLD"}, ["SYS"], accounts=accounts, users=[item("users", 0, account="OLD", name="u")])
    assert str(caught.value) == "users[0]: user 'u' of account 'OLD': account 'OLD' is removed by accounts[1]"
    with pytest.raises(ItemError, match=r"^exports\[0\]: operator 'fleet': importers\[1\]: account 'NOPE' is not"):
        check(set(), [], accounts=accounts,
              exports=[item("exports", 0, account="NEW", subject="a", importers=[{"account": "NEW"}, {"account": "NOPE"}])])
    with pytest.raises(ItemError, match=r"^exports\[0\]: operator 'fleet': share_stream.to_account: account 'OLD' is "
                                        r"removed by accounts\[1\]$"):
        check({"OLD"}, [], accounts=accounts, exports=[item("exports", 0, share_stream={
            "stream": "S", "from_account": "NEW", "to_account": "OLD"})])
    with pytest.raises(ItemError) as caught:
        check({"SYS"}, ["SYS", None], accounts=[item("accounts", 0, name="SYS", state="absent")])
    assert str(caught.value).startswith("accounts[0]: account 'SYS' of operator 'fleet': it is the operator's system "
                                        "account; it is not removed")


def test_shares_of_one_stream_are_the_same_only_when_they_take_the_same_exports():
    def share(**given):
        return {"share_stream": dict(dict(stream="S", from_account="A", to_account="B"), **given)}
    # a mirror and a pull consumer of the same stream (the lab's IMPORTER does both), two durables: different exports
    bulk.refuse_duplicates("exports", [share(kind="mirror"), share(kind="consumer", durable="D"),
                                       share(kind="consumer", durable="E"), share(to_account="C")],
                           export.identity, export.label)
    with pytest.raises(ItemError, match=r"^exports\[1\] \(share of S from A to B\): listed twice, first at exports\[0\]$"):
        bulk.refuse_duplicates("exports", [share(kind="consumer", durable="D"), share(kind="consumer", durable="D")],
                               export.identity, export.label)
