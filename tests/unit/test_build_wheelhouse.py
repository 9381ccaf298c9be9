"""The wheelhouse build's stamp: an unchanged wheelhouse answers at once, any change in its inputs or wheels
builds again."""

import argparse
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location(
    "build_wheelhouse", os.path.join(ROOT, "roles", "spark_runtime", "files", "build_wheelhouse.py"))
build = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(build)


@pytest.fixture
def built(tmp_path):
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "job.py").write_text("print(1)\n")
    house = tmp_path / "wheelhouse" / "x86_64-py311"
    house.mkdir(parents=True)
    (house / "a-1.0-py3-none-any.whl").write_bytes(b"a" * 10)
    args = argparse.Namespace(dir=str(house), source=str(source), pyspark="4.3.0", arch="x86_64", python="3.11",
                              extra=[])
    answer = build.answer(str(house), True, "a-1.0-py3-none-any.whl")
    with open(build.stamp_path(str(house)), "w") as handle:
        json.dump({"inputs": build.inputs(args), "listing": build.listing(str(house)), "answer": answer}, handle)
    return args, source, house


def test_an_unchanged_wheelhouse_answers_from_its_stamp(built):
    args, _source, house = built
    assert build.unchanged(args)["listing"] == ["a-1.0-py3-none-any.whl 10"]
    assert not os.path.exists(os.path.join(str(house), ".build-stamp.json"))  # the hosts never get it


@pytest.mark.parametrize("change", ["source", "new source file", "version", "extra", "wheel rewritten", "wheel gone"])
def test_any_change_builds_again(built, change):
    args, source, house = built
    if change == "source":
        (source / "pkg" / "job.py").write_text("print(2)\n")
    elif change == "new source file":
        (source / "pkg" / "more.py").write_text("")
    elif change == "version":
        args.pyspark = "4.3.1"
    elif change == "extra":
        args.extra = ["requests"]
    elif change == "wheel rewritten":
        (house / "a-1.0-py3-none-any.whl").write_bytes(b"b" * 11)
    else:
        (house / "a-1.0-py3-none-any.whl").unlink()
    assert build.unchanged(args) is None


def test_build_output_is_ignored_in_the_source(built):
    args, source, _house = built
    (source / "build").mkdir()
    (source / "build" / "junk.py").write_text("x")
    (source / "pkg" / "__pycache__").mkdir()
    (source / "pkg" / "__pycache__" / "job.cpython-311.pyc").write_bytes(b"x")
    (source / "pkg.egg-info").mkdir()
    (source / "pkg.egg-info" / "PKG-INFO").write_text("x")
    assert build.unchanged(args) is not None
