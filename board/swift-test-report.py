#!/usr/bin/env python3
"""What board/swift-test.sh says about a test run that passed its deadline.

  swift-test-report.py unfinished LOG   the tests swift-testing started and never ended
  swift-test-report.py stacks GDB_OUT   per thread, its innermost frames in the project's Sources/
                                        or Tests/ (names demangled by `swift demangle` first)
"""
import re
import sys


def unfinished(path):
    # swift-testing prints `◇ Test NAME started.` and `✔/✘ Test NAME passed/failed after ...`.
    started, ended = [], set()
    for line in open(path, encoding="utf-8", errors="replace"):
        if "Test case passing" in line:  # a parameterised test's cases: only its own end is printed
            continue
        m = re.search(r"Test (.+) started\.$", line)
        if m:
            started.append(m.group(1))
            continue
        m = re.search(r"Test (.+) (?:passed|failed)(?: with \d+ issues?)? after [\d.]+ seconds|Test (.+) skipped", line)
        if m:
            # A parameterised test ends as `Test NAME with N test cases passed after ...`.
            ended.add(re.sub(r" with \d+ test cases?$", "", m.group(1) or m.group(2)))
    for name in started:
        if name not in ended and name != "run":
            print("swift-test: unfinished: " + name)


def stacks(path):
    thread, shown = None, {}
    frame = re.compile(r"#\d+ +(?:0x[0-9a-f]+ in )?(.*?) \(.*\) at (\S*/(?:Sources|Tests)/\S+)")
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.startswith("Thread "):
            name = re.search(r'"([^"]*)"', line)
            thread = line.split(" (")[0].strip() + (" " + name.group(1) if name else "")
            continue
        m = frame.search(line)
        if m and ("/.build/" in m.group(2) or "/checkouts/" in m.group(2)):
            continue  # a dependency's code
        if thread and m and len(shown.setdefault(thread, [])) < 4:
            where = re.split(r"/(?:Sources|Tests)/", m.group(2))[-1]
            shown[thread].append(where + "  " + m.group(1)[:150])
    for thread, frames in shown.items():
        if frames:
            print("    " + thread)
            for f in frames:
                print("      " + f)


if __name__ == "__main__":
    {"unfinished": unfinished, "stacks": stacks}[sys.argv[1]](sys.argv[2])
