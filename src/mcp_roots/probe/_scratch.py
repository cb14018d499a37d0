"""The probe's scratch tree: one root to serve, canaries planted outside it.
And the fingerprint that tells whether anything outside changed.
"""

# The probe's scratch tree: one root to serve, canaries planted outside it, and the fingerprint that tells
# whether anything outside changed. Everything the probe (or a server it tricks) can touch lies beneath one
# temporary directory with a random name, removed on exit. The tree is planted, rebuilt, fingerprinted and
# removed through directory descriptors only (``_fdtree``): what the server plants there is never followed.

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ._fdtree import (
    Fingerprint,
    HostileTree,
    clear,
    fingerprint,
    make_dir,
    make_fifo,
    make_link,
    put_file,
    release_tree,
)
from ._gitrepo import plant_repo

__all__ = ["FULLWIDTH_ROOT", "TWIN_NFD", "HostileTree", "Scratch", "draw_names"]

LONG_NAME = "L" * 250 + ".txt"  # NAME_MAX is 255: the longest name a canary can have here
#: The declared root whose name, decoded twice, climbs one level ('sub%2F..' -> 'sub/..').
PERCENT_ROOT_NAME = "sub%2F.."
#: A declared root named with a composed letter (NFC), and its outside twin in decomposed form (NFD).
TWIN_NFC = "tw\u00efn"
TWIN_NFD = "twi\u0308n"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: The canaries: files outside the root whose content is a token drawn per run.
CANARIES = (
    "parent-secret.txt",
    "outside/secret.txt",
    "outside/chain-secret.txt",
    "outside/hardlink-secret.txt",
    "outside/deep/deep-secret.txt",
    f"outside/{LONG_NAME}",
    "outside/ctl\nsecret.txt",
    "root_evil/secret.txt",
    "ROOT/secret.txt",
    "\uff52\uff4f\uff4f\uff54/secret.txt",  # fullwidth 'root': NFKC folds it to 'root'
    "pctroot/pct-secret.txt",
    f"twins/{TWIN_NFD}/secret.txt",
)

#: The names of the tree as reports say them; each run plants them under random names of its own, so that
#: a server cannot recognise the probe's tree by its names ("pctroot/sub" and the twins keep theirs: their
#: spelling is the technique).
_LOGICAL = (
    "root", "outside", "secret.txt", "parent-secret.txt", "chain-secret.txt", "hardlink-secret.txt", "deep",
    "deep-secret.txt", "pctroot", "pct-secret.txt", "benign.txt", "inner-dir", "inner.txt", "link-out",
    "dir-out", "chain1", "chain2", "chain3", "dangling", "created-by-write.txt", "hop", "proc-link",
    "hardlink", "fifo", "race", "d", "x",
)  # fmt: skip
FULLWIDTH_ROOT = "\uff52\uff4f\uff4f\uff54"
#: The names planted in the root: one of them in an answer shows the tool acted on the root's files.
_INSIDE = ("benign.txt", "inner-dir", "link-out", "dir-out", "chain1", "hop", "race", "fifo")


def _word(length: int) -> str:
    return "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(length))


def draw_names() -> dict[str, str]:
    """A random name for each logical name (and the root's relatives: its sibling with a suffix, its upper
    case, its fullwidth form; the canary with a newline in its name)."""
    names: dict[str, str] = {}
    for logical in _LOGICAL:
        ext = ".txt" if logical.endswith(".txt") else ""
        word = _word(8) + ext
        while word in names.values():
            word = _word(8) + ext
        names[logical] = word
    root = names["root"]
    names["root_evil"] = f"{root}_{_word(4)}"
    names["ROOT"] = root.upper()
    names[FULLWIDTH_ROOT] = names["fullwidth"] = "".join(chr(ord(c) + 0xFEE0) for c in root)
    names["ctl\nsecret.txt"] = "ctl\n" + names["secret.txt"]
    return names


#: Where a canary is planted by its name alone (the fullwidth 'root' folds to 'root' under NFKC).
NAME_CANARY_DIRS = (
    ".",
    "outside",
    "outside/deep",
    "root_evil",
    "ROOT",
    "\uff52\uff4f\uff4f\uff54",
    "pctroot",
)


def _padded(head: str, size: int) -> str:
    """``head`` filled up to ``size`` bytes (ASCII): a stat of the file shows a size drawn for this run."""
    return head + "." * (size - len(head.encode()))


def _number_in(number: int, text: str) -> bool:
    """Whether ``number`` stands in ``text`` as a number of its own (not part of a longer one)."""
    return re.search(rf"(?<![\d.,]){number}(?![\d.,]?\d)", text) is not None


def _token() -> str:
    """A random word: canary contents and names carry no fixed text a server could recognise."""
    return "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4)) + secrets.token_hex(8)


