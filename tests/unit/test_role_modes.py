"""The nats_server role declares each file's owner, group and mode once (_nats_server_modes in vars/main.yml): the
tasks that write them and the list the host's state is compared with (_nats_server_wanted_files) both take them
from there, so the two cannot disagree (a disagreement would rewrite a file on every run)."""

import os
import re


import role_files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(path):
    return role_files.load("nats_server", path)


def test_every_write_of_config_write_takes_owner_group_and_mode_from_the_one_declaration():
    modes = load("vars/main.yml")["_nats_server_modes"]
    used = set()
    for task in role_files.walk_tasks(load("tasks/config_write.yml")):
        for module in ("ansible.builtin.file", "ansible.builtin.copy", "ansible.builtin.template"):
            args = task.get(module)
            if not isinstance(args, dict) or args.get("state") == "absent":
                continue
            if "{{ item.mode }}" == args.get("mode"):  # the TLS files: _nats_server_tls_pushed carries theirs
                continue
            for field in ("owner", "group", "mode"):
                match = re.match(r"^\{\{ _nats_server_modes\.(\w+)\.%s \}\}$" % field, str(args.get(field)))
                assert match and match.group(1) in modes, (task["name"], field, args.get(field))
                used.add(match.group(1))
    assert used == set(modes)


def test_the_wanted_files_take_them_from_the_same_declaration():
    wanted = load("vars/main.yml")["_nats_server_wanted_files"]
    assert "'mode':" not in wanted and "'owner':" not in wanted
    assert set(re.findall(r"_nats_server_modes\.(\w+)", wanted)) == set(load("vars/main.yml")["_nats_server_modes"])


def test_every_unit_takes_its_sandbox_from_the_one_filter():
    """The nats-server, Spark and aggregation job units get their systemd sandbox from nats_systemd_hardening,
    not from a copy of their own."""
    units = [os.path.join(ROOT, "roles", role, "templates", name) for role, name in (
        ("nats_server", "nats-server.service.j2"), ("spark_cluster", "spark-service.j2"),
        ("spark_job", "job.service.j2"))]
    for path in units:
        with open(path) as handle:
            text = handle.read()
        assert "nats_edge.fleet.nats_systemd_hardening" in text, path
        assert "ProtectSystem" not in text and "NoNewPrivileges" not in text, path


def test_the_sandbox_keeps_write_execute_memory_for_a_jit_alone():
    from ansible_collections.nats_edge.fleet.plugins.filter.nats_server import nats_systemd_hardening

    server = nats_systemd_hardening("/var/lib/nats").splitlines()
    assert "MemoryDenyWriteExecute=true" in server and "ReadWritePaths=/var/lib/nats" in server
    assert "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX" in server
    jvm = nats_systemd_hardening(["/a", "/b"], address_families=["AF_INET", "AF_NETLINK"], deny_write_execute=False,
                                 comment="why").splitlines()
    assert "MemoryDenyWriteExecute=true" not in jvm and "ReadWritePaths=/a /b" in jvm
    assert jvm[jvm.index("RestrictAddressFamilies=AF_INET AF_NETLINK") - 1] == "# why"
    assert "ReadWritePaths" not in "\n".join(nats_systemd_hardening([]).splitlines())
