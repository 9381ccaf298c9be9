"""Unit tests for the pure logic of lab/fleetlab (no podman needed)."""
import importlib.util
import json
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

FLEETLAB = Path(__file__).resolve().parents[2] / "lab" / "fleetlab"


def _load():
    loader = SourceFileLoader("fleetlab", str(FLEETLAB))
    spec = importlib.util.spec_from_loader("fleetlab", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fleetlab"] = module  # dataclasses resolve annotations through it
    loader.exec_module(module)
    return module


fl = _load()

DEB822 = """\
Types: deb
# http://snapshot.example.org/archive/debian/20250520T000000Z
URIs: http://mirror.example.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://mirror.example.org/debian-security
Suites: bookworm-security
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.org/debian
Suites: bookworm-backports
Components: main

Types: deb
Enabled: no
URIs: http://disabled.example.org/debian
Suites: bookworm
Components: main
"""

ONE_LINE = """\
# a comment
deb [arch=amd64 signed-by=/etc/apt/keyrings/x.gpg] http://one.example.org/debian bookworm main non-free
deb-src http://one.example.org/debian bookworm main
deb http://sec.example.org/debian-security bookworm-security main  # trailing
"""


# ---- apt sources --------------------------------------------------------

def test_parse_deb822_skips_comments_and_disabled():
    sources = fl.parse_deb822_sources(DEB822)
    assert len(sources) == 3
    first = sources[0]
    assert first.types == ["deb"]
    assert first.uris == ["http://mirror.example.org/debian"]
    assert first.suites == ["bookworm", "bookworm-updates"]
    assert first.components == ["main"]
    assert first.signed_by == "/usr/share/keyrings/debian-archive-keyring.gpg"
    assert sources[1].types == ["deb", "deb-src"]


def test_parse_deb822_inline_key_continuation():
    text = ("Types: deb\nURIs: http://m.example.org/d\nSuites: bookworm\nComponents: main\n"
            "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n abc\n"
            " -----END PGP PUBLIC KEY BLOCK-----\n")
    (src,) = fl.parse_deb822_sources(text)
    assert src.signed_by.splitlines() == ["-----BEGIN PGP PUBLIC KEY BLOCK-----", "", "abc",
                                          "-----END PGP PUBLIC KEY BLOCK-----"]
    rendered = fl.render_deb822([src])
    assert " .\n abc\n" in rendered
    assert fl.parse_deb822_sources(rendered)[0].signed_by == src.signed_by


def test_parse_one_line_sources():
    sources = fl.parse_one_line_sources(ONE_LINE)
    assert [(s.types, s.uris, s.suites) for s in sources] == [
        (["deb"], ["http://one.example.org/debian"], ["bookworm"]),
        (["deb-src"], ["http://one.example.org/debian"], ["bookworm"]),
        (["deb"], ["http://sec.example.org/debian-security"], ["bookworm-security"]),
    ]
    assert sources[0].components == ["main", "non-free"]
    assert sources[0].signed_by == "/etc/apt/keyrings/x.gpg"
    assert sources[2].components == ["main"]


def test_image_sources_keeps_main_updates_security_binaries_only():
    image = fl.image_sources(fl.parse_deb822_sources(DEB822))
    assert [(s.types, s.suites) for s in image] == [
        (["deb"], ["bookworm", "bookworm-updates"]),
        (["deb"], ["bookworm-security"]),
    ]


def test_render_deb822_roundtrip():
    image = fl.image_sources(fl.parse_deb822_sources(DEB822))
    text = fl.render_deb822(image)
    assert text.startswith("Types: deb\nURIs: http://mirror.example.org/debian\n"
                           "Suites: bookworm bookworm-updates\nComponents: main\n"
                           "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n")
    assert fl.parse_deb822_sources(text) == image


def test_pick_mirror_prefers_the_plain_suite():
    sources = fl.parse_one_line_sources(
        "deb http://sec.example.org/debian-security bookworm-security main\n"
        "deb-src http://src.example.org/debian bookworm main\n"
        "deb http://main.example.org/debian bookworm main\n")
    assert fl.pick_mirror(sources) == "http://main.example.org/debian"


def test_pick_mirror_fails_without_suite():
    sources = fl.parse_one_line_sources("deb http://x.example.org/debian trixie main\n")
    with pytest.raises(fl.LabError, match="bookworm"):
        fl.pick_mirror(sources)


def test_mirror_hosts_unique_in_order():
    sources = fl.parse_deb822_sources(DEB822) + fl.parse_one_line_sources(ONE_LINE)
    assert fl.mirror_hosts(sources) == ["mirror.example.org", "one.example.org", "sec.example.org"]


def test_read_host_sources(tmp_path):
    apt = tmp_path / "etc/apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list").write_text("deb http://a.example.org/debian bookworm main\n")
    (apt / "sources.list.d/debian.sources").write_text(DEB822)
    (apt / "sources.list.d/extra.list").write_text("deb http://b.example.org/x bookworm main\n")
    (apt / "sources.list.d/old.sources.disabled").write_text(DEB822.replace("mirror", "nope"))
    hosts = fl.mirror_hosts(fl.read_host_sources(str(tmp_path)))
    assert hosts == ["a.example.org", "mirror.example.org", "b.example.org"]


