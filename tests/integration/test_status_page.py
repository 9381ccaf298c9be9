"""nats-edge-monitor-status against a real Prometheus (Debian's, on loopback, TLS with a certificate from a CA
made here) that scrapes fixed fleet series from a prometheus_client server in this process and evaluates a rule
file whose alerts fire on them; the page is then opened in headless Chromium and checked for what a person
sees: the sites, the cut leaf links, the lagging and inactive sources, the alerts, the replication graph and a
screenshot that is a real picture. And: Prometheus unreachable gives a page that says so, and a failing exit."""

import html.parser
import os
import secrets
import shutil
import stat
import struct
import subprocess
import sys
import time
import zlib

import pytest

from conftest import ROOT, free_port
from pki import CA

try:
    from nats_edge_monitor import status
    from prometheus_client import start_http_server
    from prometheus_client.core import CollectorRegistry, GaugeMetricFamily
except ImportError:
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(ROOT, ".venv")):
        raise
    pytest.skip("the monitoring package (nats-edge-monitor) is not installed in this virtualenv: its tests run "
                "in .venv (make integration)", allow_module_level=True)

try:  # Prometheus's basic_auth_users take bcrypt hashes
    import bcrypt
except ImportError:
    bcrypt = None

PROMETHEUS = os.path.join(os.environ.get("PROMETHEUS_DEBIAN", os.path.join(ROOT, ".cache", "prometheus-debian")),
                          "usr", "bin", "prometheus")
STATUS = os.path.join(os.path.dirname(sys.executable), "nats-edge-monitor-status")
WIDTH, HEIGHT = 1280, 1600


def _need(path, what):
    if path and os.path.exists(path):
        return path
    if os.environ.get("CI"):
        pytest.fail("%s missing (make prometheus-tools chromium provides it)" % what)
    pytest.skip("no %s here (make prometheus-tools chromium)" % what)


# --------------------------------------------------------------------------------------------------------------
# the fleet: hub (hub-1), spoke-1 (spoke1-1, both leaf links up), spoke-2 (spoke2-1 silent, both leaf links down)

RELATION = ("site", "server", "account", "stream", "source", "source_site", "kind")
# (site, server, account, stream, source, source_site, kind): lag, active seconds
RELATIONS = {
    ("hub", "hub-1", "TEST", "telemetry", "telemetry-spoke-1", "spoke-1", "source"): (42, 0.4),  # lagging
    ("hub", "hub-1", "TEST", "telemetry", "telemetry-spoke-2", "spoke-2", "source"): (0, 1800),  # inactive
    ("spoke-1", "spoke1-1", "TEST", "config", "config", "hub", "mirror"): (0, 0.3),  # in step
}


class FleetSeries:
    """The series the collector would export for that fleet, fixed."""

    def collect(self):
        up = GaugeMetricFamily("nats_server_up", "answered", labels=["site", "server"])
        healthy = GaugeMetricFamily("nats_server_healthy", "healthz ok", labels=["site", "server"])
        for site, server, value in (("hub", "hub-1", 1), ("spoke-1", "spoke1-1", 1), ("spoke-2", "spoke2-1", 0)):
            up.add_metric([site, server], value)
            if value:
                healthy.add_metric([site, server], 1)
        leaf = GaugeMetricFamily("nats_leaf_link_up", "leaf link", labels=["site", "server", "account"])
        for site, server, value in (("spoke-1", "spoke1-1", 1), ("spoke-2", "spoke2-1", 0)):
            for account in ("TEST", "SYS"):
                leaf.add_metric([site, server, account], value)
        lag = GaugeMetricFamily("nats_stream_source_lag_messages", "lag", labels=list(RELATION))
        active = GaugeMetricFamily("nats_stream_source_active_seconds", "active", labels=list(RELATION))
        for labels, (lag_value, active_value) in RELATIONS.items():
            lag.add_metric(list(labels), lag_value)
            active.add_metric(list(labels), active_value)
        age = GaugeMetricFamily("nats_stream_newest_message_age_seconds", "age",
                                labels=["site", "server", "account", "stream"])
        limit = GaugeMetricFamily("nats_stream_newest_age_threshold_seconds", "threshold",
                                  labels=["site", "server", "account", "stream"])
        for labels, age_value, limit_value in ((("hub", "hub-1", "TEST", "telemetry"), 5, 600),
                                               (("spoke-1", "spoke1-1", "TEST", "config"), 7200, 3600),
                                               (("spoke-1", "spoke1-1", "TEST", "telemetry-spoke-1"), 1, 600)):
            age.add_metric(list(labels), age_value)
            limit.add_metric(list(labels), limit_value)
        connected = GaugeMetricFamily("nats_fleet_collector_connected", "connected")
        connected.add_metric([], 1)
        return [up, healthy, leaf, lag, active, age, limit, connected]


