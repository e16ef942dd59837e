"""The chaos checker (chaos.py) on made-up histories: it must find each
kind of anomaly it reports, and nothing in a clean history."""
import chaos as ch


def history_of(acked, attempted_only=()):
    """`acked`: (value, partition, offset, time_ms)."""
    history = ch.History()
    for value, partition, offset, time_ms in acked:
        history.attempted[value] = (partition, time_ms - 5)
        history.acked[value] = (partition, offset, time_ms)
    for value, partition in attempted_only:
        history.attempted[value] = (partition, 0)
    return history


def log_of(values):
    return list(enumerate(values))


ACKED = [
    ("a-00000000", 0, 0, 1000),
    ("a-00000001", 0, 1, 1010),
    ("b-00000000", 0, 2, 1020),
    ("a-00000002", 0, 3, 1030),
]
CLEAN_LOG = {0: log_of(["a-00000000", "a-00000001", "b-00000000", "a-00000002"])}


def test_a_clean_history_is_clean():
    report = ch.check(history_of(ACKED), CLEAN_LOG, CLEAN_LOG)
    assert report.clean, report.format()
    assert (report.acknowledged, report.read) == (4, 4)


def test_a_missing_acknowledged_value_is_lost():
    log = {0: log_of(["a-00000000", "a-00000001", "b-00000000"])}
    report = ch.check(history_of(ACKED), log)
    assert not report.clean
    assert report.lost == [("a-00000002", 0, 3)]


def test_a_second_copy_is_duplicated():
    log = {0: log_of(["a-00000000", "a-00000001", "b-00000000", "a-00000002", "a-00000001"])}
    report = ch.check(history_of(ACKED), log)
    assert [value for value, _, _ in report.duplicated] == ["a-00000001"]
    assert not report.clean


def test_a_later_value_before_an_earlier_one_is_reordered():
    acked = [("a-00000000", 0, 1, 1000), ("a-00000001", 0, 0, 1010)]
    log = {0: log_of(["a-00000001", "a-00000000"])}
    report = ch.check(history_of(acked), log)
    assert len(report.reordered) == 1 and not report.clean
    # Found even though each record is where its acknowledgement said.
    assert report.moved == []


def test_a_value_read_elsewhere_than_acknowledged_moved():
    acked = [("a-00000000", 0, 0, 1000), ("a-00000001", 0, 1, 1010)]
    log = {0: log_of(["a-00000000", "a-00000002", "a-00000001"])}
    history = history_of(acked, attempted_only=[("a-00000002", 0)])
    report = ch.check(history, log)
    assert report.moved == [("a-00000001", (0, 1), (0, 2))] and not report.clean


def test_an_unacknowledged_value_present_is_counted_not_an_error():
    log = {0: log_of(["a-00000000", "a-00000001", "b-00000000", "a-00000002", "a-00000003"])}
    history = history_of(ACKED, attempted_only=[("a-00000003", 0)])
    report = ch.check(history, log, log)
    assert report.clean and report.unacknowledged_present == 1


def test_a_value_nobody_sent_is_foreign():
    log = {0: log_of(["a-00000000", "a-00000001", "b-00000000", "a-00000002", "junk"])}
    report = ch.check(history_of(ACKED), log)
    assert report.foreign == [(0, 4, "junk")] and not report.clean


def test_readers_that_read_different_logs_disagree():
    short = {0: CLEAN_LOG[0][:3]}
    report = ch.check(history_of(ACKED), CLEAN_LOG, short)
    assert report.readers_disagree == [(0, 4, 3)] and not report.clean


def test_failover_is_measured_from_the_fault_to_the_first_ack_of_the_partition_it_led():
    acked = [
        ("a-00000000", 0, 0, 1000),
        ("a-00000001", 1, 0, 1100),  # another partition, during the failover
        ("a-00000002", 0, 1, 5000),
    ]
    history = history_of(acked)
    history.fault(ch.Fault("kill", 1, 1050, led=[0]))
    report = ch.check(history, {0: log_of(["a-00000000", "a-00000002"]), 1: log_of(["a-00000001"])})
    assert report.failovers_ms == [3950]
    # The longest any partition waited around the fault.
    assert report.gaps_ms == [4000]
