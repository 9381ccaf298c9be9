"""The docs layout: a short README that links to the guides, and guides the docs site lists.

The guides live in docs/docsite/rst/guide_<topic>.rst, each starting with its label, and
docs/docsite/extra-docs.yml lists every one of them (`make docs` renders them).
"""

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
RST_DIR = os.path.join(ROOT, "docs", "docsite", "rst")
EXTRA_DOCS = os.path.join(ROOT, "docs", "docsite", "extra-docs.yml")
LABEL_PREFIX = "ansible_collections.nats_edge.fleet.docsite."
README_MAX_LINES = 300

GUIDES = sorted(os.path.splitext(os.path.basename(path))[0]
                for path in glob.glob(os.path.join(RST_DIR, "guide_*.rst")))


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def listed_docs():
    """Every toctree entry of extra-docs.yml, in order, duplicates kept."""
    data = yaml.safe_load(read(EXTRA_DOCS)) or {}
    entries = []
    for section in data.get("sections") or []:
        entries.extend(section.get("toctree") or [])
    return entries


def readme_links():
    """The targets of the README's Markdown links, without their anchors."""
    return [target.split("#", 1)[0] for target in re.findall(r"\]\(([^)\s]+)\)", read(README))]


def test_readme_is_short():
    lines = read(README).splitlines()
    assert len(lines) <= README_MAX_LINES, (
        "README.md has %d lines (at most %d): move the details into a guide under docs/docsite/rst/"
        % (len(lines), README_MAX_LINES))


def test_readme_names_the_two_commands():
    text = read(README)
    for command in ("make demo", "make test"):
        assert re.search(r"^%s\b" % re.escape(command), text, re.M), "README.md lost its %r command line" % command


def test_there_are_guides():
    assert GUIDES, "no docs/docsite/rst/guide_*.rst"


def test_every_guide_is_listed_once():
    listed = listed_docs()
    unlisted = [guide for guide in GUIDES if guide not in listed]
    assert unlisted == [], "guides missing from docs/docsite/extra-docs.yml"
    twice = sorted({entry for entry in listed if listed.count(entry) > 1})
    assert twice == [], "listed more than once in docs/docsite/extra-docs.yml"


def test_every_listed_doc_exists():
    missing = [entry for entry in listed_docs() if not os.path.isfile(os.path.join(RST_DIR, entry + ".rst"))]
    assert missing == [], "listed in docs/docsite/extra-docs.yml without a file in docs/docsite/rst/"


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_starts_with_its_label(guide):
    first = read(os.path.join(RST_DIR, guide + ".rst")).lstrip("\ufeff").split("\n", 1)[0].rstrip()
    assert first == ".. _%s%s:" % (LABEL_PREFIX, guide)


def test_readme_links_to_guides_that_exist():
    guide_links = [target for target in readme_links() if "docs/docsite/rst/" in target]
    assert guide_links, "README.md links to no guide"
    missing = [target for target in guide_links if not os.path.isfile(os.path.join(ROOT, target))]
    assert missing == [], "README.md links to guides that do not exist"
