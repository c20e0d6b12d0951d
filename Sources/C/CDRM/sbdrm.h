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

#endif /* SBDRM_H */
