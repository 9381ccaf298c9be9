# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline stand-in for the get-pip script ansible-test downloads to bootstrap
the virtual environments of its sanity tests.

ansible-test runs its cached copy (~/.ansible/test/cache/get_pip_<version>.py,
placed there by ``make lint``) with pip's arguments, such as
``pip==24.2 --no-setuptools --no-wheel``. This installs the bundled pip with
ensurepip, then the requested pip from the machine's configured index.
"""

import ensurepip
import os
import subprocess
import sys

ensurepip.bootstrap()
# ensurepip points PIP_CONFIG_FILE at /dev/null, which would hide the machine's index
os.environ.pop("PIP_CONFIG_FILE", None)
requested = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check"] + requested)
