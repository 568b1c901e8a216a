"""The arithmetic of torch 2.13's CUDA caching allocator, for one simulated GPU.

From c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch; read at commit 001074d2, whose constants and
out-of-memory text the 2.x releases share):
* every request is rounded up to a multiple of kMinBlockSize = 512 bytes (round_size);
* requests up to kSmallSize = 1 MiB come from the small pool, carved from kSmallBuffer = 2 MiB segments;
  larger ones from the large pool: under kMinLargeAlloc = 10 MiB from kLargeBuffer = 20 MiB segments, from
  10 MiB up a segment of their own rounded up to kRoundLarge = 2 MiB (get_allocation_size);
* a request takes the smallest cached free block that fits (get_free_block, best fit); the rest of a block is
  split off when it is >= 512 bytes (small pool) or > 1 MiB (large pool) (should_split), and a freed block merges
  with its free neighbours in the same segment;
* when cudaMalloc of a new segment fails, the allocator frees cached segments that hold no tensor and retries
  (release_available_cached_blocks, then release_cached_blocks), and only then raises OutOfMemoryError with the
  message below; `empty_cache()` frees every such segment.
With PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF) expandable_segments:True, segments grow in pages of 2 MiB
(small pool) and 20 MiB (large pool) instead (Note [Expandable Segments]): modeled as segments of the request
rounded up to a page, split down to 512 bytes.

The card's free memory is what cudaMemGetInfo would say: its total, less the CUDA context, less what is reserved
(or, after set_per_process_memory_fraction, the fraction's allowance).
"""

from __future__ import annotations

import bisect
import itertools
import os

import torch

K_MIN_BLOCK = 512
K_SMALL_SIZE = 1 << 20
K_SMALL_BUFFER = 2 << 20
K_LARGE_BUFFER = 20 << 20
K_MIN_LARGE_ALLOC = 10 << 20
K_ROUND_LARGE = 2 << 20
POOLS = ("small_pool", "large_pool")
STAT_KEYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
             "active_bytes", "inactive_split_bytes", "requested_bytes")
_ORDER = itertools.count()
# the figures every malloc raises and every free lowers: a block, its bytes, an active block, its bytes, the bytes
# asked for. The active ones move with the allocated ones, always by the same amounts (a block is active exactly
# while it is allocated): one Stat object serves both names, so a malloc or free moves it once
_SAME_AS = {"active": "allocation", "active_bytes": "allocated_bytes"}


