"""Install uv's program from its wheel: unpack_uv.py WHEEL DEST -> DEST/bin/uv.

A wheel is a zip; uv's wheel carries the static `uv` binary as <name>.data/scripts/uv and nothing
it needs at run time besides. The role checked the wheel's sha256 against the lock before this
runs, so unpacking it is what `pip install --require-hashes` would do, without building a venv
and its pip first (most of a fresh host's bootstrap). Stdlib only; the file appears whole or not
at all (written aside, then renamed).
"""
import os
import shutil
import sys
import zipfile


def main(wheel, dest):
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".data/scripts/uv")]
        if len(names) != 1:
            sys.exit(f"{wheel}: expected one .data/scripts/uv in the wheel, found {names or 'none'}")
        os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
        target = os.path.join(dest, "bin", "uv")
        with archive.open(names[0]) as src, open(target + ".part", "wb") as out:
            shutil.copyfileobj(src, out)
    os.chmod(target + ".part", 0o755)
    os.replace(target + ".part", target)


if __name__ == "__main__":
    main(*sys.argv[1:3])
