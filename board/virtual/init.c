/* SPDX-License-Identifier: Apache-2.0 */
/*
 * init.c - PID 1 of the virtual board.
 *
 * The guest's root is the host's filesystem, read-only over 9p; a second 9p share ("board") is
 * writable and carries the command to run in and its exit status out. A static C init boots
 * about a second faster than a shell script, which matters when CI boots the board often.
 *
 * Steps: mount the kernel filesystems, /tmp as an overlay on the host's; register the media and video nodes in a udev database
 * (libcamera's enumerator only accepts devices udev has initialised, and no udevd runs here);
 * create a gpio-sim chip "board-gpio" with 8 lines (line 0 named "shutter"); bring up lo; run
 * /bin/bash /run/board/command; write its status to /run/board/status; reboot, which qemu
 * (-no-reboot) turns into an exit.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *fmt, const char *arg)
{
	fprintf(stderr, "board-init: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
}

static void mountOrSay(const char *src, const char *dst, const char *type, unsigned long flags,
		       const char *data)
{
	mkdir(dst, 0755);
	if (mount(src, dst, type, flags, data) < 0)
		say("cannot mount %s", dst);
}

static int writeFile(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* For each device under dir with a "dev" file (major:minor), write a udev database entry. */
static void registerDevices(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[512], dev[64] = "", entry[128];
		snprintf(path, sizeof(path), "%s/%s/dev", dir, e->d_name);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, dev, sizeof(dev) - 1);
		close(fd);
		if (n <= 0)
			continue;
		dev[n] = '\0';
		dev[strcspn(dev, "\n")] = '\0';
		snprintf(entry, sizeof(entry), "/run/udev/data/c%s", dev);
		writeFile(entry, "I:1\n");
	}
	closedir(d);
}

/* Brings the loopback interface up: Foundation's run loop wakes itself through a loopback
 * socket pair and fails without it. */
static void loopbackUp(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			say("cannot bring up %s", "lo");
	}
	close(s);
}

static void createGpioSim(void)
{
	const char *base = "/sys/kernel/config/gpio-sim/board-gpio";
	char path[256];
	mkdir(base, 0755);
	snprintf(path, sizeof(path), "%s/bank0", base);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/bank0/num_lines", base);
	writeFile(path, "8");
	snprintf(path, sizeof(path), "%s/bank0/line0", base);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/bank0/line0/name", base);
	writeFile(path, "shutter");
	snprintf(path, sizeof(path), "%s/live", base);
	if (writeFile(path, "1") < 0)
		say("cannot create the gpio-sim chip (%s)", strerror(errno));
}

int main(void)
{
	mountOrSay("proc", "/proc", "proc", 0, NULL);
	mountOrSay("sysfs", "/sys", "sysfs", 0, NULL);
	/* CONFIG_DEVTMPFS_MOUNT has mounted /dev already. */
	mountOrSay("configfs", "/sys/kernel/config", "configfs", 0, NULL);
	mountOrSay("tmpfs", "/run", "tmpfs", 0, "mode=755");
	/* /tmp: the host's (a checkout may live there) with the guest's writes on top. */
	mkdir("/run/tmp-upper", 0755);
	mkdir("/run/tmp-upper/data", 01777);
	mkdir("/run/tmp-upper/work", 0755);
	mountOrSay("overlay", "/tmp", "overlay", 0,
		   "lowerdir=/tmp,upperdir=/run/tmp-upper/data,workdir=/run/tmp-upper/work");
	mountOrSay("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777");
	mountOrSay("board", "/run/board", "9p", 0,
		   "trans=virtio,version=9p2000.L,msize=1048576,cache=none");

	/* devtmpfs has no /dev/fd: bash's process substitution needs it. */
	symlink("/proc/self/fd", "/dev/fd");
	symlink("/proc/self/fd/0", "/dev/stdin");
	symlink("/proc/self/fd/1", "/dev/stdout");
	symlink("/proc/self/fd/2", "/dev/stderr");

	mkdir("/run/udev", 0755);
	mkdir("/run/udev/data", 0755);
	registerDevices("/sys/bus/media/devices");
	registerDevices("/sys/class/video4linux");
	createGpioSim();
	loopbackUp();

	int status = 127;
	pid_t pid = fork();
	if (pid == 0) {
		setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/swift/usr/bin", 1);
		setenv("HOME", "/tmp", 1);
		setenv("SHUTTERBUG_BOARD", "virtual", 1);
		/* run.sh quotes the command with printf %q, which is bash syntax. */
		execl("/bin/bash", "bash", "/run/board/command", (char *)NULL);
		_exit(127);
	}
	if (pid > 0) {
		int ws;
		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
		status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	}
	char text[16];
	snprintf(text, sizeof(text), "%d\n", status);
	writeFile("/run/board/status", text);
	sync();
	reboot(RB_AUTOBOOT);
	return 0;
}
