#!/usr/bin/env python3
"""What writing into the page cache costs on this machine.

Writes SIZE MiB into a new file in WRITE-byte `pwrite`s and prints the
system CPU time it took. With `--drop-behind`, it does what Strom's
`strom.log.page.cache.retain.bytes` does: every 16 MiB it starts writeback
of what it just wrote and writes out and drops from the page cache what
lies more than 64 MiB behind (`sync_file_range`, `posix_fadvise
(DONTNEED)`), so that later writes reuse the pages freed.

    scripts/page-cache-cost.py [--drop-behind] [--write-bytes N] SIZE_MIB FILE

On a virtual machine that reports free memory to its host, the first
write into a page the host has taken back faults it in from the host:
compare a run after the machine has been idle for a minute with one right
after deleting the previous run's file. Linux only. The file is removed
at the end.
"""

import argparse
import ctypes
import os
import time

SYNC_FILE_RANGE_WAIT_BEFORE = 1
SYNC_FILE_RANGE_WRITE = 2
SYNC_FILE_RANGE_WAIT_AFTER = 4
CHUNK = 16 << 20
RETAIN = 64 << 20

LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
LIBC.sync_file_range.argtypes = [
    ctypes.c_int,
    ctypes.c_longlong,
    ctypes.c_longlong,
    ctypes.c_uint,
]


def sync_file_range(fd, start, length, flags):
    if LIBC.sync_file_range(fd, start, length, flags) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("size_mib", type=int)
    parser.add_argument("file")
    parser.add_argument("--write-bytes", type=int, default=1 << 20)
    parser.add_argument("--drop-behind", action="store_true")
    args = parser.parse_args()

    total = args.size_mib << 20
    block = b"x" * args.write_bytes
    fd = os.open(args.file, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        before, started = os.times(), time.monotonic()
        position = 0
        next_chunk = CHUNK
        while position < total:
            os.pwrite(fd, block, position)
            position += len(block)
            if args.drop_behind and position >= next_chunk:
                chunk_start = next_chunk - CHUNK
                sync_file_range(fd, chunk_start, CHUNK, SYNC_FILE_RANGE_WRITE)
                if chunk_start >= RETAIN:
                    old = chunk_start - RETAIN
                    sync_file_range(
                        fd,
                        old,
                        CHUNK,
                        SYNC_FILE_RANGE_WAIT_BEFORE
                        | SYNC_FILE_RANGE_WRITE
                        | SYNC_FILE_RANGE_WAIT_AFTER,
                    )
                    os.posix_fadvise(fd, old, CHUNK, os.POSIX_FADV_DONTNEED)
                next_chunk += CHUNK
        after, ended = os.times(), time.monotonic()
    finally:
        os.close(fd)
        os.remove(args.file)
    mode = "drop-behind" if args.drop_behind else "plain"
    print(
        f"{mode}: {args.size_mib} MiB in {args.write_bytes}-byte writes: "
        f"system {after.system - before.system:.2f} s, "
        f"wall {ended - started:.2f} s"
    )


if __name__ == "__main__":
    main()