def round_size(size: int) -> int:
    """The block size for a request of `size` bytes (round_size)."""
    return K_MIN_BLOCK if size < K_MIN_BLOCK else -(-size // K_MIN_BLOCK) * K_MIN_BLOCK


def allocation_size(size: int, expandable: bool = False) -> int:
    """The segment cudaMalloc is asked for when no cached block fits (get_allocation_size)."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER if not expandable else -(-size // K_SMALL_BUFFER) * K_SMALL_BUFFER
    if expandable:
        return -(-size // K_LARGE_BUFFER) * K_LARGE_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


def alloc_conf_expandable() -> bool:
    """True when PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF asks for expandable_segments:True."""
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        for item in (os.environ.get(name) or "").split(","):
            key, _, value = item.partition(":")
            if key.strip() == "expandable_segments":
                return value.strip().lower() == "true"
    return False


def format_size(size: int) -> str:
    """Bytes as the allocator's messages print them (format_size: 2 decimals, binary units)."""
    if size <= 1024:
        return f"{size} bytes"
    if size <= 1048576:
        return f"{size / 1024.0:.2f} KiB"
    if size <= 1073741824:
        return f"{size / 1048576.0:.2f} MiB"
    return f"{size / 1073741824.0:.2f} GiB"


class Stat:
    """current / peak / allocated / freed, as c10's Stat.

    `freed` is not counted but derived: every change of `current` is an allocation (up) or a free (down), so
    freed = allocated - (current - base), `base` being `current` when the accumulated figures were last reset
    (reset_accumulated). A free then moves one figure, not two: malloc and free move a dozen Stats per tensor."""

    __slots__ = ("current", "peak", "allocated", "base")

    def __init__(self):
        self.current = self.peak = self.allocated = self.base = 0

    @property
    def freed(self) -> int:
        return self.allocated + self.base - self.current

    def up(self, amount: int) -> None:
        self.current += amount
        self.peak = max(self.peak, self.current)
        self.allocated += amount

    def down(self, amount: int) -> None:
        self.current -= amount

    def reset_accumulated(self) -> None:
        self.allocated, self.base = 0, self.current

    def as_dict(self) -> dict:
        return {"current": self.current, "peak": self.peak, "allocated": self.allocated, "freed": self.freed}


class Segment:
    """One cudaMalloc'd range, split into blocks (ordered by offset)."""

    __slots__ = ("size", "pool", "blocks")

    def __init__(self, size: int, pool: str):
        self.size, self.pool, self.blocks = size, pool, []


class Block:
    """A piece of a segment: allocated to a storage, or free in the pool's cache."""

    __slots__ = ("segment", "offset", "size", "allocated", "requested", "order")

    def __init__(self, segment: Segment, offset: int, size: int, order: int | None = None):
        self.segment, self.offset, self.size = segment, offset, size
        self.allocated, self.requested, self.order = False, 0, next(_ORDER) if order is None else order


class Allocator:
    """One device's caching allocator: segments, cached free blocks, the statistics torch.cuda reads."""

    def __init__(self, index: int, total: int, context: int, *, expandable: bool = False, fraction=None):
        self.index, self.total, self.context, self.expandable = index, total, context, expandable
        self.fraction = fraction or (lambda: 1.0)
        self.free_blocks = {pool: [] for pool in POOLS}  # sorted (size, order, block)
        self.segments: list[Segment] = []
        self.stats = {key: {pool: Stat() for pool in ("all", *POOLS)} for key in STAT_KEYS}
        for key, same in _SAME_AS.items():
            self.stats[key] = self.stats[same]
        # per pool, the Stats a malloc and a free move (all's and the pool's; looked up once, not per call): a
        # block (allocation, active), its bytes (allocated_bytes, active_bytes), the bytes asked for
        self._block_stats = {pool: tuple(self.stats[key][p] for key in ("allocation", "allocated_bytes",
                                                                      "requested_bytes") for p in ("all", pool))
                             for pool in POOLS}
        # ... and the (all, pool) pairs of inactive_split and inactive_split_bytes, which every split block's
        # caching and reuse move
        self._split_stats = {pool: ((self.stats["inactive_split"]["all"], self.stats["inactive_split"][pool]),
                                    (self.stats["inactive_split_bytes"]["all"],
                                     self.stats["inactive_split_bytes"][pool])) for pool in POOLS}
        self.counters = {"num_alloc_retries": 0, "num_ooms": 0, "num_sync_all_streams": 0, "num_device_alloc": 0,
                         "num_device_free": 0}

    # ------------------------------------------------------------------ figures
    def figure(self, key: str, pool: str = "all") -> int:
        return self.stats[key][pool].current

    @property
    def reserved(self) -> int:
        return self.figure("reserved_bytes")

    @property
    def allocated(self) -> int:
        return self.figure("allocated_bytes")

    def device_free(self) -> int:
        """What cudaMemGetInfo says is free on the card."""
        return max(0, self.total - self.context - self.reserved)

    def _stat(self, key: str, pool: str, amount: int) -> None:
        # Stat.up / Stat.down on the "all" figure and the pool's, written out: every simulated GPU tensor's malloc
        # and free comes here ten times
        per_pool = self.stats[key]
        for stat in (per_pool["all"], per_pool[pool]):
            if amount >= 0:
                stat.current += amount
                if stat.current > stat.peak:
                    stat.peak = stat.current
                stat.allocated += amount
            else:
                stat.current += amount  # Stat.down (freed follows)

    # ------------------------------------------------------------------ malloc / free
    def malloc(self, nbytes: int) -> Block:
        """Hand out a block for a request of nbytes, as DeviceCachingAllocator::malloc; OutOfMemoryError when
        the card cannot hold it."""
        size = K_MIN_BLOCK if nbytes < K_MIN_BLOCK else -(-nbytes // K_MIN_BLOCK) * K_MIN_BLOCK  # round_size
        pool = "small_pool" if size <= K_SMALL_SIZE else "large_pool"
        # the cached block that fits, its split and the rest cached, written out (every simulated GPU tensor comes
        # here, and a call apiece was a tenth of its accounting)
        free_blocks = self.free_blocks[pool]
        i = bisect.bisect_left(free_blocks, (size, -1))
        if i < len(free_blocks):  # the smallest cached block that fits
            block = free_blocks.pop(i)[2]
            cached = len(block.segment.blocks) > 1  # it counted as an inactive split block until now
        else:
            block = self._new_segment(pool, size, nbytes)
            cached = False
        remaining = block.size - size
        if remaining >= K_MIN_BLOCK if (pool == "small_pool" or self.expandable) else remaining > K_SMALL_SIZE:
            order = next(_ORDER)
            rest = Block(block.segment, block.offset + size, remaining, order)
            blocks = block.segment.blocks
            blocks.insert(blocks.index(block) + 1, rest)
            bisect.insort(free_blocks, (remaining, order, rest))
            (count, pool_count), (split_bytes, pool_split_bytes) = self._split_stats[pool]
            if cached:
                # _split_down of the block taken, then the rest's _stat("inactive_split", pool, 1) and its bytes:
                # one inactive split block out and one in (no new peak: the rest is smaller than the block)
                count.allocated += 1
                pool_count.allocated += 1
                split_bytes.current -= size
                split_bytes.allocated += remaining
                pool_split_bytes.current -= size
                pool_split_bytes.allocated += remaining
            else:  # the rest's _stat("inactive_split", pool, 1) and its bytes: a whole block split, not every malloc
                count.up(1)
                pool_count.up(1)
                split_bytes.up(remaining)
                pool_split_bytes.up(remaining)
            block.size = size
        elif cached:
            self._split_down(pool, block.size)
        block.allocated, block.requested = True, nbytes
        size = block.size
        # Stat.up of each, written out (every simulated GPU tensor comes here)
        count, pool_count, block_bytes, pool_nbytes, asked, pool_asked = self._block_stats[pool]
        count.current += 1
        if count.current > count.peak:
            count.peak = count.current
        count.allocated += 1
        pool_count.current += 1
        if pool_count.current > pool_count.peak:
            pool_count.peak = pool_count.current
        pool_count.allocated += 1
        block_bytes.current += size
        if block_bytes.current > block_bytes.peak:
            block_bytes.peak = block_bytes.current
        block_bytes.allocated += size
        pool_nbytes.current += size
        if pool_nbytes.current > pool_nbytes.peak:
            pool_nbytes.peak = pool_nbytes.current
        pool_nbytes.allocated += size
        asked.current += nbytes
        if asked.current > asked.peak:
            asked.peak = asked.current
        asked.allocated += nbytes
        pool_asked.current += nbytes
        if pool_asked.current > pool_asked.peak:
            pool_asked.peak = pool_asked.current
        pool_asked.allocated += nbytes
        return block

    def check(self, nbytes: int) -> None:
        """Raise now what malloc(nbytes) would raise (releasing cached segments first, as malloc does)."""
        size = K_MIN_BLOCK if nbytes < K_MIN_BLOCK else -(-nbytes // K_MIN_BLOCK) * K_MIN_BLOCK  # round_size
        blocks = self.free_blocks["small_pool" if size <= K_SMALL_SIZE else "large_pool"]
        if blocks and blocks[-1][0] >= size:  # a cached block fits (every move to a GPU asks)
            return
        alloc = allocation_size(size, self.expandable)
        if not self._room(alloc):
            self.counters["num_alloc_retries"] += 1
            self.release_cached()
            if not self._room(alloc):
                self._out_of_memory(alloc)

    def free(self, block: Block) -> None:
        """A storage died: its block goes back to the pool's cache, merged with free neighbours."""
        if not block.allocated:
            return
        segment = block.segment
        pool = segment.pool
        block.allocated = False
        size, requested = block.size, block.requested
        # Stat.down of each, written out (freed follows: Stat)
        count, pool_count, nbytes, pool_nbytes, asked, pool_asked = self._block_stats[pool]
        count.current -= 1
        pool_count.current -= 1
        nbytes.current -= size
        pool_nbytes.current -= size
        asked.current -= requested
        pool_asked.current -= requested
        # _merge and its _remove_free, written out: with its free neighbours in the segment
        blocks = segment.blocks
        free_blocks = self.free_blocks[pool]
        i = blocks.index(block)
        (count, pool_count), (split_bytes, pool_split_bytes) = self._split_stats[pool]
        after = i + 1
        if after < len(blocks) and not blocks[after].allocated:
            other = blocks[after]
            k = bisect.bisect_left(free_blocks, (other.size, other.order))
            if k < len(free_blocks) and free_blocks[k][2] is other:
                del free_blocks[k]
                # _split_down, written out (the segment holds both blocks still)
                count.current -= 1
                pool_count.current -= 1
                split_bytes.current -= other.size
                pool_split_bytes.current -= other.size
            block.size += other.size
            del blocks[after]
        if i and not blocks[i - 1].allocated:
            other = blocks[i - 1]
            k = bisect.bisect_left(free_blocks, (other.size, other.order))
            if k < len(free_blocks) and free_blocks[k][2] is other:
                del free_blocks[k]
                count.current -= 1
                pool_count.current -= 1
                split_bytes.current -= other.size
                pool_split_bytes.current -= other.size
            other.size += block.size
            del blocks[i]
            block = other
        # into the pool's cache (as the order it was cached in breaks ties of size)
        order = block.order = next(_ORDER)
        size = block.size
        bisect.insort(free_blocks, (size, order, block))
        if len(blocks) > 1:  # _stat("inactive_split", pool, 1) and its bytes
            count.current += 1
            if count.current > count.peak:
                count.peak = count.current
            count.allocated += 1
            pool_count.current += 1
            if pool_count.current > pool_count.peak:
                pool_count.peak = pool_count.current
            pool_count.allocated += 1
            split_bytes.current += size
            if split_bytes.current > split_bytes.peak:
                split_bytes.peak = split_bytes.current
            split_bytes.allocated += size
            pool_split_bytes.current += size
            if pool_split_bytes.current > pool_split_bytes.peak:
                pool_split_bytes.peak = pool_split_bytes.current
            pool_split_bytes.allocated += size

    def release_cached(self) -> None:
        """Give every segment that holds no tensor back to the card (release_cached_blocks, empty_cache)."""
        for segment in list(self.segments):
            if len(segment.blocks) == 1 and not segment.blocks[0].allocated:
                self._remove_free(segment.blocks[0])
                self.segments.remove(segment)
                self._stat("segment", segment.pool, -1)
                self._stat("reserved_bytes", segment.pool, -segment.size)
                self.counters["num_device_free"] += 1

    # ------------------------------------------------------------------ the pieces
    def _room(self, alloc: int) -> bool:
        allowed = self.total if self.fraction() >= 1.0 else int(self.fraction() * self.total)
        if self.fraction() < 1.0 and self.reserved + alloc > allowed:
            return False
        return alloc <= self.device_free()

    def _new_segment(self, pool: str, size: int, nbytes: int) -> Block:
        alloc = allocation_size(size, self.expandable)
        if not self._room(alloc):
            self.counters["num_alloc_retries"] += 1
            self.release_cached()
            if not self._room(alloc):
                self._out_of_memory(alloc)
        segment = Segment(alloc, pool)
        block = Block(segment, 0, alloc)
        segment.blocks.append(block)
        self.segments.append(segment)
        self._stat("segment", pool, 1)
        self._stat("reserved_bytes", pool, alloc)
        self.counters["num_device_alloc"] += 1
        return block

    def _remove_free(self, block: Block) -> None:
        pool = block.segment.pool
        blocks = self.free_blocks[pool]
        i = bisect.bisect_left(blocks, (block.size, block.order))
        if i < len(blocks) and blocks[i][2] is block:
            blocks.pop(i)
            if len(block.segment.blocks) > 1:
                self._split_down(pool, block.size)

    def _split_down(self, pool: str, amount: int) -> None:
        """_stat("inactive_split", pool, -1) and _stat("inactive_split_bytes", pool, -amount), written out (freed
        follows: Stat)."""
        (count, pool_count), (nbytes, pool_nbytes) = self._split_stats[pool]
        count.current -= 1
        pool_count.current -= 1
        nbytes.current -= amount
        pool_nbytes.current -= amount

    def _out_of_memory(self, alloc: int):
        """Raise torch.OutOfMemoryError with the caching allocator's own message (DeviceCachingAllocator::malloc)."""
        self.counters["num_ooms"] += 1
        free = self.device_free()
        allowed = ""
        if self.fraction() < 1.0:
            allowed = format_size(int(self.fraction() * self.total)) + " allowed; "
        raise torch.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {format_size(alloc)}. GPU {self.index} has a total capacity of "
            f"{format_size(self.total)} of which {format_size(free)} is free. Including non-PyTorch memory, this "
            f"process has {format_size(self.total - free)} memory in use. {allowed}Of the allocated memory "
            f"{format_size(self.allocated)} is allocated by PyTorch, and {format_size(self.reserved - self.allocated)}"
            " is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
            "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")

    # ------------------------------------------------------------------ torch.cuda.memory_stats()
    def reset_peaks(self) -> None:
        for per_pool in self.stats.values():
            for stat in per_pool.values():
                stat.peak = stat.current

    def reset_accumulated(self) -> None:
        for per_pool in self.stats.values():
            for stat in per_pool.values():
                stat.reset_accumulated()
        for key in self.counters:
            self.counters[key] = 0

    def nested(self) -> dict:
        """The nested dict torch._C._cuda_memoryStats returns (what memory_stats() and memory_summary() read)."""
        out = {key: {pool: stat.as_dict() for pool, stat in per_pool.items()} for key, per_pool in self.stats.items()}
        zero = Stat().as_dict()
        out.update(oversize_allocations=zero, oversize_segments=zero, max_split_size=-1, **self.counters)
        return out
