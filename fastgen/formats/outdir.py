"""Output folders: what fastgen may write into, where a run stages its files, and how the staged files take their place.

A run writes every output folder (the traces, the configs) into a fresh staging folder on that folder's own
filesystem, marked as fastgen's own: beside it when its parent is on the same device and writable, inside it
otherwise (a mount point: a Docker volume, a PVC, /mnt/nvme). Nothing touches the outputs until every staging
folder is complete; then `place_all` puts them in place together, with Ctrl-C and SIGTERM held back, and undoes what
it did if any step fails. A failed or interrupted run leaves every output as it was.

fastgen never deletes a file it did not write: a folder with files its manifest does not list is refused; with
--force those files stay, only the files the previous manifest lists are replaced, and any other file in the way is
refused. With `protect_edits` (the configs), a listed file whose bytes differ from the manifest's record is a user's
edit and counts as not fastgen's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import OutputError
from ..interrupts import signals_held
from .manifest import MANIFEST_NAME, listed_record, read_manifest, record

__all__ = ["Staging", "open_staging", "discard", "place_all", "STAGING_MARK"]

STAGING_MARK = ".fastgen-staging"
_INSIDE_PREFIX = ".fastgen-"  # staging and trash folders made inside an output that cannot be staged beside


@dataclass(frozen=True)
class Staging:
    """A staging folder and the output folder it becomes."""

    out: Path
    folder: Path
    force: bool = False
    protect_edits: bool = False

    @property
    def inside(self) -> bool:
        return self.folder.parent == self.out


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _is_marked(folder: Path) -> bool:
    return (folder / STAGING_MARK).is_file()


def _listed(out: Path, protect_edits: bool) -> set[str]:
    """The paths under out that fastgen wrote (its manifest's files and the manifest); empty if not a fastgen output."""
    try:
        files = read_manifest(out)["files"]
    except OutputError:
        return set()  # not a fastgen output: everything in it is foreign, even empty folders
    if protect_edits:
        files = {rel: entry for rel, entry in files.items() if _unchanged(out / rel, rel, entry, out)}
    return set(files) | {MANIFEST_NAME}


def _unchanged(path: Path, rel: str, entry: dict, out: Path) -> bool:
    try:
        return record(rel, path.read_bytes()) == listed_record(rel, entry, out / MANIFEST_NAME)
    except (OSError, OutputError):
        return False


def _entries(out: Path) -> list[str]:
    """Every file and folder under out, relative, without fastgen's own staging folders."""
    found = []
    for top, dirs, files in os.walk(out):
        here = Path(top)
        dirs[:] = sorted(d for d in dirs if not (here == out and d.startswith(_INSIDE_PREFIX) and _is_marked(here / d)))
        found += [(here / name).relative_to(out).as_posix() for name in [*dirs, *sorted(files)]]
    return sorted(found)


def _foreign(out: Path, protect_edits: bool) -> list[str]:
    """What under out fastgen did not write: unlisted files, links, and folders that hold no listed file."""
    listed = _listed(out, protect_edits)
    holders = {parent.as_posix() for rel in listed for parent in PurePosixPath(rel).parents}
    return [
        rel
        for rel in _entries(out)
        if rel not in listed and not (rel in holders and (out / rel).is_dir() and not (out / rel).is_symlink())
    ]


def _what(protect_edits: bool) -> str:
    return "config folder" if protect_edits else "output folder"


def _check(out: Path, *, force: bool, protect_edits: bool, option: str, planned: tuple[str, ...]) -> None:
    for above in (out, *out.parents):
        if above.exists() and not above.is_dir():
            where = "exists and is not a folder" if above == out else f"is under {above}, which is a file"
            raise OutputError(f"{out} {where}; choose another {option}")
    if not out.is_dir():
        return
    foreign = _foreign(out, protect_edits)
    kind = (
        "a file fastgen did not write, or one edited since fastgen wrote it"
        if protect_edits
        else "files fastgen did not write"
    )
    if foreign and not force:
        raise OutputError(
            f"{_what(protect_edits)} {out} holds {kind} (e.g. {foreign[0]}); move them out, choose an "
            f"empty {option}, or pass --force to write beside them"
        )
    # --force writes beside such files, never over them (nor where a folder of them goes): say so before generating
    folders = {parent.as_posix() for rel in planned for parent in PurePosixPath(rel).parents} - {"."}
    clash = sorted(rel for rel in foreign if rel in planned or (rel in folders and not (out / rel).is_dir()))
    if clash:
        raise OutputError(f"{out / clash[0]} is not fastgen's and would be overwritten; move it out of {out}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _marked_folder(parent: Path, prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    folder.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the dataset should not be
    (folder / STAGING_MARK).touch()
    return folder


def _stage_beside(out: Path) -> bool:
    """Beside out when a rename can swap it (same device, writable parent); inside it otherwise (a mount point)."""
    if not out.exists():
        return True
    parent = out.parent
    return os.stat(out).st_dev == os.stat(parent).st_dev and os.access(parent, os.W_OK | os.X_OK)


def _remove_stale(out: Path) -> None:
    """What killed runs left: only folders fastgen made and marked as its own."""
    stale = list(out.parent.glob(f".{out.name}.fastgen-*"))
    if out.is_dir():
        stale += out.glob(f"{_INSIDE_PREFIX}*")
    for folder in stale:
        if folder.is_dir() and _is_marked(folder):
            shutil.rmtree(folder, ignore_errors=True)


def open_staging(
    out: Path,
    *,
    force: bool = False,
    protect_edits: bool = False,
    option: str = "--output-dir",
    planned: tuple[str, ...] = (),
) -> Staging:
    """Check that out may be written (refusing foreign files unless force, and with force a foreign file among the
    `planned` relative paths) and make its staging folder, so a run that cannot write fails before it generates
    anything. `option` names the flag in messages."""
    # "." or ".." has no name to put a staging folder beside; a symlink is written through, to the folder it names
    out = Path(os.path.realpath(out))
    _check(out, force=force, protect_edits=protect_edits, option=option, planned=planned)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(out)
        if _stage_beside(out):
            folder = _marked_folder(out.parent, f".{out.name}.fastgen-")
        else:
            folder = _marked_folder(out, f"{_INSIDE_PREFIX}staging-")
    except OSError as exc:
        where = out if out.is_dir() else out.parent
        raise OutputError(f"cannot write into {where} ({_why(exc)}); choose a writable {option}") from exc
    return Staging(out, folder, force=force, protect_edits=protect_edits)


def discard(staging: Staging) -> None:
    shutil.rmtree(staging.folder, ignore_errors=True)


class _Journal:
    """Renames done so far, so that a failed placement can be undone in reverse order."""

    def __init__(self) -> None:
        self.moves: list[tuple[Path, Path]] = []
        self.made: list[Path] = []  # folders created for moved files
        self.temporary: list[Path] = []  # trash and emptied staging folders, removed at the end either way
        self.after: list = []  # callables run once every output is in place

    def move(self, src: Path, dst: Path) -> None:
        missing = [p for p in (dst.parent, *dst.parent.parents) if not p.exists()]
        dst.parent.mkdir(parents=True, exist_ok=True)
        self.made += reversed(missing)
        os.replace(src, dst)
        self.moves.append((src, dst))

    def undo(self) -> bool:
        """Put everything back; False if some rename could not be undone."""
        failed = False
        for src, dst in reversed(self.moves):
            try:
                os.replace(dst, src)
            except OSError:
                failed = True  # best effort: the rest still goes back
        for folder in reversed(self.made):
            try:
                folder.rmdir()
            except OSError:
                pass
        if failed:  # a trash folder may still hold a previous file: keep it, unmarked, so no later run removes it
            for folder in self.temporary:
                (folder / STAGING_MARK).unlink(missing_ok=True)
        else:
            self._remove_temporary()
        return not failed

    def finish(self) -> None:
        for step in self.after:
            step()
        self._remove_temporary()

    def _remove_temporary(self) -> None:
        for folder in self.temporary:
            shutil.rmtree(folder, ignore_errors=True)


def place_all(stagings: list[Staging]) -> None:
    """Put every finished staging folder in place of its output, all or none."""
    journal = _Journal()
    with signals_held():
        try:
            for staging in stagings:
                _place(staging, journal)
        except OSError as exc:
            if journal.undo():
                raise OutputError(
                    f"putting the new files in place failed ({_why(exc)}); every output was left as it was"
                ) from exc
            kept = ", ".join(str(f) for f in journal.temporary if f.exists())
            raise OutputError(
                f"putting the new files in place failed ({_why(exc)}) and could not be undone; the "
                f"previous files that are not back in place are in {kept}"
            ) from exc
        except BaseException:
            journal.undo()
            raise
    journal.finish()


def _place(staging: Staging, journal: _Journal) -> None:
    """A new folder is renamed into place; a previous fastgen output beside which the staging folder sits is swapped
    out whole; anything else (an empty folder, maybe the working directory; foreign files kept by --force; a mount
    point) is merged file by file."""
    out, folder = staging.out, staging.folder
    if not out.exists():
        (folder / STAGING_MARK).unlink()
        journal.move(folder, out)
    elif not staging.inside and any(out.iterdir()) and not _foreign(out, staging.protect_edits):
        _swap(staging, journal)
    else:
        _merge(staging, journal)


def _swap(staging: Staging, journal: _Journal) -> None:
    out = staging.out
    old = _marked_folder(out.parent, f".{out.name}.fastgen-old-")
    journal.temporary.append(old)
    (staging.folder / STAGING_MARK).unlink()
    journal.move(out, old / "previous")
    journal.move(staging.folder, out)


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _merge(staging: Staging, journal: _Journal) -> None:
    """Move what the previous manifest lists out of the way, then the new files in, the manifest last."""
    out, folder = staging.out, staging.folder
    listed = _listed(out, staging.protect_edits)
    new = sorted(
        rel for rel in _entries(folder) if (folder / rel).is_file() and rel not in (STAGING_MARK, MANIFEST_NAME)
    )
    clash = [
        rel
        for rel in [*new, MANIFEST_NAME]
        if (out / rel).exists() and rel not in listed and not _same_bytes(out / rel, folder / rel)
    ]
    if clash:
        raise OutputError(f"{out / clash[0]} is not fastgen's and would be overwritten; move it out of {out}")
    trash = _marked_folder(
        out if staging.inside else out.parent,
        f"{_INSIDE_PREFIX}old-" if staging.inside else f".{out.name}.fastgen-old-",
    )
    journal.temporary += [trash, folder]
    old = sorted(rel for rel in listed if (out / rel).is_file())
    for rel in old:
        journal.move(out / rel, trash / rel)
    for rel in [*new, MANIFEST_NAME]:
        if (out / rel).exists():  # a foreign file with the same bytes (checked above)
            journal.move(out / rel, trash / "same" / rel)
        journal.move(folder / rel, out / rel)
    journal.after.append(lambda: _remove_emptied(out, old))


def _remove_emptied(out: Path, removed: list[str]) -> None:
    """Folders of the previous output that its files' removal left empty (never out itself)."""
    folders = {parent for rel in removed for parent in (out / rel).parents if parent != out and out in parent.parents}
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()
        except OSError:
            pass  # not empty: it holds new files or foreign ones
