#!/usr/bin/env python3
"""The defaults docs/ writes by hand agree with tdstored's own.

    defaults_test.py TDSTORED DOCS_DIR

tdstored --help renders every setting's default from the code (DaemonConfig).
The docs name defaults in prose and tables as "`--flag` (DEFAULT ..." or
"`--flag N` (default DEFAULT)". Each such mention is read, its leading value
parsed ("64 GiB", "16 Mi", "10000", "10 s" for a -ms setting, "`50%`",
"0: none") and
compared with --help's. A mention whose value this script cannot read fails
too, naming the place, so a new way of writing a default is not skipped
silently. Exit status 1, with every mismatch listed, if any disagrees.
"""
import re
import subprocess
import sys
from pathlib import Path

UNITS = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "Ki": 1 << 10, "Mi": 1 << 20,
         "Gi": 1 << 30}


def help_defaults(tdstored: str) -> dict:
    text = subprocess.run([tdstored, "--help"], capture_output=True, text=True,
                          check=True).stdout
    return {m.group(1): m.group(2)
            for m in re.finditer(r"^  --([a-z0-9-]+)\s+\(env \w+, default '([^']*)'\)", text,
                                 re.M)}


# "`--flag` (VALUE ...)", "`--flag N` (default VALUE ...)": a parenthesis
# right after a setting that starts with "default", a number or a quoted
# value states its default; any other (a remark) is not read.
MENTION = re.compile(r"`--([a-z0-9-]+)(?: [A-Z]+)?` \(((?:default )?[0-9`][^)]*)\)")


def parse(value: str, flag: str):
    """The mention's leading value as --help writes it, or None."""
    value = value.strip()
    if value.startswith("default "):
        value = value[len("default "):]
    m = re.match(r"`?([0-9]+(?:\.[0-9]+)?)`?\s*(KiB|MiB|GiB|Ki|Mi|Gi|ms|s)?\b", value)
    if m:
        unit = m.group(2) or ""
        if unit in ("s", "ms"):
            if not flag.endswith("-ms"):
                return None
            scale = 1000 if unit == "s" else 1
        else:
            scale = UNITS[unit]
        return str(int(float(m.group(1)) * scale))
    m = re.match(r"`([a-z0-9%]+)`", value)
    return m.group(1) if m else None


def main() -> int:
    tdstored, docs = sys.argv[1], Path(sys.argv[2])
    defaults = help_defaults(tdstored)
    if len(defaults) < 20:
        print(f"read only {len(defaults)} defaults from --help: its format changed?")
        return 1
    problems, checked = [], 0
    for doc in sorted(docs.glob("*.md")):
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for m in MENTION.finditer(line):
                flag, said = m.group(1), m.group(2)
                if flag not in defaults:
                    continue  # a CLI flag, or a setting without a default
                got = parse(said, flag)
                want = defaults[flag]
                if got is None:
                    problems.append(f"{doc.name}:{n}: --{flag}: cannot read '{said}'")
                elif got != want and not (want.endswith("%") and got == want.rstrip("%")):
                    problems.append(f"{doc.name}:{n}: --{flag} is documented as '{said}' "
                                    f"({got}), tdstored --help says '{want}'")
                else:
                    checked += 1
    for p in problems:
        print(p)
    print(f"{checked} documented defaults agree with tdstored --help; {len(problems)} do not")
    return 1 if problems or checked < 10 else 0


if __name__ == "__main__":
    sys.exit(main())
