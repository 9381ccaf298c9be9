"""Every task file a role includes is named from the role's tasks/ directory.

Ansible looks an included file up in the role's tasks/ directory first, then
next to the playbook, and only then next to the including file: a file in a
subdirectory of tasks/ that includes its neighbour by its bare name would run
a user's playbook of that name instead (a molecule scenario's converge.yml did).
"""

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASK_FILES = sorted(glob.glob(os.path.join(ROOT, "roles/*/tasks/**/*.yml"), recursive=True))
INCLUDES = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks", "include_tasks", "import_tasks")


def includes(tasks):
    for task in tasks or []:
        for key in INCLUDES:
            if key in task:
                target = task[key]
                yield target["file"] if isinstance(target, dict) else target
        for nested in ("block", "rescue", "always"):
            yield from includes(task.get(nested))


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: os.path.relpath(p, ROOT))
def test_included_files_are_named_from_the_roles_tasks_directory(path):
    tasks_dir = os.path.join(path.split("/tasks/")[0], "tasks")
    with open(path) as handle:
        tasks = yaml.safe_load(handle)
    for target in includes(tasks):
        # a templated name is checked with each value it can take: the names it quotes, else the files it matches
        candidates = [target]
        if "{{" in target:
            candidates = re.findall(r"'([^']+\.yml)'", target)
            if not candidates:
                prefix, rest = target.split("{{", 1)
                suffix = rest.split("}}", 1)[1]
                matches = glob.glob(os.path.join(tasks_dir, prefix + "*" + suffix))
                candidates = [os.path.relpath(match, tasks_dir) for match in matches]
            assert candidates, "%s: nothing in tasks/ matches %r" % (path, target)
        for name in candidates:
            where = os.path.relpath(path, ROOT)
            assert os.path.isfile(os.path.join(tasks_dir, name)), (
                "%s includes %r: name it from %s" % (where, name, os.path.relpath(tasks_dir, ROOT)))
