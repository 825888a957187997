"""How a stage's process takes and gives back memory: Arrow's allocator and glibc's heap.

The pool-sized stages work through a long climb of short-lived blocks and copies. Two
allocators decide how much of what they free the process keeps: Arrow's memory pool
(mimalloc in pyarrow's wheels keeps much of it; jemalloc hands it back) and glibc's
``malloc``, which raises its mmap threshold after each large free (so later arrays of tens
of MiB come from the heap and stay there when freed). The measurements behind each choice
are in benchmarks/README.md ("The grades stage's current grades as positions", "The agreement
stage: intervals from per-query counts…", "The key stage's corpus streamed…").
"""

import contextlib
import ctypes

import pyarrow as pa

#: Allocations at least this large are mapped on their own (glibc's ``M_MMAP_THRESHOLD``).
MMAP_THRESHOLD = 1 << 20

#: mallopt's parameter number of the mmap threshold (glibc's malloc.h).
_M_MMAP_THRESHOLD = -3


@contextlib.contextmanager
def arrow_from_jemalloc():
    """Arrow's buffers from jemalloc inside the ``with`` block, the previous default pool
    put back afterwards; unchanged where pyarrow was built without jemalloc.

    Yields
    ------
    None
        Nothing: the switch is process-wide (``pyarrow.set_memory_pool``) for the block.

    Notes
    -----
    Raises nothing of its own; an exception inside the block passes through after the
    previous pool is put back. Buffers keep the pool they came from, so a table made before
    or after is unaffected.
    """
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without it
        yield
        return
    before = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        yield
    finally:
        pa.set_memory_pool(before)


def arrays_off_the_heap() -> bool:
    """Have glibc map every allocation of :data:`MMAP_THRESHOLD` bytes or more on its own,
    so a freed array's memory goes back to the system at once.

    Returns
    -------
    bool
        True when set; False (and nothing done) where the C library is not glibc.

    Notes
    -----
    glibc starts with a threshold of 128 KiB and raises it to the size of each mapped block
    freed (up to 32 MiB, ``mallopt(3)``): after a stage frees its first large arrays, the
    next ones of tens of MiB come from the heap, and what they leave there when freed stays
    in the process. A fixed threshold also stops that raising.
    """
    libc = _glibc()
    if libc is None:
        return False
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1


def hand_back() -> None:
    """Give the memory freed since the last call back to the system: Arrow's pool's unused
    pages, and (glibc only) every whole free page of the heap (``malloc_trim(0)``).

    A block's pandas and Arrow temporaries are many allocations below the mmap threshold;
    freed, they leave holes all through the heap that glibc hands back only at its top.
    """
    pa.default_memory_pool().release_unused()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.malloc_trim(0)


def _glibc():
    """The C library when it is glibc (ctypes), else None: the process's own symbols
    (``dlopen(NULL)``), so no search for the library's file runs (``find_library`` starts
    ``ldconfig``)."""
    try:
        libc = ctypes.CDLL(None)
        version = libc.gnu_get_libc_version
    except (OSError, AttributeError, TypeError):  # not glibc: its own allocator's rules
        return None
    version.restype = ctypes.c_char_p
    return libc if version() else None
