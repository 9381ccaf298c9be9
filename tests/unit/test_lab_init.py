"""fleetlab's OpenRC hosts: the pure parts."""

import pytest

from test_lab import fl


def test_systemd_recipe_is_untouched_by_openrc():
    systemd = fl.recipe_hash("Types: deb\n")
    assert fl.recipe_hash("Types: deb\n", init="systemd") == systemd
    assert fl.recipe_hash("Types: deb\n", init="openrc") != systemd


def test_image_names():
    assert fl.image_name(init="systemd") == fl.IMAGE
    assert fl.image_name(init="openrc") == fl.IMAGE + "-openrc"


@pytest.mark.parametrize("spec, expected", [("edge1=openrc", ("edge1", "openrc")),
                                            ("edge1=systemd", ("edge1", "systemd"))])
def test_parse_init(spec, expected):
    assert fl.parse_init(spec, {"edge1": []}) == expected


@pytest.mark.parametrize("spec, message", [("edge1", "HOST=INIT"), ("other=openrc", "HOST=INIT"),
                                           ("edge1=runit", "known: systemd, openrc")])
def test_parse_init_refuses(spec, message):
    with pytest.raises(fl.LabError, match=message):
        fl.parse_init(spec, {"edge1": []})


def test_labels_and_inventory_name_openrc_hosts_only():
    assert f"{fl.LABEL}.init" not in fl.container_labels("l", "h", [], [])
    labels = fl.container_labels("l", "h", [], [], init="openrc")
    assert labels[f"{fl.LABEL}.init"] == "openrc"
    record = fl.host_record({"Name": "l-h", "Config": {"Labels": labels}, "State": {"Status": "running"}})
    assert record["init"] == "openrc"
    data = fl.inventory_data([record, dict(record, name="s", container="l-s", init="systemd")])
    assert data["all"]["hosts"]["h"]["lab_init"] == "openrc"
    assert "lab_init" not in data["all"]["hosts"]["s"]


def test_openrc_packages_bring_no_systemd():
    assert not {"systemd", "systemd-sysv", "dbus"} & set(fl.OPENRC_PACKAGES)
    assert "openrc" in fl.OPENRC_PACKAGES


def test_parse_volume():
    assert fl.parse_volume("edge1=/srv/flash:/var/lib/nats-server", {"edge1": []}) == (
        "edge1", "/srv/flash:/var/lib/nats-server")
    for spec in ("edge1=/srv/flash", "other=/a:/b", "edge1=srv:/b", "edge1=/a:b"):
        with pytest.raises(fl.LabError, match="HOST=/MACHINE/PATH:/HOST/PATH"):
            fl.parse_volume(spec, {"edge1": []})
    assert fl.container_labels("l", "h", [], [], volumes=["/a:/b"])[f"{fl.LABEL}.volumes"] == "/a:/b"
    assert f"{fl.LABEL}.volumes" not in fl.container_labels("l", "h", [], [])
