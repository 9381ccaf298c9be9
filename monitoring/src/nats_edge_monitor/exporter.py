"""nats-edge-monitor-exporter: serves the fleet's metrics (metrics.py) at /metrics over HTTPS with client
certificates verified against ``listen.client_ca``; a collection (collect.py) per scrape.

    nats-edge-monitor-exporter --config /etc/nats-edge-monitor/exporter.json
    nats-edge-monitor-exporter --config FILE --once     # print the metrics once and exit
    nats-edge-monitor-exporter --config FILE --check    # check the config file and exit
"""

import argparse
import logging
import os
import signal
import ssl
import sys
import threading

from nats_edge_monitor._config import ConfigError, load_config

__all__ = ["main", "build"]

LOG = logging.getLogger("nats_edge_monitor")


def _prometheus():
    try:
        import prometheus_client  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise SystemExit("nats-edge-monitor-exporter: the prometheus-client library is missing (pip package "
                         "prometheus-client): %s" % exc)
    return prometheus_client


def build(config):
    """(registry, collector) for ``config``: a registry holding only the fleet's metrics."""
    from nats_edge_monitor.collect import Collector  # pylint: disable=import-outside-toplevel
    from nats_edge_monitor.metrics import FleetMetrics  # pylint: disable=import-outside-toplevel

    prometheus_client = _prometheus()
    collector = Collector(config["nats"], expected=[entry["server"] for entry in config["servers"]])
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(FleetMetrics(collector, config, log=LOG))
    return registry, collector


def _check_files(config):
    """Files the exporter reads at start: readable, or a ConfigError naming the field."""
    checks = [("nats.creds", config["nats"].get("creds")), ("nats.ca", config["nats"].get("ca"))]
    if not config["listen"]["plaintext"]:
        checks += [("listen.cert", config["listen"]["cert"]), ("listen.key", config["listen"]["key"]),
                   ("listen.client_ca", config["listen"]["client_ca"])]
    for field, path in checks:
        if path and not os.access(path, os.R_OK):
            reason = "does not exist" if not os.path.exists(path) else "is not readable by this user"
            raise ConfigError("%s: %s %s" % (field, path, reason))


def _serve(config, registry):
    prometheus_client = _prometheus()
    listen = config["listen"]
    if listen["plaintext"]:
        LOG.warning("listen.plaintext is true: /metrics is served over plain HTTP without client certificates")
        return prometheus_client.start_http_server(listen["port"], addr=listen["address"], registry=registry)
    return prometheus_client.start_http_server(listen["port"], addr=listen["address"], registry=registry,
                                               certfile=listen["cert"], keyfile=listen["key"],
                                               client_cafile=listen["client_ca"], client_auth_required=True,
                                               tls_min_version=ssl.TLSVersion.TLSv1_2)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="nats-edge-monitor-exporter",
                                     description="Serve the NATS fleet's metrics, read through the system account.")
    parser.add_argument("--config", required=True, help="the exporter's JSON config file")
    parser.add_argument("--once", action="store_true", help="print the metrics once (Prometheus text) and exit")
    parser.add_argument("--check", action="store_true", help="check the config file and exit")
    parser.add_argument("--log-level", default=os.environ.get("NATS_EDGE_MONITOR_LOG_LEVEL", "INFO"),
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("nats").setLevel(logging.CRITICAL)
    try:
        config = load_config(args.config)
        _check_files(config)
    except ConfigError as exc:
        sys.stderr.write("nats-edge-monitor-exporter: config error: %s\n" % exc)
        return 2
    if args.check:
        return 0
    prometheus_client = _prometheus()
    registry, collector = build(config)
    if args.once:
        try:
            sys.stdout.write(prometheus_client.generate_latest(registry).decode("utf-8"))
            sys.stdout.flush()
        finally:
            collector.close()
        return 0
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: stop.set())
    try:
        served = _serve(config, registry)
    except (OSError, ValueError) as exc:
        sys.stderr.write("nats-edge-monitor-exporter: cannot listen on %s:%s: %s\n" % (
            config["listen"]["address"], config["listen"]["port"], exc))
        collector.close()
        return 1
    LOG.info("serving /metrics on %s:%d (%s)", config["listen"]["address"], config["listen"]["port"],
             "plain HTTP" if config["listen"]["plaintext"] else "HTTPS, client certificates required")
    stop.wait()
    LOG.info("stopping")
    if isinstance(served, tuple):
        server = served[0]
        server.shutdown()
        server.server_close()
    collector.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
