"""Bag integrity benchmark: conversion throughput with MCAP CRC checks on vs off, side by side.

Writes ``--bags`` synthetic episode bags (the test factory, ``r2s2r_testing.bags``: two 64x48
cameras at 30 Hz, joint states at 100 Hz, ``--duration-s`` each) twice: with CRCs, as the
recorder writes them now, and without (CRC 0, as before: rosbags' reader then checks nothing).
Then converts both sets to a dataset ``--repeats`` times, interleaved: on = the bags with CRCs,
every CRC checked before a bag is read (``open_reader``'s integrity check: chunks, data
section, summary) and each chunk's CRC again by rosbags' reader; off = the bags without CRCs
and no check. Each repeat converts both sets back to back (the order alternating). The cost
of the checks (goal <= 10 %) is measured in this process's CPU time, 1 - cpu_off/cpu_on over
the summed repeats (on a loaded machine wall time swings by more than the cost; frames/s by
wall time, median, are reported beside it). Also: the check alone (MB/s, and as a share of an
unchecked conversion's CPU time) and the CPU cost of writing the CRCs (ms per MB written).
Last line: one JSON object.

Usage: python bench/bench_bag_integrity.py [--bags 4] [--duration-s 10] [--repeats 5]
"""

from __future__ import annotations

import functools
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import benchlib


def write_bags(
    root: Path, count: int, duration_s: float, checksums: bool
) -> tuple[list[Path], float]:
    """Write ``count`` episode bags; return them and the CPU seconds spent writing."""
    from r2s2r_recorder.bag_format import EpisodeInfo
    from r2s2r_recorder.bag_writer import EpisodeBagWriter
    from r2s2r_testing.bags import EpisodeSpec, episode_messages

    messages = episode_messages(
        EpisodeSpec(duration_ns=int(duration_s * 1e9), outcome_message="success")
    )
    bags, spent = [], 0.0
    for index in range(count):
        bag = root / f"episode_{index:06d}"
        started = time.process_time()
        info = EpisodeInfo(episode_id=bag.name, object_type="cube", outcome="success")
        writer = EpisodeBagWriter(bag, info, checksums=checksums)
        for receive_ns, topic, msgtype, data in messages:
            writer.add_topic(topic, msgtype, "sensor_data" if "image" in topic else "default")
            writer.write(topic, data, receive_ns)
        writer.close()
        spent += time.process_time() - started
        bags.append(bag)
    return bags, spent


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--bags", type=int, default=4)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from r2s2r_recorder.bag_reading import check_bag_integrity
    from r2s2r_recorder.config import ConversionConfig

    from r2s2r_recorder import bag_converter, bag_reading, bag_to_dataset

    work = Path(tempfile.mkdtemp(prefix="bench_bag_integrity_"))
    write_cpu = {True: 0.0, False: 0.0}
    for round_ in range(2):  # the second round is the one kept: warm caches, both sets fresh
        on_bags, write_cpu[True] = write_bags(work / "on", args.bags, args.duration_s, True)
        off_bags, write_cpu[False] = write_bags(work / "off", args.bags, args.duration_s, False)
        if round_ == 0:
            shutil.rmtree(work / "on")
            shutil.rmtree(work / "off")
    megabytes = sum(next(b.glob("*.mcap")).stat().st_size for b in on_bags) / 1e6
    config = ConversionConfig(control_rate_hz=10.0)
    checked_open = bag_reading.open_reader
    unchecked_open = functools.partial(bag_reading.open_reader, verify=False)
    cpu = {True: 0.0, False: 0.0}
    fps: dict[bool, list[float]] = {True: [], False: []}

    def convert(checks: bool, run: int) -> None:
        bags = on_bags if checks else off_bags
        bag_converter.open_reader = checked_open if checks else unchecked_open  # type: ignore[assignment]
        out = work / f"ds_{'on' if checks else 'off'}_{run}.hdf5"
        wall, started = time.perf_counter(), time.process_time()
        summary = bag_to_dataset.convert_bags(bags, out, config)
        spent, wall = time.process_time() - started, time.perf_counter() - wall
        assert len(summary.converted) == len(bags), summary.format()
        if run >= 0:
            cpu[checks] += spent
            fps[checks].append(summary.frames / wall)

    convert(False, -1)  # warm-up: imports, page cache
    convert(True, -1)
    for run in range(args.repeats):
        for checks in (True, False) if run % 2 else (False, True):
            convert(checks, run)
    bag_converter.open_reader = checked_open  # type: ignore[assignment]
    cost = 100.0 * (1.0 - cpu[False] / cpu[True])

    started = time.process_time()
    for _ in range(args.repeats):
        for bag in on_bags:
            check_bag_integrity(bag)
    check_cpu = (time.process_time() - started) / args.repeats
    check_mb_s = megabytes / max(check_cpu, 1e-9)
    check_share = 100.0 * check_cpu / (cpu[False] / args.repeats)
    write_ms_per_mb = 1000.0 * (write_cpu[True] - write_cpu[False]) / megabytes

    print(
        f"{args.bags} bags x {args.duration_s:.0f} s ({megabytes:.1f} MB), {args.repeats} "
        f"interleaved repeats; CPU s on {cpu[True]:.3f}, off {cpu[False]:.3f}; frames/s (wall) "
        f"on {[round(f) for f in fps[True]]}, off {[round(f) for f in fps[False]]}"
    )
    benchlib.report(
        "bag_integrity",
        [
            benchlib.Figure(
                "conversion_crc_on",
                round(statistics.median(fps[True]), 1),
                "frames/s",
                None,
                "wall, median",
            ),
            benchlib.Figure(
                "conversion_crc_off",
                round(statistics.median(fps[False]), 1),
                "frames/s",
                None,
                "wall, median",
            ),
            benchlib.Figure("crc_check_cost", round(cost, 1), "%", "<= 10", "CPU time, 1 - off/on"),
            benchlib.Figure("integrity_check", round(check_mb_s, 1), "MB/s", None, "check alone"),
            benchlib.Figure(
                "check_share",
                round(check_share, 2),
                "%",
                None,
                "check alone / unchecked conversion, CPU",
            ),
            benchlib.Figure(
                "crc_write_cost",
                round(write_ms_per_mb, 2),
                "ms/MB",
                None,
                "CPU writing a bag with CRCs vs without",
            ),
        ],
        bags=args.bags,
        duration_s=args.duration_s,
        repeats=args.repeats,
    )


if __name__ == "__main__":
    main()
