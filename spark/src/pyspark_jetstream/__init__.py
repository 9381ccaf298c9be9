"""Apache Spark data source ``jetstream``: NATS JetStream streams as tables,
in batch and structured streaming (exactly once, offsets are stream sequences).

Installing the package registers the source: Spark looks for installed
``pyspark_*`` modules that define ``DefaultSource``. ``register(spark)`` does
it by hand.
"""

from pyspark_jetstream.source import JetStreamDataSource

__version__ = "0.1.0"

DefaultSource = JetStreamDataSource


def register(spark):
    """Register the data source with a session (where the automatic lookup is off)."""
    spark.dataSource.register(JetStreamDataSource)


__all__ = ["DefaultSource", "JetStreamDataSource", "register", "__version__"]
