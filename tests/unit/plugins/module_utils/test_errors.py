"""One error path (module_utils/_errors.py): every error class of the collection derives from NatsEdgeError, code
under plugins/module_utils and plugins/plugin_utils raises and never ends a module run itself, and a module's main()
fails with the error's message and its result keys."""

import ast
import glob
import importlib
import inspect
import os

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
PACKAGE = "ansible_collections.nats_edge.fleet."
# the module base itself, and the one way a main() fails
ENDS_A_RUN = ("plugins/module_utils/_module.py", "plugins/module_utils/_errors.py")


def python_files(*folders):
    return sorted(os.path.relpath(path, ROOT) for folder in folders
                  for path in glob.glob(os.path.join(ROOT, folder, "**", "*.py"), recursive=True))


@pytest.mark.parametrize("path", [p for p in python_files("plugins/module_utils", "plugins/plugin_utils")
                                  if p not in ENDS_A_RUN])
def test_utils_raise_and_never_end_a_module_run(path):
    with open(os.path.join(ROOT, path)) as handle:
        tree = ast.parse(handle.read(), path)
    calls = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr in ("fail_json", "exit_json")]
    assert not calls, "%s ends a module run at line(s) %s: raise a NatsEdgeError instead" % (path, calls)


@pytest.mark.parametrize("path", python_files("plugins/module_utils", "plugins/plugin_utils", "plugins/modules"))
def test_every_error_class_derives_from_the_one_base(path):
    if path.endswith("__init__.py"):
        return
    module = importlib.import_module(PACKAGE + path[:-3].replace(os.sep, "."))
    for name, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ != module.__name__ or not issubclass(cls, BaseException) or name.startswith("_"):
            continue
        assert issubclass(cls, NatsEdgeError), "%s.%s does not derive from NatsEdgeError" % (path, name)


class _Module(object):
    def fail_json(self, **result):
        self.failed = result


def test_fail_from_reports_the_message_and_the_errors_result_keys():
    module = _Module()
    fail_from(module, NatsEdgeError("stream 'a': max_age: not a duration", changed=True, diff={"before": {}}),
              item_results=[])
    assert module.failed == {"msg": "stream 'a': max_age: not a duration", "changed": True,
                             "diff": {"before": {}}, "item_results": []}
    fail_from(module, ValueError("plain"))
    assert module.failed == {"msg": "plain", "changed": False}


def test_the_error_keeps_its_message_and_its_cause():
    try:
        try:
            raise KeyError("x")
        except KeyError as exc:
            raise NatsEdgeError("config: x missing") from exc
    except NatsEdgeError as exc:
        assert str(exc) == "config: x missing" and isinstance(exc.__cause__, KeyError) and exc.result == {}
