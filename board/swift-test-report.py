#!/usr/bin/env python3
"""What board/swift-test.sh says about a test run that passed its deadline.

  swift-test-report.py unfinished LOG   the tests swift-testing started and never ended
  swift-test-report.py stacks GDB_OUT   per thread, its innermost frames in the project's Sources/
                                        or Tests/ (names demangled by `swift demangle` first)
  swift-test-report.py durations LOG [N]  the N (30) slowest tests and suites of a run, each with
                                        its seconds, and the run's own time: where the tier's time goes
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


def durations(path, count="30"):
    # `✔ Test NAME passed after 12.345 seconds.` (also `with N test cases`, `failed ... with N
    # issues`), `✔ Suite NAME passed after ...`, `✔ Test run with N tests in M suites passed after`.
    tests, suites, run = [], [], None
    pattern = re.compile(r"[✔✘] (Test|Suite) (.+?)(?: with \d+ test cases?)? (?:passed|failed)(?: with \d+ issues?)? after ([\d.]+) seconds")
    for line in open(path, encoding="utf-8", errors="replace"):
        m = pattern.search(line)
        if not m:
            continue
        kind, name, seconds = m.group(1), m.group(2), float(m.group(3))
        if kind == "Test" and name.startswith("run with "):
            run = (name, seconds)
        elif kind == "Test":
            tests.append((seconds, name))
        else:
            suites.append((seconds, name))
    n = int(count)
    print(f"swift-test: the {min(n, len(tests))} slowest of {len(tests)} tests (seconds, each beside the others running at once)")
    for seconds, name in sorted(tests, reverse=True)[:n]:
        print(f"  {seconds:7.1f}  {name[:150]}")
    print(f"swift-test: the 10 slowest of {len(suites)} suites")
    for seconds, name in sorted(suites, reverse=True)[:10]:
        print(f"  {seconds:7.1f}  {name[:150]}")
    if run:
        print(f"swift-test: the whole run ({run[0]}) {run[1]:.1f} s")


if __name__ == "__main__":
    {"unfinished": unfinished, "stacks": stacks, "durations": durations}[sys.argv[1]](*sys.argv[2:])