def test_recipe_hash_is_stable_and_tracks_sources():
    h = fl.recipe_hash("Types: deb\n")
    assert h == fl.recipe_hash("Types: deb\n")
    assert len(h) == 16
    assert h != fl.recipe_hash("Types: deb\nURIs: http://other\n")


# ---- names, specs -------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ("hub1", ("hub1", [])),
    ("hub1:", ("hub1", [])),
    ("hub1:hub", ("hub1", ["hub"])),
    ("solo:ungrouped", ("solo", [])),
    ("edge-2:edge,leaf_nodes,edge", ("edge-2", ["edge", "leaf_nodes"])),
])
def test_parse_host_spec(spec, expected):
    assert fl.parse_host_spec(spec) == expected


@pytest.mark.parametrize("spec", ["Hub1", "hub_1", "-hub", "hub-", "", "h:all",
                                  "h:1group", "h:bad-group", "x" * 40])
def test_parse_host_spec_rejects(spec):
    with pytest.raises(fl.LabError):
        fl.parse_host_spec(spec)


def test_names_and_labels():
    assert fl.container_name("try", "hub1") == "try-hub1"
    assert fl.network_name("try") == "nats-edge-lab-try"
    assert fl.container_labels("try", "hub1", ["hub", "core"], ["127.0.0.1:14222:4222"]) == {
        "io.nats-edge.lab": "try",
        "io.nats-edge.lab.host": "hub1",
        "io.nats-edge.lab.groups": "hub,core",
        "io.nats-edge.lab.publish": "127.0.0.1:14222:4222",
    }


def test_lab_arg_is_an_argparse_type():
    assert fl.lab_arg("ci-1") == "ci-1"
    with pytest.raises(fl.argparse.ArgumentTypeError):
        fl.lab_arg("CI")


@pytest.mark.parametrize("spec, expected", [
    ("hub1=127.0.0.1:14222:4222", ("hub1", "127.0.0.1:14222:4222")),
    ("hub1=4222", ("hub1", "4222")),
    ("hub1=14222:4222/tcp", ("hub1", "14222:4222/tcp")),
    ("hub1=127.0.0.1::8222", ("hub1", "127.0.0.1::8222")),
    ("hub1=[::1]:14222:4222", ("hub1", "[::1]:14222:4222")),
])
def test_parse_publish(spec, expected):
    assert fl.parse_publish(spec, {"hub1": []}) == expected


@pytest.mark.parametrize("spec", ["hub1", "hub1=", "hub1=abc", "hub1=1:2:3:4", "hub1=0",
                                  "hub1=70000:4222", "hub1=127.0.0.300:1:4222", "hub2=4222",
                                  "hub1=4222/icmp"])
def test_parse_publish_rejects(spec):
    with pytest.raises(fl.LabError):
        fl.parse_publish(spec, {"hub1": []})


# ---- inspect -> records -> inventory -----------------------------------

def _inspect(host, groups, address, state="running", lab="try", publish=""):
    return {
        "Name": f"{lab}-{host}",
        "Config": {"Labels": {"io.nats-edge.lab": lab, "io.nats-edge.lab.host": host,
                              "io.nats-edge.lab.groups": groups,
                              "io.nats-edge.lab.publish": publish}},
        "NetworkSettings": {"Networks": {f"nats-edge-lab-{lab}": {"IPAddress": address}}},
        "State": {"Status": state},
    }


def test_host_record():
    rec = fl.host_record(_inspect("hub1", "hub,core", "10.89.128.2",
                                  publish="127.0.0.1:14222:4222"))
    assert rec == {"lab": "try", "name": "hub1", "container": "try-hub1",
                   "address": "10.89.128.2", "groups": ["hub", "core"],
                   "publish": ["127.0.0.1:14222:4222"], "state": "running"}


def test_host_record_stopped_container_has_no_address():
    info = _inspect("edge1", "", "", state="exited")
    info["NetworkSettings"]["Networks"] = None
    rec = fl.host_record(info)
    assert rec["address"] == "" and rec["groups"] == [] and rec["state"] == "exited"


def _records():
    return [fl.host_record(_inspect("hub2", "hub", "10.89.128.3")),
            fl.host_record(_inspect("edge1", "edge", "", state="exited")),
            fl.host_record(_inspect("hub1", "hub,core", "10.89.128.2")),
            fl.host_record(_inspect("solo", "", "10.89.128.9"))]


