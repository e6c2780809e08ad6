"""glibc's allocator set for a batch run that makes and drops whole-take arrays over and over.

An offline run makes arrays of a whole take again and again (7200 frames x 23 segments of 3 x 3 rotations:
12 MB, and their temporaries). glibc serves each from fresh ``mmap`` pages, or from the heap's top, which it
gives back to the kernel when it is freed (``M_TRIM_THRESHOLD``); the next array of that size then faults
its pages in again, each zeroed by the kernel. On the 60 s take on G1 that was 59 000 page faults and ~4 %
of the process's CPU time in the kernel (``perf record -e cpu-clock``), 1.5 % in ``clear_page`` alone.

:func:`keep_freed_memory` keeps freed memory in the process: arrays up to :data:`MMAP_THRESHOLD` come from
the heap, and the heap is never trimmed. The same run then takes 35 000 faults and ~2 % kernel time,
for ~12 MB more peak memory (the heap's largest free gap stays mapped). Both settings must be set together:
setting either one turns off glibc's own sliding mmap threshold (``mallopt(3)``), and the trim threshold
alone made 234 000 faults. Only for a process that ends after its run (``dynik-retarget``), not for a node.

:func:`rare_collections`: Python's cyclic garbage collector runs less often during the run. With its
default thresholds a 60 s TALOS take made ~170 young-generation collections and ~15 of the middle one during
``main``, 37 ms CPU in all (``gc.callbacks``) for the few thousand objects in cycles such a run leaves; at
:data:`GC_THRESHOLD` 3 ms. Nothing a run computes depends on when garbage is collected.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

M_TRIM_THRESHOLD = -1  # malloc.h's parameter numbers for mallopt
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # the ceiling of glibc's own sliding threshold (64-bit)
NEVER_TRIM = 2**31 - 1  # mallopt takes an int: the largest one
# gc.set_threshold's: a young collection every 50 000 container allocations (default 700), the middle
# generation every 20 of those, the oldest every 100 of the middle's (defaults 10 and 10)
GC_THRESHOLD = (50_000, 20, 100)


def keep_freed_memory() -> bool:
    """Ask glibc (Linux) to keep freed memory for the rest of the process (module docstring); ``True``
    when glibc accepted both settings, ``False`` elsewhere (another libc, another OS: nothing changes)."""
    if not sys.platform.startswith("linux"):
        return False
    mallopt = libc_mallopt()
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))


def libc_mallopt() -> Any:
    """libc's ``mallopt`` read among the process's own symbols (``dlopen(NULL)``), or ``None`` (a libc without
    it: musl). The function ``ctypes.util.find_library("c")``'s libc has, without that module's 9 ms of
    imports (``subprocess``, for its ``ldconfig`` and ``gcc`` fallbacks; ``test_batch_memory``)."""
    try:
        return ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return None


@contextmanager
def rare_collections() -> Iterator[None]:
    """The cyclic garbage collector at :data:`GC_THRESHOLD` inside the block, as it was again after it (module
    docstring; a caller in the same process, a test, keeps its own)."""
    previous = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
