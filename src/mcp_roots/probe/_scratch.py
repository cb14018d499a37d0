"""The probe's scratch tree: one root to serve, canaries planted outside it, and the fingerprint that tells
whether anything outside changed. Everything the probe (or a server it tricks) can touch lies beneath one
temporary directory, removed on exit.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CANARY_PREFIX", "NAME_PREFIX", "Scratch"]

#: Every canary's content starts with this; the rest is a token drawn per run.
CANARY_PREFIX = "MCPROOTS-CANARY-"
#: Every outside directory holds an empty file named this plus a token: a listing that shows it escaped.
NAME_PREFIX = "MCPROOTS-NAME-"
LONG_NAME = "L" * 250 + ".txt"  # NAME_MAX is 255: the longest name a canary can have here
#: The declared root whose name, decoded twice, climbs one level ('sub%2F..' -> 'sub/..').
PERCENT_ROOT_NAME = "sub%2F.."
MAX_CANARY_BYTES = 4096

Fingerprint = dict[str, tuple[object, ...]]


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


@dataclass
class Scratch:
    """The scratch tree: ``base`` (scanned for changes), ``root`` (the root the server gets) and ``work`` (the
    probe's own files: the server's stderr), all under ``top``."""

    top: Path
    base: Path
    root: Path
    work: Path
    percent_root: Path
    tokens: dict[str, str] = field(default_factory=dict)  # canary path (relative to base) -> its content
    name_tokens: list[str] = field(default_factory=list)
    baseline: Fingerprint = field(default_factory=dict)
    inside_baseline: Fingerprint = field(default_factory=dict)

    @classmethod
    def create(cls, parent: str | None = None) -> Scratch:
        top = Path(tempfile.mkdtemp(prefix="mcp-roots-probe-", dir=parent)).resolve()
        base = top / "tree"
        scratch = cls(top, base, base / "root", top / "work", base / "pctroot" / PERCENT_ROOT_NAME)
        try:
            scratch.work.mkdir()
            scratch._plant()
        except BaseException:
            scratch.remove()
            raise
        return scratch

    # --- planting -----------------------------------------------------------------------------------

    def _canary(self, rel: str) -> None:
        token = CANARY_PREFIX + secrets.token_hex(8)
        path = self.base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(token + "\n")
        self.tokens[rel] = token

    def _name_canary(self, rel_dir: str) -> None:
        name = NAME_PREFIX + secrets.token_hex(8)
        directory = self.base / rel_dir
        directory.mkdir(parents=True, exist_ok=True)
        (directory / name).touch()
        self.name_tokens.append(name)

    def _plant(self) -> None:
        self.base.mkdir()
        self.root.mkdir()
        for rel in (
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
        ):
            self._canary(rel)
        self._plant_names_and_percent_root()
        self.plant_inside()
        self.baseline = self.fingerprint(self.base, skip=self.root)
        self.inside_baseline = self.fingerprint(self.root)

    def _plant_names_and_percent_root(self) -> None:
        """The name canaries (a canary's name in a listing is evidence too) and the percent-named root's
        sibling tree; used when planting and again when rebuilding the outside after a call changed it."""
        for rel_dir in NAME_CANARY_DIRS:
            self._name_canary(rel_dir)
        (self.base / "pctroot" / "sub").mkdir(exist_ok=True)
        self.percent_root.mkdir(exist_ok=True)
        (self.percent_root / "inner.txt").write_text("inside the percent-named root\n")

    def plant_inside(self) -> None:
        """(Re)build the root's contents; the root directory itself stays (a server may hold it open)."""
        for entry in os.scandir(self.root):
            remove_entry(Path(entry.path))
        r = self.root
        # The canary prefix inside: an edit tool's control (replace it) goes through.
        (r / "benign.txt").write_text(f"benign inside file {CANARY_PREFIX}\n")
        (r / "sub").mkdir()
        (r / "sub" / "inner.txt").write_text("inner inside file\n")
        os.symlink("../outside/secret.txt", r / "link-out")
        os.symlink("../outside", r / "dir-out")
        os.symlink("chain2", r / "chain1")
        os.symlink("chain3", r / "chain2")
        os.symlink("../outside/chain-secret.txt", r / "chain3")
        os.symlink("../outside/created-by-write.txt", r / "dangling")
        os.symlink("../outside/deep", r / "hop")
        os.symlink("/proc/self/root", r / "proc-link")
        with contextlib.suppress(OSError):  # another filesystem, or hard links refused: the row says so
            os.link(self.base / "outside" / "hardlink-secret.txt", r / "hardlink")
        os.mkfifo(r / "fifo")
        (r / "race" / "d").mkdir(parents=True)
        (r / "race" / "d" / "secret.txt").write_text("inside decoy\n")
        os.symlink("../../outside", r / "race" / "x")

    # --- judging ------------------------------------------------------------------------------------

    def fingerprint(self, top: Path, skip: Path | None = None) -> Fingerprint:
        """Every entry beneath ``top`` (never following a link, never opening a FIFO): kind, size, inode,
        mode, mtime, link target or content hash."""
        found: Fingerprint = {}
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            if skip is not None and Path(dirpath) == skip.parent:
                dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
            for name in [*dirnames, *filenames]:
                path = os.path.join(dirpath, name)
                with contextlib.suppress(FileNotFoundError):
                    found[os.path.relpath(path, top)] = _entry(path)
        return found

    def outside_changes(self) -> list[str]:
        """What differs outside the root from the planted state: created, changed or removed entries."""
        now = self.fingerprint(self.base, skip=self.root)
        changed = [f"created {p!r}" for p in now.keys() - self.baseline.keys()]
        changed += [f"removed {p!r}" for p in self.baseline.keys() - now.keys()]
        changed += [f"changed {p!r}" for p in now.keys() & self.baseline.keys() if now[p] != self.baseline[p]]
        return sorted(changed)

    def inside_changed(self) -> bool:
        return self.fingerprint(self.root) != self.inside_baseline

    def restore(self) -> None:
        """Put back the planted state after a call changed it (outside: rebuilt from scratch)."""
        if self.outside_changes():
            for entry in os.scandir(self.base):
                if Path(entry.path) != self.root:
                    remove_entry(Path(entry.path))
            tokens, self.tokens, self.name_tokens = self.tokens, {}, []
            for rel, token in tokens.items():
                path = self.base / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(token + "\n")
                self.tokens[rel] = token
            self._plant_names_and_percent_root()
            self.plant_inside()
            self.baseline = self.fingerprint(self.base, skip=self.root)
            self.inside_baseline = self.fingerprint(self.root)
        elif self.inside_changed():
            self.plant_inside()
            self.inside_baseline = self.fingerprint(self.root)

    def evidence_in(self, texts: list[str]) -> list[str]:
        """The canary tokens (content or name) that appear in ``texts``."""
        found = [rel for rel, token in self.tokens.items() if any(token in t for t in texts)]
        found += [f"name {n}" for n in self.name_tokens if any(n in t for t in texts)]
        return found

    def unblock_fifos(self) -> None:
        """Release a server blocked opening the FIFO (for reading or writing) by opening its other end."""
        fifo = self.root / "fifo"
        for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
            try:
                if not stat.S_ISFIFO(os.lstat(fifo).st_mode):
                    return
                fd = os.open(fifo, flags)
            except OSError as exc:
                if exc.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
                continue
            os.close(fd)

    def remove(self) -> None:
        """Delete the whole scratch tree; a FIFO or a read-only directory a server left does not stop it."""
        for dirpath, dirnames, _ in os.walk(self.top, followlinks=False):
            for name in dirnames:
                with contextlib.suppress(OSError):
                    path = os.path.join(dirpath, name)
                    if not os.path.islink(path):
                        os.chmod(path, 0o700)
        shutil.rmtree(self.top, ignore_errors=True)


def remove_entry(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _entry(path: str) -> tuple[object, ...]:
    st = os.lstat(path)
    kind = stat.S_IFMT(st.st_mode)
    detail: object = None
    if stat.S_ISLNK(st.st_mode):
        detail = os.readlink(path)
    elif stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            detail = hashlib.sha256(f.read(MAX_CANARY_BYTES + 1)).hexdigest()
    # Not the link count: replacing the root's hard link atomically changes it, and that is no escape.
    return (kind, st.st_size, st.st_ino, stat.S_IMODE(st.st_mode), st.st_mtime_ns, detail)
