"""Rows of the bad-input table (test_bad_input.py) for host_state, nats_server_state and nats_leaf_reconnect."""


def rows(table):
    """(id, module, arguments, message fragment) rows; ``table`` is test_bad_input, for its constants."""
    return []
