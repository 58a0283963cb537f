"""The power-cut disk: a FUSE file system whose unsynced writes live only in its own memory.

It serves a backing directory. Every ``write`` and ``truncate`` goes into a cache of 4 KiB
pages per file, and reads see that cache over the backing file; ``fsync`` (or
``fdatasync``) of a file moves its cached pages into the backing file. Nothing else ever
reaches the backing directory's file contents, so the backing directory always holds each
file as it was at its last sync: what a disk holds after a power cut.

A cut is armed from standard input (``arm N PGID``: the N-th write, truncate, sync, create,
unlink or rename from now on does not happen; ``cut PGID``: now). At the cut the process
group PGID (the server) is SIGKILLed while the lock holds every other operation back, every
later operation fails with EIO, so nothing more becomes durable, and the line ``cut ...`` on
standard output tells the harness, which then SIGKILLs this process: the cached pages die
with it. ``-shm`` files (SQLite's shared memory, which SQLite never syncs
and rebuilds after a crash) are cached like any other file but do not count towards N.

Modelled: a write or truncate is lost unless its file was synced after it, per file, all of
a file's unsynced writes together. Not modelled: a subset of unsynced writes surviving
(reordering), a write torn inside a page, and directory entries (create, unlink, rename
reach the backing directory at once, as if every directory were synced at each change).

Run: ``python -m tests.powercut.cachefs BACKING MOUNTPOINT`` (root, or a user allowed to
mount FUSE); unmount with ``fusermount3 -u MOUNTPOINT`` after killing it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import mfusepy

PAGE = 4096
R = TypeVar("R")


class Pending:
    """One file's writes since its last sync: its size as written, and the pages touched.

    ``floor`` is the smallest size the file had since that sync: backing bytes past it were
    cut off by a truncate, so they read as zeros even where a later write extended it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.floor = size
        self.pages: dict[int, bytearray] = {}


