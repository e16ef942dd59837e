"""Long chaos runs (scripts/chaos): three Strom processes in network
namespaces, idempotent acks=all producers (confluent-kafka and
strom-producer), min.insync.replicas=2, and N fault cycles chosen by a
seed, each healed before the next; then the checker's report (chaos.py).

    chaos_run.py --cycles 100 [--seed S] [--unclean] [--kinds kill,pause,...]
                 [--time-limit 3600] [--json FILE]

Stops by itself after the cycles or the time limit, whichever comes
first. Exits 1 when the report is not clean (lost, duplicated, reordered,
moved or foreign records, or readers that disagree), except with
`--unclean`, where losses are expected and only counted.
"""
import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import chaos as ch
import conftest

TOPIC = "chaos"


def arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--unclean", action="store_true",
                        help="unclean.leader.election.enable=true (losses expected and counted)")
    parser.add_argument("--kinds", default=",".join(ch.Chaos.KINDS),
                        help=f"faults to draw from (default: {','.join(ch.Chaos.KINDS)})")
    parser.add_argument("--controllers", type=int, default=0,
                        help="controller-only nodes beside the 3 brokers (default 0: 3 combined nodes)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=int, default=80, help="records a second per producer")
    parser.add_argument("--time-limit", type=float, default=3600.0, help="seconds of faults at most")
    parser.add_argument("--json", type=Path, default=None, help="write the report here too")
    parser.add_argument("-C", dest="confluent", action="append", default=[], metavar="KEY=VALUE",
                        help="a confluent-kafka producer property (repeatable)")
    parser.add_argument("-S", dest="strom", action="append", default=[], metavar="KEY=VALUE",
                        help="a strom-producer property (repeatable)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the nodes' directories and logs")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    kinds = [kind for kind in args.kinds.split(",") if kind]
    unknown = set(kinds) - set(ch.Chaos.KINDS) - set(ch.Chaos.OVERLAPPING)
    if unknown:
        print(f"unknown fault kinds {sorted(unknown)}", file=sys.stderr)
        return 2
    rng = random.Random(seed)
    print(f"chaos: seed {seed}, {args.cycles} cycles of {kinds}, unclean={args.unclean}, "
          f"{args.controllers} controller-only nodes", flush=True)
    base = Path(tempfile.mkdtemp(prefix="strom-chaos-"))
    cluster, disk = ch.start_cluster(conftest.broker_binary(), base, disk_node="disk" in kinds,
                                     unclean=args.unclean, controllers=args.controllers)
    history = ch.History()
    started = time.monotonic()
    cycles_run = 0
    try:
        ch.create_topic(cluster, TOPIC, args.partitions)
        workloads = [
            ch.ConfluentWorkload("librdkafka", cluster.bootstrap, TOPIC, args.partitions, history, rate=args.rate,
                                 extra=dict(item.split("=", 1) for item in args.confluent)),
            ch.StromWorkload("strom", cluster.bootstrap, TOPIC, args.partitions, history, rate=args.rate,
                             extra=dict(item.split("=", 1) for item in args.strom)),
        ]
        cluster.workloads.extend(workloads)
        for workload in workloads:
            workload.start()
        chaos = ch.Chaos(cluster, TOPIC, args.partitions, history, rng, disk=disk,
                         log=lambda line: print(f"[{time.monotonic() - started:7.1f}s] {line}", flush=True))
        time.sleep(2)
        while cycles_run < args.cycles and time.monotonic() - started < args.time_limit:
            chaos.one(rng.choice(kinds))
            cycles_run += 1
        time.sleep(2)
        ch.stop_workloads(workloads)
        report = ch.check(history, ch.read_confluent(cluster.bootstrap, TOPIC, args.partitions),
                          ch.read_strom(cluster.bootstrap, TOPIC, args.partitions))
        if disk is not None and (args.keep_logs or not report.clean):
            # The tmpfs goes with the cluster: keep a copy of its logs.
            shutil.copytree(disk.directory, disk.directory.parent / "data-kept",
                            ignore=shutil.ignore_patterns("chaos-ballast"))
    except BaseException:
        print(f"chaos: stopped in cycle {cycles_run + 1} (seed {seed}); logs under {base}", flush=True)
        print(cluster.details(), flush=True)
        raise
    finally:
        cluster.close()
    summary = {"seed": seed, "cycles": cycles_run, "unclean": args.unclean, "controllers": args.controllers,
               "seconds": round(time.monotonic() - started, 1), **report.summary(),
               "failover_by_fault": [[fault.kind, fault.node, fault.controller, fault.start_ms, fault.elected_ms,
                                      fault.failover_ms]
                                     for fault in history.faults if fault.failover_ms],
               # librdkafka's producer epoch bumps (time, producer, log line).
               "client_epoch_bumps": report.client_events}
    print(json.dumps(summary, indent=1))
    print(report.format().split("\n", 1)[1] if "\n" in report.format() and not report.clean else "")
    if report.clean and not args.keep_logs:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"chaos: node directories and logs kept under {base}")
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if report.clean or args.unclean else 1


if __name__ == "__main__":
    sys.exit(main())
