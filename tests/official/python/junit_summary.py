"""Reads a pytest JUnit report for scripts/official-clients.sh and prints one line per
test that did not pass (`FAILED <id>: <message>` or `SKIPPED <id>: <reason>`), then the
counts as `counts passed=N failed=N skipped=N outside=N`.

With OUTSIDE (tests/official/python/outside.txt), a test of a feature the protocol does
not have that does not pass is printed as `OUTSIDE <id>: <reason>` and counted apart, not
as a failure.

With TRACE (the file conftest.py writes under QUEEN_HTTP_TRACE), each failure is followed
by the exchange that best shows it: the first the broker answered with a status of 400 or
more, else the last one that is not a cleanup DELETE.

Usage: python junit_summary.py REPORT.xml [TRACE [OUTSIDE]]
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


def outside_entries(path):
    """[(file or file::test, reason)] from outside.txt."""
    entries = []
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        return entries
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            id_, _, reason = line.partition(" ")
            entries.append((id_, reason.strip()))
    return entries


def outside_reason(name, entries):
    for id_, reason in entries:
        if name == id_ or name.startswith(id_ + "::"):
            return reason
    return None


def main(path: str, trace_path=None, outside_path=None) -> int:
    trace = exchanges(trace_path) if trace_path else {}
    outside = outside_entries(outside_path) if outside_path else []
    passed = failed = skipped = beyond = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('file') or case.get('classname', '').replace('.', '/') + '.py'}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skip = case.find("skipped")
        reason = outside_reason(name, outside)
        if bad is not None and reason is not None:
            beyond += 1
            print(f"OUTSIDE {name}: {reason}")
        elif bad is not None:
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
    print(f"counts passed={passed} failed={failed} skipped={skipped} outside={beyond}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
