"""The job configuration the spark_job role renders from its variables is one the job accepts: the role's own
vars templated with Ansible's templar, then checked by jetstream-aggregate's checker (no Spark, no hosts)."""

import os

import pytest
import yaml

from role_files import ROOT

pytest.importorskip("pyspark_jetstream")
from ansible.parsing.dataloader import DataLoader  # noqa: E402
from ansible.template import Templar  # noqa: E402

from pyspark_jetstream import job  # noqa: E402

try:  # ansible-core 2.19 renders only templates it trusts (as it trusts a role's files)
    from ansible.template import trust_as_template as trust
    TRUSTED = {"trusted_as_template": True}
except ImportError:
    TRUSTED = {}

    def trust(text):
        return text


def load_role_file(loader, path):
    return loader.load_from_file(os.path.join(ROOT, "roles", "spark_job", path), **TRUSTED)


def rendered(**given):
    loader = DataLoader()
    variables = dict(load_role_file(loader, "defaults/main.yml"), **load_role_file(loader, "vars/main.yml"))
    variables.update(spark_job_servers=["tls://hub-1:4222"], **given)
    # as templates/job.yml.j2 writes it
    template = trust("{{ _spark_job_config | to_nice_yaml }}")
    return yaml.safe_load(Templar(loader=loader, variables=variables).template(template))


@pytest.mark.parametrize("stream, read", [
    ("telemetry", "telemetry"),
    (["telemetry-north", "telemetry-south"], "telemetry-north,telemetry-south"),
])
def test_the_role_renders_a_config_the_job_takes(stream, read):
    config = job.check_config(rendered(spark_job_stream=stream), "job.yml")
    assert config["source_options"]["stream"] == read
    assert config["source_options"]["servers"] == "tls://hub-1:4222"


def test_a_stream_named_twice_is_refused_with_its_key():
    with pytest.raises(job.ConfigError, match="job.yml: source: jetstream option 'stream': a named twice"):
        job.check_config(rendered(spark_job_stream=["a", "a"]), "job.yml")
