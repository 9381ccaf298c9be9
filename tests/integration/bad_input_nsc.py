"""Rows of the bad-input table (test_bad_input.py) for the nsc modules (operator, accounts, users, exports, the store)."""


def rows(table):
    """(id, module, arguments, message fragment) rows; ``table`` is test_bad_input, for its constants."""
    return []
