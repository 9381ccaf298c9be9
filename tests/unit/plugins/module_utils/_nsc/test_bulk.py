"""One error path for the nsc side: converge(run) returns the result or raises a NatsEdgeError carrying what was
done, the bulk forms turn the first failing item into an error naming it, and nothing under module_utils/_nsc ends
a module run itself (test_errors.py holds that for all of module_utils). Stores written in tmp dirs with the collection's own code."""

import os

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import ItemError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, bulk, operator, user
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store

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
    monkeypatch.setattr(bulk.jwt, "nkeys", None)
    with pytest.raises(NatsEdgeError, match="nkeys") as caught:
        bulk.task(_Module(), lambda run: pytest.fail("converged without nkeys"))
    assert "exception" in caught.value.result


def test_a_task_runs_the_single_form_without_its_list():
    seen = []
    result = bulk.task(_Module(accounts=None, name="A"), lambda run: seen.append(run.params["name"]) or {"changed": False},
                       "accounts", {"name": {"type": "str"}}, lambda item: item.get("name"))
    assert seen == ["A"] and result == {"changed": False}
