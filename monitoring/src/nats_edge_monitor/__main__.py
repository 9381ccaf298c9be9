"""python -m nats_edge_monitor exporter|status [options]: the collector's HTTPS exporter or the status page."""

import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"exporter": "nats_edge_monitor.exporter", "status": "nats_edge_monitor.status"}
    if not argv or argv[0] not in commands:
        sys.stderr.write("usage: python -m nats_edge_monitor {exporter|status} [options]\n")
        return 2
    module = __import__(commands[argv[0]], fromlist=["main"])
    sys.argv = ["nats-edge-monitor-%s" % argv[0]] + argv[1:]
    return module.main()


if __name__ == "__main__":
    sys.exit(main())
