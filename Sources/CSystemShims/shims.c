/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "sbshim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
