#!/usr/bin/env python3
"""Prints every test a run skipped, one line each with the reason the test
gave, from JUnit reports (ctest --output-junit, pytest --junitxml), so that
the README's test command says what did not run on this machine: a skipped
test proved nothing here, so it is listed as skipped, never as passed.

Usage: test_skips.py REPORT.xml [REPORT.xml ...]

Prints "skipped: N tests (...)" and then "  TEST: skipped: REASON" for each, or
"skipped: none". GPU-only tests give the reason "needs a GPU (...)". A
report that is missing or unreadable is one line on stderr and exit 2.
"""
import re
import sys
from xml.etree import ElementTree

# What ctest writes as the message of a test its SKIP_REGULAR_EXPRESSION
# matched ([  SKIPPED ] from GoogleTest): the reason is in the output.
CTEST_SKIP_MESSAGE = "SKIP_REGULAR_EXPRESSION_MATCHED"
# GoogleTest's line before a GTEST_SKIP() message: "file.cc:22: Skipped".
GTEST_SKIPPED_LINE = re.compile(r"^\S+:\d+: Skipped$")
GTEST_PARAM_NOTE = "  # GetParam() = "


def gtest_reason(output):
    """The first line of the message after GoogleTest's "Skipped" line."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if GTEST_SKIPPED_LINE.match(line.strip()):
            for message in lines[i + 1:]:
                if message.startswith("[  SKIPPED ]"):
                    break
                if message.strip():
                    return message.strip()
    return "no reason given"


def skipped_tests(path):
    """(test name, reason) for every skipped test case of one report."""
    root = ElementTree.parse(path).getroot()
    found = []
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        # ctest names a parameterized GoogleTest case with its value's bytes
        # after "  # GetParam() = ": noise in a summary.
        name = case.get("name", "?").split(GTEST_PARAM_NOTE)[0]
        classname = case.get("classname", "").split(GTEST_PARAM_NOTE)[0]
        if classname and classname != name:
            name = f"{classname}::{name}"
        message = skipped.get("message", "")
        if message == CTEST_SKIP_MESSAGE or not message:
            out = case.find("system-out")
            reason = gtest_reason((out.text or "") if out is not None else "")
        else:
            # pytest: "file.py:12: reason" or the reason alone.
            reason = re.sub(r"^\S+:\d+: ", "", message)
        found.append((name, reason))
    return found


def main(argv):
    if len(argv) < 2:
        print("usage: test_skips.py REPORT.xml [REPORT.xml ...]", file=sys.stderr)
        return 2
    skips = []
    for path in argv[1:]:
        try:
            skips.extend(skipped_tests(path))
        except (OSError, ElementTree.ParseError) as error:
            print(f"test_skips.py: cannot read the test report {path}: {error}",
                  file=sys.stderr)
            return 2
    if not skips:
        print("skipped: none")
        return 0
    count = f"{len(skips)} test" + ("" if len(skips) == 1 else "s")
    print(f"skipped: {count} (they did not run here, so they did not pass)")
    for name, reason in skips:
        print(f"  {name}: skipped: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