@dataclass
class Scratch:
    """The scratch tree: ``base`` (scanned for changes), ``root`` (the root the server gets) and ``work`` (the
    probe's own files: the server's stderr), all under ``top``. ``marker``: a random word in the inside file
    (what an edit tool's control replaces)."""

    top: Path
    base: Path
    root: Path
    work: Path
    percent_root: Path
    twin_root: Path
    names: dict[str, str]
    marker: str = field(default_factory=_token)
    tokens: dict[str, str] = field(default_factory=dict)  # canary (logical path under base) -> its content
    sizes: dict[str, int] = field(
        default_factory=dict
    )  # canary -> its size in bytes, drawn (a stat shows it)
    inside_size: int = 0  # the inside file's size, drawn likewise
    name_tokens: list[str] = field(default_factory=list)
    baseline: Fingerprint = field(default_factory=dict)
    inside_baseline: Fingerprint = field(default_factory=dict)
    _base_fd: int = -1

    @classmethod
    def create(cls, parent: str | None = None) -> Scratch:
        top = Path(tempfile.mkdtemp(prefix="", dir=parent)).resolve()  # a fresh directory, a random name
        base = top / "tree"
        names = draw_names()
        pct, twin = base / names["pctroot"] / PERCENT_ROOT_NAME, base / "twins" / TWIN_NFC
        scratch = cls(top, base, base / names["root"], top / "work", pct, twin, names)
        try:
            os.mkdir(scratch.work, 0o700)
            os.mkdir(base, 0o755)
            scratch._base_fd = os.open(base, _DIR)
            scratch._plant()
        except BaseException:
            scratch.remove()
            raise
        return scratch

    # --- names ----------------------------------------------------------------------------------------

    def n(self, logical: str) -> str:
        """The name planted for ``logical`` this run (a name with none: itself)."""
        return self.names.get(logical, logical)

    def actual(self, rel: str) -> str:
        """A logical path (``outside/secret.txt``) as planted this run."""
        return "/".join(self.n(part) for part in rel.split("/"))

    def logical(self, rel: str) -> str:
        """A planted path as reports say it (names the probe did not plant stay as they are)."""
        back = {v: k for k, v in self.names.items() if k != "fullwidth"}
        return "/".join(back.get(part, part) for part in rel.split("/"))

    # --- planting -----------------------------------------------------------------------------------

    def _dir(self, rel: str) -> int:
        """A descriptor for the directory ``rel`` under base, made (afresh, where a link or a file stands
        in its place) as needed; never through a link."""
        fd = os.dup(self._base_fd)
        try:
            for part in [p for p in rel.split("/") if p and p != "."]:
                try:
                    new = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                        raise
                    new = make_dir(fd, part)
                os.close(fd)
                fd = new
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _put(self, rel: str, data: str) -> None:
        parent, _, name = self.actual(rel).rpartition("/")
        fd = self._dir(parent)
        try:
            put_file(fd, name, data.encode())
        finally:
            os.close(fd)

    def _plant(self) -> None:
        os.close(self._dir(self.n("root")))
        self.tokens = {rel: _token() for rel in CANARIES}
        drawn = secrets.SystemRandom().sample(range(10_000, 100_000), len(CANARIES) + 1)
        self.sizes = dict(zip(CANARIES, drawn, strict=False))
        self.inside_size = drawn[-1]
        self._plant_outside()

    def _plant_outside(self) -> None:
        """The canaries with their tokens, fresh name canaries (a canary's name in a listing is evidence too),
        the percent-named root's sibling tree, then the root's contents and both fingerprints."""
        for rel, token in self.tokens.items():
            self._put(rel, _padded(token + "\n", self.sizes[rel]))
        self.name_tokens = []
        for rel_dir in NAME_CANARY_DIRS:
            name = _token()
            self._put(f"{rel_dir}/{name}", "")
            self.name_tokens.append(name)
        os.close(self._dir(f"{self.n('pctroot')}/sub"))
        self._put(f"pctroot/{PERCENT_ROOT_NAME}/inner.txt", "inside the percent-named root\n")
        self._put(f"twins/{TWIN_NFC}/inner.txt", "inside the twin-named root\n")
        # A repository outside (a git tool that opens any repo_path shows its files, names and log).
        fd = self._dir(self.n("outside"))
        try:
            secret = self.tokens["outside/secret.txt"]
            content = _padded(f"{secret}\n", self.sizes["outside/secret.txt"]).encode()
            plant_repo(fd, {self.n("secret.txt"): content}, secret)
        finally:
            os.close(fd)
        self.plant_inside()
        self.baseline = fingerprint(self._base_fd, skip=self.n("root"))

    def plant_inside(self) -> None:
        """(Re)build the root's contents; the root directory itself stays (a server may hold it open)."""
        n = self.n
        fd = self._dir(n("root"))
        try:
            with os.scandir(fd) as entries:
                names = [e.name for e in entries]
            for name in names:
                clear(fd, name)
            benign = {
                n("benign.txt"): _padded(f"benign inside file {self.marker}\n", self.inside_size).encode()
            }
            put_file(fd, n("benign.txt"), benign[n("benign.txt")])
            sub = make_dir(fd, n("inner-dir"))
            try:
                put_file(sub, n("inner.txt"), b"inner inside file\n")
            finally:
                os.close(sub)
            for name, target in (
                ("link-out", "../outside/secret.txt"),
                ("dir-out", "../outside"),
                ("chain1", "chain2"),
                ("chain2", "chain3"),
                ("chain3", "../outside/chain-secret.txt"),
                ("dangling", "../outside/created-by-write.txt"),
                ("hop", "../outside/deep"),
            ):
                make_link(fd, n(name), self.actual(target))
            make_link(fd, n("proc-link"), "/proc/self/root")
            with contextlib.suppress(OSError):  # another filesystem, or hard links refused: the row says so
                source = self.actual("outside/hardlink-secret.txt")
                os.link(source, n("hardlink"), src_dir_fd=self._base_fd, dst_dir_fd=fd, follow_symlinks=False)
            make_fifo(fd, n("fifo"))
            race = make_dir(fd, n("race"))
            try:
                d = make_dir(race, n("d"))
                try:
                    put_file(d, n("secret.txt"), b"inside decoy\n")
                finally:
                    os.close(d)
                make_link(race, n("x"), self.actual("../../outside"))
            finally:
                os.close(race)
            plant_repo(fd, benign, self.marker)  # a repository too: git tools reach the root
            self.inside_baseline = fingerprint(fd)
        finally:
            os.close(fd)

    # --- judging ------------------------------------------------------------------------------------

    def outside_changes(self, *, declared: bool = False) -> list[str]:
        """What differs outside the root from the planted state: created, changed or removed entries.
        ``declared``: the other roots the probe declares (the percent-named and the twin-named one) count as
        inside: a change within them is no escape."""
        now = fingerprint(self._base_fd, skip=self.n("root"))
        said = self.logical
        changed = [("created", p) for p in now.keys() - self.baseline.keys()]
        changed += [("removed", p) for p in self.baseline.keys() - now.keys()]
        changed += [("changed", p) for p in now.keys() & self.baseline.keys() if now[p] != self.baseline[p]]
        if declared:
            changed = [(what, p) for what, p in changed if not self._in_declared(what, p)]
        return sorted(f"{what} {said(p)!r}" for what, p in changed)

    def _in_declared(self, what: str, rel: str) -> bool:
        """Whether a change at ``rel`` (under base) lies inside another declared root (the root itself
        only changed: its entries changed, not it)."""
        for root in (self.percent_root, self.twin_root):
            top = str(root.relative_to(self.base))
            if rel.startswith(top + "/") or (rel == top and what == "changed"):
                return True
        return False

    def inside_changed(self) -> bool:
        fd = self._dir(self.n("root"))
        try:
            return fingerprint(fd) != self.inside_baseline
        finally:
            os.close(fd)

    def restore(self) -> None:
        """Put back the planted state after a call changed it (outside: rebuilt from scratch), through
        descriptors only: a link the server swaps in meanwhile is removed, never written through."""
        if self.outside_changes():
            with os.scandir(self._base_fd) as entries:
                names = [e.name for e in entries if e.name != self.n("root")]
            for name in names:
                clear(self._base_fd, name)
            self._plant_outside()
        elif self.inside_changed():
            self.plant_inside()

    def shows_inside(self, texts: Iterable[str], value: str) -> bool:
        """Whether an answer shows the root's files (the inside file's marker, or a name planted inside), the
        argument's own value (and its last name) left out: an echo of what was sent shows nothing."""
        words = [self.marker, *(self.n(name) for name in _INSIDE)]
        echoes = [e for e in (value, value.rstrip("/").rpartition("/")[2]) if e]
        for text in texts:
            for echo in echoes:
                text = text.replace(echo, "")
            if any(word in text for word in words) or _number_in(self.inside_size, text):
                return True
        return False

    def evidence_in(self, texts: list[str]) -> list[str]:
        """The canary tokens (content or name) that appear in ``texts``."""
        found = [rel for rel, token in self.tokens.items() if any(token in t for t in texts)]
        found += [f"name {n}" for n in self.name_tokens if any(n in t for t in texts)]
        found += [
            f"size {rel}"
            for rel, size in self.sizes.items()
            if rel != "outside/hardlink-secret.txt"  # linked inside: a listing of the root shows it rightly
            and any(_number_in(size, t) for t in texts)
        ]
        return found

    def unblock_fifos(self) -> None:
        """Release a server blocked opening the FIFO (for reading or writing) by opening its other end (never
        through a link, never blocking)."""
        fifo = self.n("fifo")
        try:
            fd = self._dir(self.n("root"))
        except OSError:
            return
        try:
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                try:
                    if not stat.S_ISFIFO(os.stat(fifo, dir_fd=fd, follow_symlinks=False).st_mode):
                        return
                    end = os.open(fifo, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENXIO, errno.ENOENT, errno.ELOOP):
                        raise
                    continue
                os.close(end)
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Delete the whole scratch tree; a FIFO, a link or a read-only directory a server left does not stop
        it, and nothing is followed or chmodded through a link."""
        if self._base_fd >= 0:
            os.close(self._base_fd)
            self._base_fd = -1
        try:
            parent = os.open(self.top.parent, _DIR)
        except OSError:
            return
        try:
            release_tree(parent, self.top.name)
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(self.top.name, dir_fd=parent)
        finally:
            os.close(parent)
