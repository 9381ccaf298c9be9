"""The nats_edge.fleet collector and status page."""
