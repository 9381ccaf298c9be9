"""Rows of the bad-input table (test_bad_input.py) for jetstream_object_fetch."""


def rows(table):
    """(id, module, arguments, message fragment) rows; ``table`` is test_bad_input, for its constants."""
    return []
