#!/usr/bin/env python3
"""The measuring half of bench-cam.sh, run inside the virtual board (see that script).

Each program's standard output is a pipe this process reads; its CPU time is the kernel's
thread-group CPU clock (clock_getcpuclockid: every thread's exact run time, in nanoseconds),
read when the output has reached frame SKIP and again at frame FRAMES - SKIP, with each
thread's own run time beside it (/proc/PID/task/TID/sched), for saying where it went. Between
the two readings this process sleeps, waking ten times a second to count lines: it starts no
processes while a program runs (a shell loop of `sleep` and `grep` forked a few hundred times
a second beside the program measured, on an emulated CPU where each fork flushes the
translation caches), and the CPU figure is not rounded to a 10 ms tick.
"""
import os
import statistics
import sys
import time

POLL = 0.1  # seconds between looks at the output


class Ended(Exception):
    pass


def process_cpu_clock(pid):
    """clock_getcpuclockid(pid), which Python lacks: Linux's encoding of a process's CPU clock
    (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) in the kernel's posix-timers.h)."""
    return (~pid << 3) | 2


def threads(pid):
    """{tid: (name, run time in ns)} for pid's threads now: the scheduler's sum_exec_runtime."""
    found = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/sched") as f:
                for line in f:
                    if line.startswith("se.sum_exec_runtime"):
                        # milliseconds with six decimals: nanoseconds, exactly
                        whole, _, frac = line.split(":")[1].strip().partition(".")
                        found[tid] = (name, int(whole) * 1_000_000 + int((frac + "000000")[:6]))
                        break
        except (OSError, ValueError):
            pass  # the thread ended between the listing and the reading
    return found


def steady(argv, marker, at_start, skip, last):
    """Runs argv; returns (frames counted, CPU nanoseconds, [(thread name, CPU ns)], largest
    first) between output frames skip and last."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        null = os.open("/dev/null", os.O_WRONLY)
        os.dup2(null, 2)
        os.close(r)
        os.close(w)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.close(w)
    os.set_blocking(r, False)
    clock = process_cpu_clock(pid)
    pending = b""
    count = 0
    tail = []

    def drain():
        nonlocal pending, count, tail
        eof = False
        while True:
            try:
                chunk = os.read(r, 65536)
            except BlockingIOError:
                break
            if not chunk:
                eof = True
                break
            pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if (line.startswith(marker) if at_start else marker in line):
                count += 1
        tail = (tail + lines)[-5:]
        return eof

    marks = []
    try:
        for target in (skip, last):
            while True:
                if drain():
                    raise Ended()
                if count >= target:
                    break
                time.sleep(POLL)
            # The clocks first, then whatever the program printed up to that instant.
            cpu = time.clock_gettime_ns(clock)
            per_thread = threads(pid)
            drain()
            marks.append((count, cpu, per_thread))
        while not drain():
            time.sleep(POLL)
    except Ended:
        pass
    _, status = os.waitpid(pid, 0)
    os.close(r)
    code = os.waitstatus_to_exitcode(status)
    if len(marks) < 2 or code != 0:
        print(f"bench-cam: {argv[0]} ended (status {code}) {'before frame ' + str(last) if len(marks) < 2 else ''}; its output ended:",
              file=sys.stderr)
        for line in tail:
            print("  " + line.decode(errors="replace"), file=sys.stderr)
        sys.exit(1)
    (n1, t1, a), (n2, t2, b) = marks
    spent = sorted(((name, ns - a.get(tid, (name, 0))[1]) for tid, (name, ns) in b.items()), key=lambda x: -x[1])
    return n2 - n1, t2 - t1, [x for x in spent if x[1] > 0]


def breakdown(spent, n):
    """'56.5 libcamera, 15.7 sb-camera, ...': each thread's µs per frame, largest first."""
    return ", ".join(f"{ns / n / 1e3:.1f} {name}" for name, ns in spent[:4])


def counting():
    """Whether the board's clock is qemu's instruction count (bench-cam.sh boots it so, and
    says so in SHUTTERBUG_BENCH_CLOCK)."""
    return os.environ.get("SHUTTERBUG_BENCH_CLOCK") == "instructions"


def main():
    frames, rounds, build = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    skip = frames // 10
    last = frames - skip
    cam = ["cam", "-c", "1", f"--capture={frames}", "-s", "role=viewfinder,width=636,height=480,pixelformat=BGR888"]
    # cam ends each line with std::endl (a write per frame); line buffering makes shutterbug
    # write each frame as it happens too, so both are counted, and cost, alike.
    sb = ["stdbuf", "-oL", f"{build}/shutterbug", "stream", "--frames", str(frames), "--size", "636x480"]
    print(f"bench vs cam: vimc viewfinder 636x480 BGR888, {frames} frames per run, CPU per frame over frames {skip} to {last} "
          f"(thread-group CPU clock), shutterbug from {build}", flush=True)
    if counting():
        print("  the board's clock is its instruction count: 1 µs of CPU is 1000 instructions executed, user and kernel", flush=True)
    cams, sbs = [], []
    for i in range(1, rounds + 1):
        cn, ct, cth = steady(cam, b"seq:", False, skip, last)
        sn, st, sth = steady(sb, b"#", True, skip, last)
        c, s = ct / cn / 1e6, st / sn / 1e6
        cams.append(c)
        sbs.append(s)
        print(f"  round {i}: cam {c * 1e3:.1f} µs/frame ({cn} frames), shutterbug {s * 1e3:.1f} µs/frame ({sn} frames), ratio {s / c:.3f}", flush=True)
        print(f"    by thread, µs/frame: cam {breakdown(cth, cn)}; shutterbug {breakdown(sth, sn)}", flush=True)
    mc, ms = statistics.median(cams), statistics.median(sbs)
    # Each round's pair runs back to back, so its ratio is less exposed to anything drifting over
    # the run than the ratio of the medians (the figure), which may take its two medians from
    # different rounds. Printed beside it, for reading the figure; counting instructions, the
    # two agree.
    paired = statistics.median(s / c for c, s in zip(cams, sbs))
    print(f"median of the {rounds} rounds' own ratios: {paired:.3f}")
    print(f"median of {rounds} rounds: cam {mc * 1e3:.1f} µs/frame, shutterbug {ms * 1e3:.1f} µs/frame, ratio shutterbug/cam {ms / mc:.2f}")


if __name__ == "__main__":
    main()
