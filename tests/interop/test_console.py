"""The web console in a real browser: headless Chromium (Debian's package)
loads the console's pages from a broker that holds records and a consumer
group (made with librdkafka), and the test checks what the pages show. The
screenshots are kept under target/console-screenshots/ as test artefacts.
"""
import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from conftest import ROOT, free_port
from datapath import create_topic

TOPIC = "console-topic"
GROUP = "console-group"
RECORDS = 30
CONSUMED = 25
SCREENSHOTS = Path(ROOT) / "target" / "console-screenshots"


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("chromium is not installed (scripts/test installs Debian's package)")


def browse(url: str, screenshot: Path = None) -> str:
    """The DOM of `url` after its scripts ran (or, with `screenshot`, saves
    a PNG of it and returns "")."""
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--virtual-time-budget=4000", "--window-size=1280,1000"]
    if screenshot is not None:
        command += [f"--screenshot={screenshot}", url]
    else:
        command += ["--dump-dom", url]
    result = subprocess.run(command, capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.decode(errors="replace")


def cells(dom: str, table_id: str) -> list:
    """The text of each row's cells of the table with `table_id`."""
    match = re.search(rf'<table id="{table_id}">(.*?)</table>', dom, re.S)
    assert match, f"no table {table_id} in the page"
    rows = re.findall(r"<tr>(.*?)</tr>", match.group(1), re.S)
    return [[re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", row, re.S)] for row in rows[1:]]


@pytest.fixture
def console(broker_factory):
    metrics_port = free_port()
    broker = broker_factory(**{"strom.metrics.listener": f"http://127.0.0.1:{metrics_port}",
                               # A static broker setting, for the configs' sources.
                               "log.retention.bytes": "1073741824"})
    create_topic(broker.bootstrap, TOPIC, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for index in range(RECORDS):
        producer.produce(TOPIC, key=f"key-{index}", value=f"value-{index}", partition=0,
                         headers=[("source", b"console-test")])
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP,
                         "client.id": "console-client", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    read = 0
    deadline = time.monotonic() + 30
    while read < CONSUMED and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            read += 1
            if read == CONSUMED:
                consumer.commit(message=message, asynchronous=False)
    assert read == CONSUMED
    # Two history samples (2 s apart) so that the charts have a rate to draw.
    time.sleep(4.5)
    try:
        yield broker, f"http://127.0.0.1:{metrics_port}"
    finally:
        consumer.close()


@pytest.mark.timeout(400)
def test_the_console_shows_the_cluster_topics_records_and_groups(console):
    broker, base = console
    cluster = json.loads(urllib.request.urlopen(base + "/api/cluster", timeout=10).read())
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    overview = browse(base + "/console#/")
    assert f'id="cluster-id">{cluster["cluster_id"]}<' in overview
    assert [f"1", f"PLAINTEXT://{broker.bootstrap}", "", "unfenced"] in cells(overview, "brokers-table")
    topics = cells(overview, "topics-table")
    assert [TOPIC, "2"] == topics[0][:2] and topics[0][3] == str(RECORDS), topics
    assert cells(overview, "groups-table") == [[GROUP, "Stable", "consumer", str(RECORDS - CONSUMED)]]
    assert 'id="chart-throughput"' in overview and 'id="chart-lag"' in overview
    # The rate chart covers the sampled past, with a time axis, and shows the
    # records written before the page opened (a topic that appeared between
    # two samples counts from zero).
    summary = re.search(r'id="chart-throughput-summary">(.*?)<', overview).group(1)
    assert re.match(r"\d\d:\d\d:\d\d to \d\d:\d\d:\d\d\. ", summary), summary
    peak = float(re.search(rf"{TOPIC}: peak ([0-9.]+)", summary).group(1))
    assert peak > 0, summary
    browse(base + "/console#/", screenshot=SCREENSHOTS / "overview.png")

    topic = browse(base + f"/console#/topic/{TOPIC}")
    partitions = cells(topic, "topic-partitions")
    # partition, leader, replicas, ISR, log start, high watermark, last
    # stable, open transactions, log end
    assert partitions[0][:9] == ["0", "1", "1", "1", "0", str(RECORDS), str(RECORDS), "0",
                                 str(RECORDS)], partitions
    assert partitions[1][:9] == ["1", "1", "1", "1", "0", "0", "0", "0", "0"], partitions
    records = cells(topic, "records-table")
    assert len(records) == 20
    assert records[-1][:2] == ["0", str(RECORDS - 1)]
    assert records[-1][3:] == [f"key-{RECORDS - 1}", f"value-{RECORDS - 1}", "source=console-test"]
    browse(base + f"/console#/topic/{TOPIC}", screenshot=SCREENSHOTS / "topic.png")

    group = browse(base + f"/console#/group/{GROUP}")
    members = cells(group, "group-members")
    assert len(members) == 1 and members[0][1] == "console-client", members
    assert members[0][3] == f"{TOPIC}: 0, 1"
    assert cells(group, "group-offsets") == [[TOPIC, "0", str(CONSUMED), str(RECORDS), str(RECORDS - CONSUMED)]]
    browse(base + f"/console#/group/{GROUP}", screenshot=SCREENSHOTS / "group.png")
    for name in ("overview", "topic", "group"):
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 10_000


@pytest.mark.timeout(60)
def test_the_console_api_answers_404_for_what_does_not_exist_and_groups_are_counted(console):
    _, base = console
    # The group's one member made one rebalance, and the group is Stable.
    exposition = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    assert "strom_group_rebalances_total 1\n" in exposition
    assert 'kafka_coordinator_group_groupmetadatamanager_numgroups{state="Stable"} 1\n' in exposition
    for path in ("/api/topics/nope", "/api/groups/nope%zz", "/api/nothing"):
        try:
            urllib.request.urlopen(base + path, timeout=10)
            raise AssertionError(f"{path} answered")
        except urllib.error.HTTPError as error:
            assert error.code == 404, (path, error.code)


def browser_page(base: str, topic: str, **params) -> str:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return browse(f"{base}/console#/topic/{topic}?{query}")


@pytest.mark.timeout(300)
def test_the_message_browser_shows_what_librdkafka_wrote(console):
    broker, base = console
    topic = "browse-topic"
    create_topic(broker.bootstrap, topic, partitions=1, config={"retention.ms": "3600000"})
    start_ms = 1_700_000_000_000
    binary = bytes(range(0x80, 0x90))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for index in range(40):
        if index == 3:
            value = json.dumps({"order": 3, "items": ["a", "b"]}).encode()
        elif index == 4:
            value = binary
        else:
            value = f"value-{index}".encode()
        producer.produce(topic, key=f"key-{index}", value=value, partition=0,
                         timestamp=start_ms + index * 1000, headers=[("trace", f"t{index}".encode())])
    assert producer.flush(15) == 0

    # From offset 0: JSON pretty-printed, binary as hex, headers listed.
    dom = browser_page(base, topic, partition=0, mode="offset", offset=0, limit=20, format="auto")
    rows = cells(dom, "records-table")
    assert [row[1] for row in rows] == [str(i) for i in range(20)]
    assert rows[0][3:] == ["key-0", "value-0", "trace=t0"]
    assert '"order": 3,\n  "items": [' in rows[3][4], rows[3][4]
    assert rows[4][4] == " ".join(f"{b:02x}" for b in binary), rows[4][4]
    # Forced hex shows the text's bytes.
    hexed = cells(browser_page(base, topic, partition=0, mode="offset", offset=5, limit=1, format="hex"),
                  "records-table")
    assert hexed[0][4] == " ".join(f"{b:02x}" for b in b"value-5")

    # A timestamp search lands on the first record at or after it.
    rows = cells(browser_page(base, topic, partition=0, mode="timestamp", timestamp=start_ms + 6500, limit=5),
                 "records-table")
    assert [row[1] for row in rows] == ["7", "8", "9", "10", "11"]

    # A filter on the value.
    rows = cells(browser_page(base, topic, partition=0, mode="latest", filter="value-1", limit=20),
                 "records-table")
    assert [row[1] for row in rows] == ["1"] + [str(i) for i in range(10, 20)]

    # Paging back from the newest reaches offset 0, and newer pages return.
    seen = []
    params = {"partition": 0, "mode": "latest", "limit": 15}
    for _ in range(10):
        dom = browser_page(base, topic, **params)
        seen = [int(row[1]) for row in cells(dom, "records-table")] + seen
        before = re.search(r'id="browse-older" data-before="(\d+)"', dom)
        if before is None:
            assert 'id="browse-older" disabled=""' in dom
            break
        params = {"partition": 0, "mode": "offset", "before": before.group(1), "limit": 15}
    assert seen == list(range(40)), seen
    newer = re.search(r'id="browse-newer" data-offset="(\d+)"', dom)
    assert newer and newer.group(1) == "10", dom[-500:]

    # Configs with their sources: set on the topic, set on the broker, and
    # Kafka's defaults (shown on request).
    configs = {row[0]: row[1:] for row in cells(dom, "topic-configs")}
    assert configs["retention.ms"] == ["3600000", "DYNAMIC_TOPIC_CONFIG"], configs
    assert configs["retention.bytes"] == ["1073741824", "STATIC_BROKER_CONFIG"], configs
    assert "segment.bytes" not in configs
    every = {row[0]: row[1:] for row in cells(browser_page(base, topic, configs="all"), "topic-configs")}
    assert every["segment.bytes"] == ["1073741824", "DEFAULT_CONFIG"], every
    assert len(every) > 25, every

    # Bad input: a clear message on the page, a 400 from the API.
    dom = browser_page(base, topic, partition=0, mode="offset", offset=999999)
    assert re.search(r'id="browse-error"[^>]*>offset 999999 is out of range', dom), dom[-800:]
    for bad in ("limit=0", "partition=9", "offset=1&before=2", "filter=%zz"):
        try:
            urllib.request.urlopen(f"{base}/api/topics/{topic}/records?{bad}", timeout=10)
            raise AssertionError(f"{bad} answered")
        except urllib.error.HTTPError as error:
            assert error.code == 400, (bad, error.code)
            assert json.loads(error.read())["error"], bad

    # The raw download serves the whole binary value.
    raw = urllib.request.urlopen(f"{base}/api/topics/{topic}/records/raw?partition=0&offset=4", timeout=10)
    assert raw.read() == binary
    assert "attachment" in raw.headers["Content-Disposition"]

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "browser.png"
    browse(f"{base}/console#/topic/{topic}?partition=0&mode=offset&offset=0&limit=10", screenshot=shot)
    assert shot.stat().st_size > 10_000
