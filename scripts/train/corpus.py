#!/usr/bin/env python3
"""The lab's training corpus: English text from the Debian package dict-gcide (GCIDE, the GNU
Collaborative International Dictionary of English: Webster's 1913 with later additions; GPL-2+ as the
package's copyright file says), split deterministically into train / validation / test.

  apt-get install dict-gcide         # /usr/share/dictd/gcide.dict.dz + gcide.index
  python3 scripts/train/corpus.py    # writes data/corpus/gcide/{train,validation,test}.txt + provenance.json

Every dictionary article (the index's (offset, length) pairs, each taken once, in file order; the
database's own 00-database-* entries left out) goes to one split by the SHA-256 of its text: the first
two bytes as a number modulo 1000 below 5 → test, below 10 → validation, else train (about 0.5%, 0.5%
and 99%). Articles are written as they are in the package, separated by one blank line. Tokens are the
UTF-8 bytes (scripts/train/common.py): no tokenizer to train or ship.

validation.txt and test.txt are committed (about 200 KB each); train.txt (about 39 MB) is not: this
script remakes it, and provenance.json holds every split's SHA-256 to check it against.
"""
import argparse
import base64
import gzip
import hashlib
import json
import os
import subprocess
import sys

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64_number(s):
    """dictd's index numbers: base 64 digits, most significant first."""
    n = 0
    for ch in s:
        n = n * 64 + B64.index(ch)
    return n


def split_of(article: bytes) -> str:
    h = hashlib.sha256(article).digest()
    bucket = int.from_bytes(h[:2], "big") % 1000
    return "test" if bucket < 5 else "validation" if bucket < 10 else "train"


def package_version(name):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"unavailable: {e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dict", default="/usr/share/dictd/gcide.dict.dz")
    ap.add_argument("--index", default="/usr/share/dictd/gcide.index")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "data", "corpus", "gcide"))
    args = ap.parse_args()
    for path in (args.dict, args.index):
        if not os.path.isfile(path):
            sys.exit(f"corpus: {path} not found: install the Debian package dict-gcide (apt-get install dict-gcide)")
    with gzip.open(args.dict, "rb") as f:  # dictzip is gzip with a random-access table in an extra field
        text = f.read()
    spans = set()
    with open(args.index, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0].startswith("00-database"):
                continue
            spans.add((b64_number(parts[1]), b64_number(parts[2])))
    out = {"train": [], "validation": [], "test": []}
    for off, length in sorted(spans):
        article = text[off:off + length].strip(b"\n")
        if article:
            out[split_of(article)].append(article)
    os.makedirs(args.out, exist_ok=True)
    prov = {"package": "dict-gcide", "package_version": package_version("dict-gcide"),
            "licence": "GPL-2+ (GCIDE; /usr/share/doc/dict-gcide/copyright)",
            "source_files": [args.dict, args.index],
            "source_sha256": hashlib.sha256(text).hexdigest(),
            "rule": "article → split by sha256(article)[0:2] (big-endian) % 1000: <5 test, <10 validation, else train",
            "splits": {}}
    for name, articles in out.items():
        data = b"\n\n".join(articles) + b"\n"
        path = os.path.join(args.out, name + ".txt")
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        prov["splits"][name] = {"articles": len(articles), "bytes": len(data),
                                "sha256": hashlib.sha256(data).hexdigest()}
        print(f"{name}: {len(articles)} articles, {len(data)} bytes → {path}")
    with open(os.path.join(args.out, "provenance.json"), "w") as f:
        json.dump(prov, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