RULES = """\
groups:
  - name: nats-fleet-test
    rules:
      - alert: NatsSiteUnreachable
        expr: max by (site) (nats_leaf_link_up) == 0
        labels: {severity: critical}
        annotations:
          summary: "all leaf links of {{ $labels.site }} are down"
      - alert: NatsSourceInactive
        expr: nats_stream_source_active_seconds > 300
        labels: {severity: warning}
        annotations:
          summary: "{{ $labels.stream }} has not heard from {{ $labels.source }} for {{ $value }} s"
"""


@pytest.fixture
def prometheus(tmp_path):
    """Prometheus on loopback (TLS; basic auth when bcrypt can hash its password) scraping FleetSeries over
    TLS, with RULES. Yields dict(url, ca, user, password_file, stranger_ca, basic_auth)."""
    binary = _need(PROMETHEUS, "Debian's prometheus")
    pki = tmp_path / "pki"
    pki.mkdir()
    ca = CA(pki)
    prom_cert, prom_key = ca.issue("prometheus", usages=("server",))
    exporter_cert, exporter_key = ca.issue("exporter", usages=("server",))
    stranger = CA(pki, name="stranger")

    registry = CollectorRegistry()
    registry.register(FleetSeries())
    exporter_port = free_port()
    exporter, _thread = start_http_server(exporter_port, addr="127.0.0.1", registry=registry,
                                          certfile=exporter_cert, keyfile=exporter_key)

    user, password = "status", secrets.token_urlsafe(18)
    password_file = tmp_path / "prometheus.pass"
    password_file.write_text(password + "\n")
    os.chmod(password_file, 0o600)
    web = ["tls_server_config:", "  cert_file: %s" % prom_cert, "  key_file: %s" % prom_key]
    if bcrypt is not None:
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
        web += ["basic_auth_users:", "  %s: '%s'" % (user, hashed)]
    (tmp_path / "web.yml").write_text("\n".join(web) + "\n")
    (tmp_path / "rules.yml").write_text(RULES)
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [%s]\n"
        "scrape_configs:\n"
        "  - job_name: nats-edge-monitor\n"
        "    scheme: https\n"
        "    tls_config: {ca_file: %s}\n"
        "    static_configs: [{targets: ['127.0.0.1:%d']}]\n" % (tmp_path / "rules.yml", ca.path, exporter_port))
    port = free_port()
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen([binary, "--config.file=%s" % (tmp_path / "prometheus.yml"),
                             "--web.config.file=%s" % (tmp_path / "web.yml"),
                             "--web.listen-address=127.0.0.1:%d" % port,
                             "--storage.tsdb.path=%s" % (tmp_path / "data"), "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, cwd=str(tmp_path))
    url = "https://127.0.0.1:%d" % port
    try:
        client = status.Prometheus(url, ca=ca.path, user=user, password=password, timeout=2)
        _wait_for_data(client, proc, tmp_path / "prometheus.log")
        yield {"url": url, "ca": ca.path, "user": user, "password": password, "password_file": str(password_file),
               "stranger_ca": stranger.path, "basic_auth": bcrypt is not None}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
        exporter.shutdown()
        exporter.server_close()


def _wait_for_data(client, proc, log_path, timeout=30):
    """Until Prometheus has every server's series and both alerts fire."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            servers = client.query("nats_server_up", time.time())
            firing = {(a["labels"].get("alertname"), a["labels"].get("site")) for a in client.alerts()
                      if a.get("state") == "firing"}
            last = (len(servers), sorted(firing))
            if len(servers) == 3 and {("NatsSiteUnreachable", "spoke-2"), ("NatsSourceInactive", "hub")} <= firing:
                return
        except status.PrometheusError as exc:
            last = str(exc)
        time.sleep(0.3)
    raise AssertionError("Prometheus did not get the data and fire the alerts; last: %r; log: %s" % (
        last, log_path.read_text()[-3000:]))


# --------------------------------------------------------------------------------------------------------------
# running the command, looking at the page


def _status(*args):
    return subprocess.run([STATUS] + [str(arg) for arg in args], capture_output=True, text=True, timeout=60,
                          check=False)


def _chromium(tmp_path, *args):
    binary = _need(shutil.which("chromium"), "chromium")
    profile = tmp_path / "chromium-profile"
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
               "--user-data-dir=%s" % profile, "--window-size=%d,%d" % (WIDTH, HEIGHT)] + list(args)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, HOME=str(tmp_path)))
    assert proc.returncode == 0, "chromium failed: %s" % proc.stderr[-2000:]
    return proc.stdout


class Element:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    @property
    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        hidden = ("style", "script", "head", "title")
        return " ".join(" ".join(child.split()) if isinstance(child, str) else
                        ("" if child.tag in hidden else child.text()) for child in self.children).strip()

    def find_all(self, tag=None, cls=None, **attrs):
        found = []
        for child in self.children:
            if isinstance(child, str):
                continue
            if ((tag is None or child.tag == tag) and (cls is None or cls in child.classes)
                    and all(child.attrs.get(key.replace("_", "-")) == value for key, value in attrs.items())):
                found.append(child)
            found.extend(child.find_all(tag, cls, **attrs))
        return found

    def one(self, tag=None, cls=None, **attrs):
        found = self.find_all(tag, cls, **attrs)
        assert len(found) == 1, "expected one <%s class=%s %s>, found %d" % (tag, cls, attrs, len(found))
        return found[0]


class DomTree(html.parser.HTMLParser):
    """The DOM Chromium dumped, as a tree of Elements."""

    VOID = {"meta", "link", "br", "hr", "img", "input", "col", "area", "base", "source", "wbr"}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = self.current = Element("#root", [], None)
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = Element(tag, attrs, self.current)
        self.current.children.append(element)
        if tag not in self.VOID:
            self.current = element

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, attrs, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def _png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
    width, height, depth, colour, _compression, _filter, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + previous[i]) // 2) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = previous[i], previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        previous = line
    return width, height, bpp, rows


# --------------------------------------------------------------------------------------------------------------
# the tests


def test_status_page_shows_the_fleet(prometheus, tmp_path):
    started = time.monotonic()
    out = tmp_path / "www"
    out.mkdir()
    page = out / "index.html"
    result = _status("--prometheus", prometheus["url"], "--ca", prometheus["ca"], "--user", prometheus["user"],
                     "--password-file", prometheus["password_file"], "--output", page, "--title", "Lab fleet")
    assert result.returncode == 0, result.stderr
    assert prometheus["password"] not in result.stdout + result.stderr
    assert stat.S_IMODE(os.stat(page).st_mode) == 0o644
    assert os.listdir(out) == ["index.html"], "the temporary file is left: %s" % os.listdir(out)
    source = page.read_text()
    assert prometheus["password"] not in source
    assert "<script" not in source.lower()
    for outside in ("http://", "https://"):  # no outside resource: the only URLs are the SVG namespace and the
        # Prometheus it was read from, as text
        assert all(part.startswith(("www.w3.org/2000/svg", "127.0.0.1:")) for part in source.split(outside)[1:])

    dom = DomTree(_chromium(tmp_path, "--dump-dom", page.as_uri())).root
    body = dom.one("body")
    seen = body.text()

    # the header: the fleet's state, the counts by severity, when it was written
    header = body.one("header")
    assert "bad" in header.classes
    assert "CRITICAL" in header.text() and "Lab fleet" in header.text()
    assert "2 firing alerts: 1 critical, 1 warning" in header.text()
    assert "written %s" % time.strftime("%Y-%m-%d", time.gmtime()) in header.text()

    # the sites, by name, with servers, healthz, leaf links and the link to the hub
    rows = {row.attrs["data-site"]: row for row in body.find_all("tr", cls="site")}
    assert sorted(rows) == ["hub", "spoke-1", "spoke-2"]
    assert "this is the hub" in rows["hub"].text() and "1/1 up" in rows["hub"].text()
    assert "connected" in rows["spoke-1"].text() and "2/2 up" in rows["spoke-1"].text()
    spoke2 = rows["spoke-2"].text()
    assert "bad" in rows["spoke-2"].classes
    assert "0/1 up" in spoke2 and "0/2 up" in spoke2 and "DOWN" in spoke2, spoke2
    assert "spoke2-1 (TEST)" in spoke2 and "NatsSiteUnreachable" in spoke2

    # the firing alerts with their site, severity, summary and since when
    alerts = body.find_all("tr", cls="alert")
    assert [(a.attrs["data-alert"], a.attrs["data-site"]) for a in alerts] == [
        ("NatsSiteUnreachable", "spoke-2"), ("NatsSourceInactive", "hub")]
    unreachable = alerts[0].text()
    assert "critical" in unreachable and "all leaf links of spoke-2 are down" in unreachable
    assert "UTC" in unreachable
    assert "telemetry has not heard from telemetry-spoke-2" in alerts[1].text()

    # the replication graph: a node per site, an edge per relation, the lagging ones and the down link flagged
    svg = body.one("svg", cls="graph")
    assert sorted(node.attrs["data-site"] for node in svg.find_all("g", cls="site-node")) == [
        "hub", "spoke-1", "spoke-2"]
    edges = {(e.attrs["data-from"], e.attrs["data-to"], e.attrs["data-stream"], e.attrs["data-source"],
              e.attrs["data-kind"]): e for e in svg.find_all("g", cls="relation")}
    assert sorted(edges) == sorted((k[5], k[0], k[3], k[4], k[6]) for k in RELATIONS)
    assert all(edge.find_all("path") for edge in edges.values())
    assert "lagging" in edges[("spoke-1", "hub", "telemetry", "telemetry-spoke-1", "source")].classes  # lag 42
    assert "lagging" in edges[("spoke-2", "hub", "telemetry", "telemetry-spoke-2", "source")].classes  # alert
    assert "ok" in edges[("hub", "spoke-1", "config", "config", "mirror")].classes
    graph_text = svg.text()
    assert "telemetry \u2190 telemetry-spoke-1 (source) lag 42" in graph_text
    assert "config \u2190 config (mirror)" in graph_text
    assert "down" in svg.one("g", cls="leaf-link", data_site="spoke-2").classes
    assert "up" in svg.one("g", cls="leaf-link", data_site="spoke-1").classes
    assert "leaf 0/2 up" in graph_text
    relation_rows = body.one("table", cls="relations").text()
    assert "LAGGING: lag > 0" in relation_rows and "LAGGING: NatsSourceInactive" in relation_rows

    # per site: max source lag, newest-message age against its threshold
    freshness = {row.attrs["data-site"]: row.text() for row in body.one("table", cls="freshness").find_all("tr")
                 if "data-site" in row.attrs}
    assert "42" in freshness["hub"] and "5 s" in freshness["hub"] and "10 min" in freshness["hub"]
    assert "2 h" in freshness["spoke-1"] and "1 h" in freshness["spoke-1"]
    assert "1 of 2 over: TEST/config" in freshness["spoke-1"]
    assert "Prometheus could not be read" not in seen

    # what it looks like: a real picture of the page's size, with colour and the red of what is wrong
    shot = tmp_path / "status-page.png"
    _chromium(tmp_path, "--screenshot=%s" % shot, page.as_uri())
    width, height, bpp, pixels = _png_pixels(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    colours, red, green = set(), 0, 0
    for line in pixels[::2]:
        for x in range(0, width * bpp, bpp * 2):
            r, g, b = line[x], line[x + 1], line[x + 2]
            colours.add((r, g, b))
            red += r > 170 and g < 90 and b < 90
            green += g > 100 and r < 90 and b < 90
    assert len(colours) > 50, "the screenshot is nearly blank: %d colours" % len(colours)
    assert red > 2000 and green > 200, (red, green)
    print("status page screenshot: %s" % shot)

    # TLS is verified: a Prometheus whose certificate another CA issued is not read, and the page says so
    result = _status("--prometheus", prometheus["url"], "--ca", prometheus["stranger_ca"], "--user",
                     prometheus["user"], "--password-file", prometheus["password_file"], "--output", page)
    assert result.returncode == 1
    assert "TLS verification failed" in page.read_text() and "Prometheus could not be read" in page.read_text()
    if prometheus["basic_auth"]:
        wrong = tmp_path / "wrong.pass"
        wrong.write_text("not-the-password\n")
        result = _status("--prometheus", prometheus["url"], "--ca", prometheus["ca"], "--user", prometheus["user"],
                         "--password-file", wrong, "--output", page)
        assert result.returncode == 1 and "401" in page.read_text()
    assert time.monotonic() - started < 45


def test_status_page_when_prometheus_is_unreachable(tmp_path):
    ca = CA(tmp_path)
    password_file = tmp_path / "pass"
    password_file.write_text("secret-never-shown\n")
    page = tmp_path / "index.html"
    page.write_text("the previous page")
    port = free_port()  # nothing listens there
    result = _status("--prometheus", "https://127.0.0.1:%d" % port, "--ca", ca.path, "--user", "status",
                     "--password-file", password_file, "--output", page, "--timeout", "3")
    assert result.returncode == 1
    assert "cannot reach Prometheus at https://127.0.0.1:%d" % port in result.stderr
    text = page.read_text()
    assert stat.S_IMODE(os.stat(page).st_mode) == 0o644
    dom = DomTree(text).root
    banner = dom.one("div", cls="unreachable")
    assert "Prometheus could not be read" in banner.text() and "127.0.0.1:%d" % port in banner.text()
    assert "UNKNOWN" in dom.one("header").text()
    assert not dom.find_all("tr", cls="site") and not dom.find_all("svg", cls="graph")
    assert "secret-never-shown" not in text + result.stdout + result.stderr

    # plain http is refused unless asked for, and nothing is written then
    page.unlink()
    result = _status("--prometheus", "http://127.0.0.1:%d" % port, "--output", page)
    assert result.returncode == 2 and "--insecure-plaintext" in result.stderr and not page.exists()
    result = _status("--prometheus", "http://127.0.0.1:%d" % port, "--insecure-plaintext", "--output", page,
                     "--timeout", "3")
    assert result.returncode == 1 and "Prometheus could not be read" in page.read_text()