class CacheFS(mfusepy.Operations):  # type: ignore[misc]
    """Pass-through to ``backing`` with file contents cached until their file is synced."""

    use_ns = True

    def __init__(self, backing: str, say: Callable[[str], None]) -> None:
        self.backing = os.path.realpath(backing)
        self.say = say
        self.mutex = threading.Lock()
        self.pending: dict[str, Pending] = {}
        self.countdown: int | None = None
        self.victim: int | None = None
        self.cut = False
        self.mutations = 0
        self.syncs = 0

    def init(self, path: str) -> None:
        self.say("ready")

    # -- the cut ---------------------------------------------------------------------------

    def arm(self, after: int, victim: int | None) -> None:
        """Cut at the ``after``-th mutation from now (at once for 0), SIGKILLing the process
        group ``victim`` at that instant, while every other operation waits on the lock."""
        with self.mutex:
            self.countdown, self.victim = after, victim
            if after <= 0 and not self.cut:
                self._cut_now()

    def _cut_now(self) -> None:
        self.cut = True
        if self.victim is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.victim, signal.SIGKILL)
        dirty = sum(len(p.pages) for p in self.pending.values())
        self.say(f"cut mutations={self.mutations} syncs={self.syncs} dirty_pages={dirty}")

    def _gate(self, path: str, mutation: bool) -> None:
        """Called under the lock before every operation: EIO from the cut on."""
        if self.cut:
            raise mfusepy.FuseOSError(errno.EIO)
        if not mutation or path.endswith("-shm"):
            return
        if self.countdown is not None:
            self.countdown -= 1
            if self.countdown <= 0:
                self._cut_now()
                raise mfusepy.FuseOSError(errno.EIO)
        self.mutations += 1

    def _op(
        self, path: str | None, mutation: bool, body: Callable[[], R], gone: R | None = None
    ) -> R:
        """``body`` under the lock and the cut's gate. ``path`` is None for a file unlinked
        while open (the kernel writes back its mapped pages): nobody can read it any more,
        so the answer is ``gone``, or ENOENT."""
        with self.mutex:
            if path is None:
                if self.cut or gone is None:
                    raise mfusepy.FuseOSError(errno.EIO if self.cut else errno.ENOENT)
                return gone
            self._gate(path, mutation)
            try:
                return body()
            except OSError as exc:
                raise mfusepy.FuseOSError(exc.errno or errno.EIO) from None

    def _real(self, path: str) -> str:
        return self.backing + path

    # -- cached contents -------------------------------------------------------------------

    def _pending(self, path: str) -> Pending:
        found = self.pending.get(path)
        if found is None:
            found = self.pending[path] = Pending(os.stat(self._real(path)).st_size)
        return found

    def _page(self, path: str, pending: Pending, index: int) -> bytearray:
        cached = pending.pages.get(index)
        if cached is not None:
            return cached
        fd = os.open(self._real(path), os.O_RDONLY)
        try:
            page = bytearray(os.pread(fd, PAGE, index * PAGE).ljust(PAGE, b"\0"))
        finally:
            os.close(fd)
        valid = pending.floor - index * PAGE
        if valid < PAGE:
            page[max(valid, 0) :] = bytes(PAGE - max(valid, 0))
        return page

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        def body() -> bytes:
            assert path is not None  # ``_op`` answers a None path itself
            pending = self.pending.get(path)
            if pending is None:
                fd = os.open(self._real(path), os.O_RDONLY)
                try:
                    return os.pread(fd, size, offset)
                finally:
                    os.close(fd)
            end = min(offset + size, pending.size)
            out = bytearray()
            pos = offset
            while pos < end:
                index, start = divmod(pos, PAGE)
                take = min(PAGE - start, end - pos)
                out += self._page(path, pending, index)[start : start + take]
                pos += take
            return bytes(out)

        return self._op(path, False, body, b"")

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        def body() -> int:
            assert path is not None  # ``_op`` answers a None path itself
            pending = self._pending(path)
            pos, view = offset, memoryview(data)
            while view:
                index, start = divmod(pos, PAGE)
                take = min(PAGE - start, len(view))
                page = self._page(path, pending, index)
                page[start : start + take] = view[:take]
                pending.pages[index] = page
                pos, view = pos + take, view[take:]
            pending.size = max(pending.size, offset + len(data))
            return len(data)

        return self._op(path, True, body, len(data))

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        def body() -> int:
            assert path is not None  # ``_op`` answers a None path itself
            pending = self._pending(path)
            pending.size = length
            pending.floor = min(pending.floor, length)
            for index in [i for i in pending.pages if i * PAGE >= length]:
                del pending.pages[index]
            index, start = divmod(length, PAGE)
            if start and index in pending.pages:
                pending.pages[index][start:] = bytes(PAGE - start)
            return 0

        return self._op(path, True, body, 0)

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        def body() -> int:
            assert path is not None  # ``_op`` answers a None path itself
            self.syncs += 1
            pending = self.pending.pop(path, None)
            if pending is None:
                return 0
            fd = os.open(self._real(path), os.O_RDWR)
            try:
                if pending.floor < os.fstat(fd).st_size:
                    os.ftruncate(fd, pending.floor)
                for index, page in sorted(pending.pages.items()):
                    keep = min(PAGE, pending.size - index * PAGE)
                    if keep > 0:
                        os.pwrite(fd, page[:keep], index * PAGE)
                os.ftruncate(fd, pending.size)
            finally:
                os.close(fd)
            return 0

        return self._op(path, True, body, 0)

    def flush(self, path: str | None, fh: int) -> int:
        return self._op(path, False, lambda: 0, 0)

    def release(self, path: str, fh: int) -> int:
        return 0

    # -- names and attributes (straight to the backing directory) ------------------------

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        def body() -> dict[str, Any]:
            assert path is not None  # ``_op`` answers a None path itself
            st = os.lstat(self._real(path))
            attrs: dict[str, Any] = {
                key: getattr(st, key)
                for key in (
                    "st_mode",
                    "st_nlink",
                    "st_uid",
                    "st_gid",
                    "st_size",
                    "st_atime_ns",
                    "st_mtime_ns",
                    "st_ctime_ns",
                )
            }
            attrs["st_atime"], attrs["st_mtime"], attrs["st_ctime"] = (
                attrs.pop("st_atime_ns"),
                attrs.pop("st_mtime_ns"),
                attrs.pop("st_ctime_ns"),
            )
            pending = self.pending.get(path)
            if pending is not None:
                attrs["st_size"] = pending.size
            return attrs

        return self._op(path, False, body)

    def readdir(self, path: str, fh: int) -> list[str]:
        return self._op(path, False, lambda: [".", "..", *os.listdir(self._real(path))])

    def access(self, path: str, amode: int) -> int:
        def body() -> int:
            if not os.access(self._real(path), amode):
                raise mfusepy.FuseOSError(errno.EACCES)
            return 0

        return self._op(path, False, body)

    def open(self, path: str, flags: int) -> int:
        return self._op(path, False, lambda: 0 if os.path.exists(self._real(path)) else _enoent())

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        def body() -> int:
            os.close(os.open(self._real(path), os.O_CREAT | os.O_WRONLY, mode))
            return 0

        return self._op(path, True, body)

    def unlink(self, path: str) -> int:
        def body() -> int:
            os.unlink(self._real(path))
            self.pending.pop(path, None)
            return 0

        return self._op(path, True, body)

    def rename(self, old: str, new: str) -> int:
        def body() -> int:
            os.rename(self._real(old), self._real(new))
            moved = self.pending.pop(old, None)
            self.pending.pop(new, None)
            if moved is not None:
                self.pending[new] = moved
            return 0

        return self._op(old, True, body)

    def mkdir(self, path: str, mode: int) -> int:
        def body() -> int:
            os.mkdir(self._real(path), mode)
            return 0

        return self._op(path, True, body)

    def rmdir(self, path: str) -> int:
        def body() -> int:
            os.rmdir(self._real(path))
            return 0

        return self._op(path, True, body)

    def chmod(self, path: str, mode: int) -> int:
        def body() -> int:
            os.chmod(self._real(path), mode)
            return 0

        return self._op(path, False, body)

    def chown(self, path: str, uid: int, gid: int) -> int:
        def body() -> int:
            os.chown(self._real(path), uid, gid)
            return 0

        return self._op(path, False, body)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        def body() -> int:
            if times is None:
                os.utime(self._real(path))
            else:
                os.utime(self._real(path), ns=times)
            return 0

        return self._op(path, False, body)

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        return self._op(path, False, lambda: 0)

    def statfs(self, path: str) -> dict[str, int]:
        def body() -> dict[str, int]:
            sv = os.statvfs(self._real(path))
            names = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files")
            return {name: getattr(sv, name) for name in (*names, "f_ffree", "f_namemax")}

        return self._op(path, False, body)


def _enoent() -> int:
    raise mfusepy.FuseOSError(errno.ENOENT)


def _control(fs: CacheFS) -> None:
    """Commands from the harness, one a line: ``arm N [PGID]``, ``cut [PGID]``."""
    for line in sys.stdin:
        words = line.split()
        victim = [int(w) for w in words[-1:] if w.isdigit()]
        if words[:1] == ["arm"]:
            fs.arm(int(words[1]), victim[0] if len(words) > 2 else None)
        elif words[:1] == ["cut"]:
            fs.arm(0, victim[0] if len(words) > 1 else None)


def main(argv: list[str]) -> None:
    backing, mountpoint = argv

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    fs = CacheFS(backing, say)
    threading.Thread(target=_control, args=(fs,), daemon=True).start()
    # kernel_cache: an open keeps the page cache, so the shared memory SQLite maps stays one
    # set of pages across processes; hard_remove: an unlinked name is gone at once
    mfusepy.FUSE(fs, mountpoint, foreground=True, kernel_cache=True, hard_remove=True)


if __name__ == "__main__":
    main(sys.argv[1:])
