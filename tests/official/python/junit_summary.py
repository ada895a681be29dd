"""Reads a pytest JUnit report for scripts/official-clients.sh and prints one line per
test that did not pass (`FAILED <id>: <message>` or `SKIPPED <id>: <reason>`), then the
counts as `counts passed=N failed=N skipped=N`.

Usage: python junit_summary.py REPORT.xml
"""

import sys
import xml.etree.ElementTree as ET


def first_line(text: str) -> str:
    text = (text or "").strip()
    return text.splitlines()[0][:300] if text else ""


def main(path: str) -> int:
    passed = failed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('file') or case.get('classname', '').replace('.', '/') + '.py'}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            failed += 1
            print(f"FAILED {name}: {first_line(bad.get('message') or bad.text)}")
        elif skip is not None:
            skipped += 1
            print(f"SKIPPED {name}: {first_line(skip.get('message') or skip.text)}")
        else:
            passed += 1
    print(f"counts passed={passed} failed={failed} skipped={skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
