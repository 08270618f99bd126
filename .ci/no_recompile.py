#!/usr/bin/env python3
"""After `cargo build --release`, `cargo test --release --no-run` must compile no dependency
again (issue 53): a dependency compiled twice means the two commands resolve different
features, and polars alone is ten minutes on two cores.

Usage: no_recompile.py BUILD_JSON TEST_JSON TEST_LOG, where BUILD_JSON and TEST_JSON are the
`--message-format=json` output of `cargo build --release` and of `cargo test --release --no-run
-v`, and TEST_LOG the latter's stderr. Two counts, both must be 0:

- `Compiling X` lines in the test build for X other than idemcalc: what the test build
  compiled (in CI, after `cargo bench --no-run` built the dev-dependencies with the same
  release settings, this is 0 unless something invalidated the release build);
- dependencies built by both commands whose artifacts differ (a second copy with other
  features or settings): unlike the first count, a warm target directory that already holds
  both copies does not hide these.
"""
import json
import re
import sys

SELF = "idemcalc"


def artifacts(path):
    """(package id, target name, kinds) -> {file names: features} of every dependency unit; one
    crate may be built twice within one command (for the host's build scripts and for the
    target), so each key holds every copy."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if msg.get("reason") != "compiler-artifact":
                continue
            name = msg["target"]["name"]
            pkg = msg["package_id"]
            if re.search(r"[/#]" + SELF + r"[@#:]", pkg) or name == SELF:
                continue
            key = (pkg, name, tuple(msg["target"]["kind"]))
            files = frozenset(msg.get("filenames") or [])
            out.setdefault(key, {})[files] = msg.get("features") or []
    return out


def main():
    build_json, test_json, test_log = sys.argv[1:4]
    with open(test_log, encoding="utf-8") as f:
        compiled = [
            m.group(1)
            for m in (re.match(r"^\s*Compiling (\S+) v", l) for l in f)
            if m and m.group(1) != SELF
        ]
    build, test = artifacts(build_json), artifacts(test_json)
    twice = [
        (key, list(build[key].values()), features)
        for key, copies in test.items()
        if key in build
        for files, features in copies.items()
        if files not in build[key]
    ]
    print(f"no-recompile: cargo test --release after cargo build --release compiled "
          f"{len(compiled)} dependency crates{': ' + ', '.join(compiled) if compiled else ''}")
    print(f"no-recompile: {len(twice)} dependencies built twice with different settings")
    for (pkg, name, _), fb, ft in twice:
        print(f"  {name} ({pkg}): build features {fb}, test features {ft}")
    return 1 if compiled or twice else 0


if __name__ == "__main__":
    sys.exit(main())
