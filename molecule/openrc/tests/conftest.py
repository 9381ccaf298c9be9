import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "shared"))

from lab_hosts import lab  # noqa: E402,F401 pylint: disable=unused-import
