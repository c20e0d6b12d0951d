/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sbgpio.h - the Linux GPIO character device uAPI v2 for Swift.
 *
 * The ioctl numbers are function-like macros (_IOWR) and ioctl() is variadic; Swift imports
 * neither, so each request gets a one-line wrapper. Returns 0 or -errno.
 */
#ifndef SBGPIO_H
#define SBGPIO_H

#include <errno.h>
#include <linux/gpio.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>

static inline int sbgpio_chip_info(int fd, struct gpiochip_info *info)
{
	return ioctl(fd, GPIO_GET_CHIPINFO_IOCTL, info) < 0 ? -errno : 0;
}

static inline int sbgpio_line_info(int fd, struct gpio_v2_line_info *info)
{
	return ioctl(fd, GPIO_V2_GET_LINEINFO_IOCTL, info) < 0 ? -errno : 0;
}

/* On success req->fd is the line request's fd: read gpio_v2_line_event records from it. */
static inline int sbgpio_request_lines(int fd, struct gpio_v2_line_request *req)
{
	return ioctl(fd, GPIO_V2_GET_LINE_IOCTL, req) < 0 ? -errno : 0;
}

static inline int sbgpio_get_values(int fd, struct gpio_v2_line_values *values)
{
	return ioctl(fd, GPIO_V2_LINE_GET_VALUES_IOCTL, values) < 0 ? -errno : 0;
}

static inline int sbgpio_set_values(int fd, struct gpio_v2_line_values *values)
{
	return ioctl(fd, GPIO_V2_LINE_SET_VALUES_IOCTL, values) < 0 ? -errno : 0;
}

/* A non-blocking eventfd, to wake a thread that polls a line request. fd or -errno. */
static inline int sbgpio_wakeup_fd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

#endif /* SBGPIO_H */
