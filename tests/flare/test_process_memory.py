"""Giving a site's freed heap back to the system: the trimmer's count on hand-worked cases, and the trim itself."""

import ctypes
import sys
import threading

import pytest

from lightyear.flare.process_memory import HeapTrimmer, release_free_memory


def counting_trimmer(after_bytes):
    trims = []
    return HeapTrimmer(after_bytes, trim=lambda: trims.append(True) or True), trims


def test_the_trimmer_trims_once_the_bytes_since_the_last_trim_reach_its_threshold():
    heap, trims = counting_trimmer(10)
    assert [heap.received(n) for n in (4, 4, 2, 9, 0, 1)] == [False, False, True, False, False, True]
    assert len(trims) == 2  # 4 + 4 + 2 = 10, then 9 + 0 + 1 = 10
    assert heap.received(-50) is False and heap.received(9) is False  # a negative count adds nothing
    assert heap.received(1) is True


def test_small_messages_at_any_rate_trim_in_proportion_to_the_bytes_they_carry():
    heap, trims = counting_trimmer(4 << 20)
    for _ in range(10_000):  # 10,000 messages of 100 bytes: under 1 MiB in all
        heap.received(100)
    assert trims == []


def test_concurrent_messages_are_each_counted_once():
    heap, trims = counting_trimmer(1000)
    threads = [threading.Thread(target=lambda: [heap.received(1) for _ in range(5000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(trims) == 40  # 8 x 5000 bytes


def resident_anonymous_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_trim_returns_freed_chunks_the_heap_keeps_between_live_ones():
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    chunk, count = 64 << 10, 800  # 50 MiB freed in chunks under glibc's mmap threshold, each between two kept ones
    blocks = []
    for _ in range(2 * count):
        blocks.append(libc.malloc(chunk))
        ctypes.memset(blocks[-1], 1, chunk)
    freed, kept = blocks[::2], blocks[1::2]
    for block in freed:
        libc.free(block)
    try:
        before = resident_anonymous_kib()
        assert release_free_memory()
        assert before - resident_anonymous_kib() > 0.8 * chunk * count / 1024
    finally:
        for block in kept:
            libc.free(block)
