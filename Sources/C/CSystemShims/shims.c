/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "sbshim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

int sbshim_rename_noreplace(int dirfd, const char *from, const char *to)
{
#ifdef SYS_renameat2
	if (syscall(SYS_renameat2, dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
#endif
	if (linkat(dirfd, from, dirfd, to, 0) == 0) {
		unlinkat(dirfd, from, 0);
		return 0;
	}
	if (errno != EPERM && errno != ENOTSUP)
		return -errno;
	struct stat st;
	if (fstatat(dirfd, to, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return -EEXIST;
	if (renameat(dirfd, from, dirfd, to) != 0)
		return -errno;
	return 0;
}

int sbshim_open_tmpfile(int dirfd, unsigned int mode)
{
#ifdef O_TMPFILE
	int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, (mode_t)mode);
	return fd >= 0 ? fd : -errno;
#else
	(void)dirfd;
	(void)mode;
	return -EOPNOTSUPP;
#endif
}

int sbshim_link_tmpfile(int fd, int dirfd, const char *to)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, path, dirfd, to, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	return -errno;
}

int sbshim_process_alive(int pid)
{
	return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

int sbshim_lock(int fd, int exclusive)
{
	int rc;
	do
		rc = flock(fd, exclusive ? LOCK_EX : LOCK_UN);
	while (rc != 0 && errno == EINTR);
	return rc == 0 ? 0 : -errno;
}

long long sbshim_free_bytes(int fd)
{
	struct statvfs s;
	if (fstatvfs(fd, &s) != 0)
		return -errno;
	return (long long)s.f_bavail * (long long)s.f_frsize;
}

long long sbshim_realtime_offset_ns(void)
{
	struct timespec m0, r, m1;
	clock_gettime(CLOCK_MONOTONIC, &m0);
	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m1);
	long long mono = ((long long)m0.tv_sec * 1000000000LL + m0.tv_nsec +
			  (long long)m1.tv_sec * 1000000000LL + m1.tv_nsec) / 2;
	return (long long)r.tv_sec * 1000000000LL + r.tv_nsec - mono;
}

int sbshim_dma_heap_alloc(unsigned long long size)
{
	int heap = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);
	if (heap < 0)
		return -errno;
	struct dma_heap_allocation_data req = { .len = size, .fd_flags = O_RDWR | O_CLOEXEC };
	int rc = ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &req);
	int e = errno;
	close(heap);
	return rc < 0 ? -e : (int)req.fd;
}

int sbshim_dmabuf_sync(int fd, int start)
{
	struct dma_buf_sync sync = { .flags = DMA_BUF_SYNC_WRITE | (start ? DMA_BUF_SYNC_START : DMA_BUF_SYNC_END) };
	return ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) < 0 ? -errno : 0;
}

static volatile int signal_pipes[65] = { [0 ... 64] = -1 };

static void signal_to_pipe(int signo)
{
	int saved = errno;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	int fd = signo > 0 && signo <= 64 ? signal_pipes[signo] : -1;
	if (fd >= 0) {
		ssize_t w = write(fd, &ns, sizeof(ns));
		(void)w;
	}
	errno = saved;
}

int sbshim_signal_pipe(int signo)
{
	if (signo <= 0 || signo > 64)
		return -EINVAL;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	signal_pipes[signo] = fds[1];
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = signal_to_pipe;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(signo, &sa, NULL) < 0) {
		int e = errno;
		signal_pipes[signo] = -1;
		close(fds[0]);
		close(fds[1]);
		return -e;
	}
	return fds[0];
}

void sbshim_signal_default(int signo)
{
	if (signo <= 0 || signo > 64)
		return;
	signal(signo, SIG_DFL);
	int fd = signal_pipes[signo];
	signal_pipes[signo] = -1;
	if (fd >= 0)
		close(fd);
}

#include <sys/eventfd.h>
#include <sys/prctl.h>

int sbshim_eventfd(void)
{
	return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

int sbshim_thread_name(const char *name)
{
	return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

int sbshim_clock_state(int *synchronised, long *max_error_us)
{
	struct timex t;
	memset(&t, 0, sizeof t);
	int state = adjtimex(&t);
	if (state < 0)
		return -errno;
	*synchronised = state != TIME_ERROR && !(t.status & STA_UNSYNC);
	*max_error_us = t.maxerror;
	return 0;
}
