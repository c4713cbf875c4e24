"""Giving a site's freed heap back to the system: when the trimmer trims, on hand-worked cases, and the trim itself."""

import ctypes
import sys
import threading

import pytest

from lightyear.flare.process_memory import HeapTrimmer, release_free_memory, resident_private_bytes


class FakeProcess:
    """A resident size the test sets, and a trim that frees ``freed`` bytes of it."""

    def __init__(self, resident=100, freed=0):
        self.resident, self.freed, self.trims = resident, freed, 0

    def trim(self):
        self.trims += 1
        self.resident -= self.freed
        return True


def trimmer(process, growth):
    return HeapTrimmer(growth, trim=process.trim, resident=lambda: process.resident)


def test_the_trimmer_trims_once_resident_memory_grew_by_its_threshold_since_the_last_trim():
    process = FakeProcess(resident=100, freed=15)
    heap = trimmer(process, 20)
    assert heap.check() is False  # the first check only takes the floor: 100
    process.resident = 119
    assert heap.check() is False and process.trims == 0  # grew 19 < 20
    process.resident = 120
    assert heap.check() is True and process.trims == 1  # grew 20: trimmed to 105, the new floor
    process.resident = 124
    assert heap.check() is False  # 19 above 105
    process.resident = 125
    assert heap.check() is True and process.trims == 2


def test_the_floor_follows_memory_down_between_trims():
    process = FakeProcess(resident=100)
    heap = trimmer(process, 20)
    heap.check()
    process.resident = 60  # a round's models released
    assert heap.check() is False
    process.resident = 79
    assert heap.check() is False and process.trims == 0  # 19 above the floor of 60, not 21 below 100
    process.resident = 80
    assert heap.check() is True


def test_messages_that_add_no_memory_trim_nothing_however_many():
    process = FakeProcess(resident=100)
    heap = trimmer(process, 20)
    for _ in range(10_000):
        heap.check()
    assert process.trims == 0


def test_concurrent_checks_trim_once_for_one_growth():
    process = FakeProcess(resident=100, freed=30)
    heap = trimmer(process, 20)
    heap.check()
    process.resident = 130
    threads = [threading.Thread(target=heap.check) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert process.trims == 1 and process.resident == 100


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
        before = resident_private_bytes()
        assert release_free_memory()
        assert before - resident_private_bytes() > 0.8 * chunk * count
    finally:
        for block in kept:
            libc.free(block)