EXPECTED_YAML = """\
---
all:
  hosts:
    edge1:
      ansible_host: try-edge1
      ansible_user: root
      ansible_ssh_common_args: "-F /var/lib/nats-edge-lab/ssh/config"
      ansible_python_interpreter: /usr/bin/python3
    hub1:
      ansible_host: try-hub1
      ansible_user: root
      ansible_ssh_common_args: "-F /var/lib/nats-edge-lab/ssh/config"
      ansible_python_interpreter: /usr/bin/python3
      lab_address: "10.89.128.2"
    hub2:
      ansible_host: try-hub2
      ansible_user: root
      ansible_ssh_common_args: "-F /var/lib/nats-edge-lab/ssh/config"
      ansible_python_interpreter: /usr/bin/python3
      lab_address: "10.89.128.3"
    solo:
      ansible_host: try-solo
      ansible_user: root
      ansible_ssh_common_args: "-F /var/lib/nats-edge-lab/ssh/config"
      ansible_python_interpreter: /usr/bin/python3
      lab_address: "10.89.128.9"
  children:
    core:
      hosts:
        hub1:
    edge:
      hosts:
        edge1:
    hub:
      hosts:
        hub1:
        hub2:"""


def test_render_inventory_yaml():
    assert fl.render_inventory(_records()) == EXPECTED_YAML


def test_render_inventory_yaml_parses_like_json():
    yaml = pytest.importorskip("yaml")
    records = _records()
    assert yaml.safe_load(fl.render_inventory(records, "yaml")) == json.loads(
        fl.render_inventory(records, "json"))


def test_render_inventory_json():
    data = json.loads(fl.render_inventory(_records(), "json"))
    assert data["all"]["hosts"]["hub1"] == {
        "ansible_host": "try-hub1", "ansible_user": "root",
        "ansible_ssh_common_args": "-F /var/lib/nats-edge-lab/ssh/config",
        "ansible_python_interpreter": "/usr/bin/python3", "lab_address": "10.89.128.2"}
    assert data["all"]["children"]["hub"] == {"hosts": {"hub1": None, "hub2": None}}
    assert "children" not in json.loads(fl.render_inventory(_records()[3:], "json"))["all"]


@pytest.mark.parametrize("value, expected", [
    ("try-hub1", "try-hub1"), ("/usr/bin/python3", "/usr/bin/python3"),
    ("10.89.128.2", '"10.89.128.2"'), ("yes", '"yes"'), ("1", '"1"'), ("a b", '"a b"'),
    ("", '""'), (None, ""),
])
def test_yaml_scalar(value, expected):
    assert fl.yaml_scalar(value) == expected


# ---- CLI parsing --------------------------------------------------------

def test_cli_up_arguments():
    args = fl.build_parser().parse_args(
        ["up", "--lab", "try", "hub1:hub", "edge1:edge", "--publish", "hub1=127.0.0.1:14222:4222"])
    assert args.func is fl.cmd_up and args.lab == "try"
    assert args.hosts == ["hub1:hub", "edge1:edge"]
    assert args.publish == ["hub1=127.0.0.1:14222:4222"] and not args.recreate


def test_cli_exec_keeps_command_options():
    args = fl.build_parser().parse_args(["exec", "--lab", "try", "hub1", "--", "ls", "-la"])
    assert args.host == "hub1"
    assert [a for a in args.cmd if a != "--"] == ["ls", "-la"]


def test_cli_lab_required_and_validated(capsys):
    with pytest.raises(SystemExit):
        fl.build_parser().parse_args(["down"])
    with pytest.raises(SystemExit):
        fl.build_parser().parse_args(["down", "--lab", "Bad_Name"])
    assert "invalid lab name" in capsys.readouterr().err
    assert fl.build_parser().parse_args(["status"]).lab is None


def test_dropin_config():
    text = fl.DROPIN_TEXT
    for line in ('runtime = "runc"', 'cgroup_manager = "cgroupfs"', 'events_logger = "file"',
                 'default_ulimits = ["nofile=20000:20000", "nproc=8192:8192"]',
                 '"base" = "10.89.128.0/17", "size" = 24'):
        assert line in text


def test_a_host_podman_cannot_enter_is_named_with_podmans_answer_and_the_way_out(monkeypatch):
    class Answer:
        def __init__(self, stdout="", stderr=""):
            self.stdout, self.stderr = stdout, stderr

    def podman(*args, **_kwargs):
        if args[0] == "exec":
            return Answer(stderr="Error: OCI runtime error: runc: exec failed: cannot exec in a stopped container\n")
        return Answer(stdout="running\n")  # what podman lists while it cannot enter the container
    monkeypatch.setattr(fl, "podman", podman)
    monkeypatch.setattr(fl.time, "sleep", lambda _seconds: None)
    with pytest.raises(fl.LabError) as raised:
        fl.wait_booted(["demo-hub-1"], 0.05)
    assert "cannot exec in a stopped container" in str(raised.value)
    assert "make demo-down" in str(raised.value)
