/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sbdrm.h - libdrm for Swift. The dumb-buffer ioctl numbers are function-like macros
 * (_IOWR), which Swift does not import; these wrappers stand in. Return 0 or -errno.
 */
#ifndef SBDRM_H
#define SBDRM_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <xf86drm.h>
#include <xf86drmMode.h>

static inline int sbdrm_create_dumb(int fd, uint32_t width, uint32_t height, uint32_t bpp,
				    uint32_t *handle, uint32_t *pitch, uint64_t *size)
{
	struct drm_mode_create_dumb req;
	memset(&req, 0, sizeof(req));
	req.width = width;
	req.height = height;
	req.bpp = bpp;
	if (drmIoctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &req) < 0)
		return -errno;
	*handle = req.handle;
	*pitch = req.pitch;
	*size = req.size;
	return 0;
}

static inline int sbdrm_map_dumb(int fd, uint32_t handle, uint64_t *offset)
{
	struct drm_mode_map_dumb req;
	memset(&req, 0, sizeof(req));
	req.handle = handle;
	if (drmIoctl(fd, DRM_IOCTL_MODE_MAP_DUMB, &req) < 0)
		return -errno;
	*offset = req.offset;
	return 0;
}

static inline int sbdrm_destroy_dumb(int fd, uint32_t handle)
{
	struct drm_mode_destroy_dumb req;
	memset(&req, 0, sizeof(req));
	req.handle = handle;
	return drmIoctl(fd, DRM_IOCTL_MODE_DESTROY_DUMB, &req) < 0 ? -errno : 0;
}

/* A non-blocking eventfd for waking a thread that polls the card, or -errno. */
static inline int sbdrm_wakeup_fd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

static inline int sbdrm_gem_close(int fd, uint32_t handle)
{
	struct drm_gem_close req;
	memset(&req, 0, sizeof(req));
	req.handle = handle;
	return drmIoctl(fd, DRM_IOCTL_GEM_CLOSE, &req) < 0 ? -errno : 0;
}

/* Counts a completed flip in the unsigned int the commit's user data points to. */
static void sbdrm_flip_handler(int fd, unsigned int sequence, unsigned int sec, unsigned int usec, void *data)
{
	(void)fd;
	(void)sequence;
	(void)sec;
	(void)usec;
	if (data)
		(*(unsigned int *)data)++;
}

/* Reads the DRM events waiting on `fd` (call when it polls readable): each page flip adds one
 * to the counter whose address was the commit's user data. 0 or -errno. */
static inline int sbdrm_read_flips(int fd)
{
	drmEventContext ctx;
	memset(&ctx, 0, sizeof(ctx));
	ctx.version = 2;
	ctx.page_flip_handler = sbdrm_flip_handler;
	if (drmHandleEvent(fd, &ctx) != 0)
		return -(errno ? errno : EIO);
	return 0;
}

#endif /* SBDRM_H */
