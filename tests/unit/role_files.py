"""What the unit tests of the roles read: a role's YAML files and every task in them, blocks opened."""

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(role, path):
    """The YAML of ``roles/<role>/<path>``."""
    with open(os.path.join(ROOT, "roles", role, path)) as handle:
        return yaml.safe_load(handle)


def walk_tasks(tasks):
    """Every task of a task list, and of its blocks' block, rescue and always lists, in order."""
    for task in tasks or []:
        yield task
        for nested in ("block", "rescue", "always"):
            yield from walk_tasks(task.get(nested))
