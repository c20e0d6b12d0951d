/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sbshim.h - glibc calls Swift's Glibc module does not import (they live in headers outside
 * its module map). Each shim is a one-line static inline; remove one when Glibc exports it.
 */
#ifndef SBSHIM_H
#define SBSHIM_H

#include <stddef.h>

#ifdef __linux__
#include <malloc.h>
#endif

#include <stdio.h>

/* Writes a line (and a newline) to C's stdout, the stream Swift's print writes to, without the
 * run-time casts print does on its `Any...` items; stdio locks the stream. Swift 6 will not read
 * the `stdout` global itself (shared mutable state). */
static inline int sbshim_stdout_line(const char *line)
{
	if (fputs(line, stdout) < 0)
		return -1;
	return fputc('\n', stdout) < 0 ? -1 : 0;
}

/* Writes `length` bytes as they are (the caller ends its line) to C's stdout in one locked
 * stdio call. */
static inline int sbshim_stdout_write(const void *bytes, size_t length)
{
	return fwrite(bytes, 1, length, stdout) == length ? 0 : -1;
}

/* Bytes handed out by malloc and not yet freed (mallinfo2's uordblks); 0 where unknown. */
static inline size_t sbshim_heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	return mallinfo2().uordblks;
#else
	return 0;
#endif
}

/* Renames `from` to `to` in directory `dirfd` unless `to` exists (then fails with EEXIST), so
 * no file is ever replaced: renameat2(RENAME_NOREPLACE), else link + unlink where the
 * filesystem lacks it, else a check then rename (vfat and exFAT have neither). 0 or -errno. */
int sbshim_rename_noreplace(int dirfd, const char *from, const char *to);

/* An unnamed file in directory `dirfd` (O_TMPFILE): it has no name until
 * sbshim_link_tmpfile gives it one, so a process killed mid-write leaves nothing behind and
 * nobody has to sweep. Returns the fd, or -errno (-EOPNOTSUPP, -EISDIR or -EINVAL where the
 * filesystem or kernel lacks O_TMPFILE: fall back to a named temporary file). */
int sbshim_open_tmpfile(int dirfd, unsigned int mode);

/* Gives the O_TMPFILE `fd` the name `to` in `dirfd`, never replacing a file (EEXIST then), via
 * linkat on /proc/self/fd (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH). 0 or -errno. */
int sbshim_link_tmpfile(int fd, int dirfd, const char *to);

/* Whether process `pid` is alive on this machine (kill(pid, 0) is not ESRCH). */
int sbshim_process_alive(int pid);

/* Takes (blocking) or releases an exclusive advisory lock on `fd` (flock). 0 or -errno. */
int sbshim_lock(int fd, int exclusive);

/* Free bytes for an unprivileged writer on the filesystem holding `fd`, or -errno. */
long long sbshim_free_bytes(int fd);

/* CLOCK_REALTIME minus CLOCK_MONOTONIC in nanoseconds, sampled between two monotonic reads. */
long long sbshim_realtime_offset_ns(void);

/* A dmabuf of `size` bytes from the kernel's system DMA heap (/dev/dma_heap/system), or -errno
 * (-ENOENT where the kernel has no DMA heaps). The caller closes it. */
int sbshim_dma_heap_alloc(unsigned long long size);

/* Brackets CPU access to a mapped dmabuf (DMA_BUF_IOCTL_SYNC): `start` 1 before writing, 0
 * after. 0 or -errno. */
int sbshim_dmabuf_sync(int fd, int start);

/* Routes signal `signo` to a pipe: its handler writes the CLOCK_MONOTONIC nanoseconds of each
 * delivery (8 bytes, async-signal-safe) into it. Returns the pipe's read end (non-blocking), or
 * -errno. Works whatever the threads' signal masks, unlike signalfd. */
int sbshim_signal_pipe(int signo);

/* Puts back the default action for `signo` and closes the pipe's write end. */
void sbshim_signal_default(int signo);

/* A non-blocking, close-on-exec eventfd (counter 0), or -1 with errno. */
int sbshim_eventfd(void);

/* Names the calling thread (15 bytes shown), as `top -H` and /proc/PID/task/TID/comm show it. */
int sbshim_thread_name(const char *name);

/* The kernel's clock discipline, read without changing it (adjtimex with no modes): *synchronised
 * is 1 when the "unsynchronised" flag is clear (systemd-timesyncd and chrony clear it once they
 * discipline the clock), *max_error_us the kernel's estimate of its maximum error. 0, or -errno. */
int sbshim_clock_state(int *synchronised, long *max_error_us);

#endif /* SBSHIM_H */
