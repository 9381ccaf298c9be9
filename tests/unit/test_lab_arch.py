"""fleetlab's hosts of other architectures (qemu-user): the pure parts."""

import pytest

from test_lab import fl


def test_native_recipe_is_untouched_by_foreign_ones():
    native = fl.recipe_hash("Types: deb\n")
    assert fl.recipe_hash("Types: deb\n", "amd64") == native
    arm = {arch: fl.recipe_hash("Types: deb\n", arch) for arch in fl.FOREIGN_ARCHES}
    assert len(set(arm.values()) | {native}) == len(fl.FOREIGN_ARCHES) + 1


def test_image_names():
    assert fl.image_name() == fl.IMAGE
    assert fl.image_name("arm64") == fl.IMAGE + "-arm64"


@pytest.mark.parametrize("spec, expected", [("edge1=arm64", ("edge1", "arm64")), ("edge1=armel", ("edge1", "armel")),
                                            ("edge1=amd64", ("edge1", "amd64"))])
def test_parse_arch(spec, expected):
    assert fl.parse_arch(spec, {"edge1": []}) == expected


@pytest.mark.parametrize("spec, message", [("edge1", "HOST=ARCH"), ("other=arm64", "HOST=ARCH"),
                                           ("edge1=sparc", "known: amd64, arm64, armhf, armel")])
def test_parse_arch_refuses(spec, message):
    with pytest.raises(fl.LabError, match=message):
        fl.parse_arch(spec, {"edge1": []})


def test_labels_name_a_foreign_arch_only():
    assert f"{fl.LABEL}.arch" not in fl.container_labels("l", "h", [], [])
    assert fl.container_labels("l", "h", [], [], "arm64")[f"{fl.LABEL}.arch"] == "arm64"


def test_inventory_marks_foreign_hosts():
    native = {"lab": "l", "name": "a", "container": "l-a", "address": "", "groups": [], "publish": [], "state": "x"}
    data = fl.inventory_data([native, dict(native, name="b", container="l-b", arch="arm64")])
    assert "lab_arch" not in data["all"]["hosts"]["a"]
    assert data["all"]["hosts"]["b"]["lab_arch"] == "arm64"


def test_update_failures_name_the_indexes():
    out = ("Hit:1 http://mirror/debian bookworm InRelease\n"
           "E: Failed to fetch http://mirror/debian-security/dists/bookworm-security/main/binary-armhf/Packages.xz  "
           "File has unexpected size (334084 != 349884). Mirror sync in progress?\n"
           "E: Some index files failed to download. They have been ignored, or old ones used instead.\n")
    failed = fl.update_failures(out)
    assert len(failed) == 1 and "bookworm-security" in failed[0]
    assert fl.update_failures("Reading package lists...\n") == []
