"""Reads a pytest JUnit report for scripts/official-clients.sh and prints one line per
test that did not pass (`FAILED <id>: <message>` or `SKIPPED <id>: <reason>`), then the
counts as `counts passed=N failed=N skipped=N`.

With TRACE (the file conftest.py writes under QUEEN_HTTP_TRACE), each failure is followed
by the exchange that best shows it: the first the broker answered with a status of 400 or
more, else the last one that is not a cleanup DELETE.

Usage: python junit_summary.py REPORT.xml [TRACE]
"""

import sys
import xml.etree.ElementTree as ET


def exchanges(trace_path):
    """{test id: [(request line, answer line)]} from the trace file."""
    by_test, current, pending = {}, None, None
    try:
        lines = open(trace_path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return by_test
    for line in lines:
        if line.startswith("== "):
            current = line[3:]
            by_test.setdefault(current, [])
        elif line.startswith(">> "):
            pending = line[3:]
        elif line.startswith("<< ") and current is not None and pending is not None:
            by_test[current].append((pending, line[3:]))
            pending = None
    return by_test


def telling(pairs):
    for sent, answer in pairs:
        status = answer.split(" ", 1)[0]
        if status.isdigit() and int(status) >= 400:
            return sent, answer
    for sent, answer in reversed(pairs):
        if not sent.startswith("DELETE "):
            return sent, answer
    return None


def cut(text, n=400):
    return text if len(text) <= n else text[:n] + "..."


def first_line(text: str) -> str:
    text = (text or "").strip()
    return text.splitlines()[0][:300] if text else ""


def main(path: str, trace_path=None) -> int:
    trace = exchanges(trace_path) if trace_path else {}
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
            shown = telling(trace.get(name, []))
            if shown:
                print(f"    sent:     {cut(shown[0])}")
                print(f"    answered: {cut(shown[1])}")
        elif skip is not None:
            skipped += 1
            print(f"SKIPPED {name}: {first_line(skip.get('message') or skip.text)}")
        else:
            passed += 1
    print(f"counts passed={passed} failed={failed} skipped={skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
