/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bridge.cpp - libcamera behind the plain C header shutterbug_bridge.h
 *
 * Compiles against libcamera 0.0.3 (Debian 12) up to the 0.7 series; version differences are
 * handled with LIBCAMERA_VERSION_* checks next to the code they affect.
 */

#include "shutterbug_bridge.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libcamera/camera.h>
#include <libcamera/camera_manager.h>
#include <libcamera/control_ids.h>
#include <libcamera/controls.h>
#include <libcamera/formats.h>
#include <libcamera/framebuffer.h>
#include <libcamera/framebuffer_allocator.h>
#include <libcamera/logging.h>
#include <libcamera/property_ids.h>
#include <libcamera/request.h>
#include <libcamera/stream.h>
#include <libcamera/version.h>

using namespace libcamera;

#define SBC_LIBCAMERA_AT_LEAST(maj, min) \
	(LIBCAMERA_VERSION_MAJOR > (maj) || \
	 (LIBCAMERA_VERSION_MAJOR == (maj) && LIBCAMERA_VERSION_MINOR >= (min)))

/* libcamera 0.5 replaced "AeEnable=false plus values" with per-control modes. */
#define SBC_HAS_EXPOSURE_MODES SBC_LIBCAMERA_AT_LEAST(0, 5)

namespace {

/*
 * Every entry point catches, so no exception crosses into C or Swift. libcamera itself does
 * not throw, but the standard library can (bad_alloc).
 */
template<typename F>
int guarded(F &&f) noexcept
{
	try {
		return f();
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

/* libcamera 0.6 made string controls std::string_view; a std::string converts to one too. */
void copyString(char *dst, size_t size, std::string_view src)
{
	size_t n = std::min(size - 1, src.size());
	std::memcpy(dst, src.data(), n);
	dst[n] = '\0';
}

StreamRole toRole(sbc_role role)
{
	switch (role) {
	case SBC_ROLE_RAW:
		return StreamRole::Raw;
	case SBC_ROLE_STILL:
		return StreamRole::StillCapture;
	case SBC_ROLE_VIDEO:
		return StreamRole::VideoRecording;
	case SBC_ROLE_VIEWFINDER:
	default:
		return StreamRole::Viewfinder;
	}
}

/* One mapping per dmabuf fd: a YUV420 buffer is one fd with three planes at offsets. */
struct Mapping {
	void *address = MAP_FAILED;
	size_t length = 0;
};

struct Slot {
	std::unique_ptr<Request> request;
	std::atomic<bool> queued{ false };
	uint64_t cookie = 0;
};

} /* namespace */

struct sbc_manager {
	std::unique_ptr<CameraManager> manager;
};

struct sbc_camera {
	std::shared_ptr<Camera> camera;
	std::unique_ptr<CameraConfiguration> config;
	std::unique_ptr<FrameBufferAllocator> allocator;
	std::vector<Stream *> streams;
	std::vector<std::unique_ptr<Slot>> slots;
	std::map<int, Mapping> mappings;
	bool running = false;
	int eventFd = -1;
	std::atomic<bool> disconnected{ false };
	/* The media device nodes present when the camera was acquired (see devicesGone()). */
	std::vector<dev_t> mediaNodes;

	/*
	 * Completion queue: a fixed ring sized to the slot count (a slot is in it at most once), so
	 * the completion path never allocates. Filled on libcamera's thread, drained by the caller.
	 */
	std::mutex lock;
	std::vector<sbc_completion> ring;
	size_t head = 0;
	size_t count = 0;

	void requestComplete(Request *request);
	void cameraDisconnected();
	void cancelQueued();
	bool devicesGone() const;
	void freeBuffers();
	uint32_t apply(const sbc_controls *in, ControlList &out) const;
};

/* A metadata value as its control's type. */
template<typename T>
static T valueOf(const ControlValue &value, const Control<T> &)
{
	return value.get<T>();
}

/* Runs on libcamera's thread: copy plain data, signal, return. Nothing else. */
void sbc_camera::requestComplete(Request *request)
{
	uint32_t slot = static_cast<uint32_t>(request->cookie());
	sbc_completion c = {};
	c.slot = slot;
	c.cookie = slots[slot]->cookie;
	c.status = request->status() == Request::RequestCancelled
			   ? SBC_REQUEST_CANCELLED
			   : SBC_REQUEST_COMPLETE;

	uint32_t n = 0;
	for (Stream *stream : streams) {
		FrameBuffer *buffer = request->findBuffer(stream);
		if (!buffer || n >= SBC_MAX_STREAMS)
			continue;
		const FrameMetadata &fm = buffer->metadata();
		if (n == 0) {
			c.sequence = fm.sequence;
			c.buffer_timestamp_ns = fm.timestamp;
		}
		if (!fm.planes().empty())
			c.bytes_used[n] = fm.planes()[0].bytesused;
		switch (fm.status) {
		case FrameMetadata::FrameSuccess:
		case FrameMetadata::FrameCancelled:
			break;
		case FrameMetadata::FrameError:
			if (c.status != SBC_REQUEST_CANCELLED)
				c.status = SBC_REQUEST_ERROR;
			break;
		default:
			/* FrameStartup (upstream 0.5.2, the fork's 0.5.1+rpt builds): AGC/AWB
			 * still converging. Any status this header does not know counts as
			 * start-up, so this compiles on every version. An error wins. */
			if (c.status == SBC_REQUEST_COMPLETE)
				c.status = SBC_REQUEST_STARTUP;
			break;
		}
		n++;
	}
	c.stream_count = n;
	c.request_sequence = request->sequence();

	/*
	 * One pass over what the frame reports (vimc: a couple of entries; a Pi: a few dozen)
	 * instead of a hash lookup per control this bridge knows. The ids are each version's own
	 * enum constants; a value is read as its control's type.
	 */
	for (const auto &[id, v] : request->metadata()) {
		switch (id) {
		case controls::SENSOR_TIMESTAMP:
			c.metadata_set |= SBC_META_SENSOR_TIMESTAMP;
			c.sensor_timestamp_ns = valueOf(v, controls::SensorTimestamp);
			break;
		case controls::EXPOSURE_TIME:
			c.metadata_set |= SBC_META_EXPOSURE_TIME;
			c.exposure_time_us = valueOf(v, controls::ExposureTime);
			break;
		case controls::ANALOGUE_GAIN:
			c.metadata_set |= SBC_META_ANALOGUE_GAIN;
			c.analogue_gain = valueOf(v, controls::AnalogueGain);
			break;
		case controls::DIGITAL_GAIN:
			c.metadata_set |= SBC_META_DIGITAL_GAIN;
			c.digital_gain = valueOf(v, controls::DigitalGain);
			break;
		case controls::FRAME_DURATION:
			c.metadata_set |= SBC_META_FRAME_DURATION;
			c.frame_duration_us = valueOf(v, controls::FrameDuration);
			break;
		case controls::LENS_POSITION:
			c.metadata_set |= SBC_META_LENS_POSITION;
			c.lens_position = valueOf(v, controls::LensPosition);
			break;
		case controls::COLOUR_GAINS: {
			const auto g = valueOf(v, controls::ColourGains);
			c.metadata_set |= SBC_META_COLOUR_GAINS;
			c.colour_gains[0] = g[0];
			c.colour_gains[1] = g[1];
			break;
		}
		case controls::COLOUR_TEMPERATURE:
			c.metadata_set |= SBC_META_COLOUR_TEMPERATURE;
			c.colour_temperature = valueOf(v, controls::ColourTemperature);
			break;
		case controls::LUX:
			c.metadata_set |= SBC_META_LUX;
			c.lux = valueOf(v, controls::Lux);
			break;
		case controls::COLOUR_CORRECTION_MATRIX: {
			const auto m = valueOf(v, controls::ColourCorrectionMatrix);
			c.metadata_set |= SBC_META_COLOUR_CORRECTION_MATRIX;
			for (size_t i = 0; i < 9 && i < m.size(); i++)
				c.colour_correction_matrix[i] = m[i];
			break;
		}
		case controls::SENSOR_BLACK_LEVELS: {
			const auto b = valueOf(v, controls::SensorBlackLevels);
			c.metadata_set |= SBC_META_SENSOR_BLACK_LEVELS;
			for (size_t i = 0; i < 4 && i < b.size(); i++)
				c.sensor_black_levels[i] = b[i];
			break;
		}
		case controls::SENSOR_TEMPERATURE:
			c.metadata_set |= SBC_META_SENSOR_TEMPERATURE;
			c.sensor_temperature = valueOf(v, controls::SensorTemperature);
			break;
		case controls::FOCUS_FO_M:
			c.metadata_set |= SBC_META_FOCUS_FOM;
			c.focus_fom = valueOf(v, controls::FocusFoM);
			break;
		case controls::AF_STATE:
			c.metadata_set |= SBC_META_AF_STATE;
			c.af_state = valueOf(v, controls::AfState);
			break;
		default:
			/* Controls some versions have, by the macro that says so (vendor
			 * namespaces' enum names are not the same across versions). */
#ifdef LIBCAMERA_HAS_LIBCAMERA_VENDOR_CONTROLS_FRAME_WALL_CLOCK
			if (id == controls::FrameWallClock.id()) {
				c.metadata_set |= SBC_META_FRAME_WALL_CLOCK;
				c.frame_wall_clock_ns = valueOf(v, controls::FrameWallClock);
			}
#endif
#ifdef LIBCAMERA_HAS_RPI_VENDOR_CONTROLS_CONTROL_LIST_SEQUENCE
			if (id == controls::rpi::ControlListSequence.id()) {
				c.metadata_set |= SBC_META_CONTROL_LIST_SEQUENCE;
				c.control_list_sequence = valueOf(v, controls::rpi::ControlListSequence);
			}
#endif
			break;
		}
	}

	{
		std::lock_guard<std::mutex> guard(lock);
		if (count < ring.size()) {
			ring[(head + count) % ring.size()] = c;
			count++;
		}
	}
	uint64_t one = 1;
	ssize_t ret = write(eventFd, &one, sizeof(one));
	(void)ret;
}

/* Runs on libcamera's thread when the camera goes away. */
void sbc_camera::cameraDisconnected()
{
	disconnected = true;
	uint64_t one = 1;
	ssize_t ret = write(eventFd, &one, sizeof(one));
	(void)ret;
}

/*
 * A camera whose device went away cannot be stopped: its V4L2 devices refuse STREAMOFF, no
 * buffer comes back, and PipelineHandler::stop() then asserts that no request is queued
 * (seen with 0.0.3 on vimc unbound while streaming; the same code stands in 0.7). The requests
 * still queued are reported cancelled here instead, so the caller's accounting balances.
 * Called with the camera disconnected, from the caller's thread.
 */
void sbc_camera::cancelQueued()
{
	std::lock_guard<std::mutex> guard(lock);
	for (size_t i = 0; i < slots.size(); i++) {
		if (!slots[i]->queued)
			continue;
		bool inRing = false;
		for (size_t k = 0; k < count; k++)
			inRing = inRing || ring[(head + k) % ring.size()].slot == i;
		if (inRing || count >= ring.size())
			continue;
		sbc_completion c = {};
		c.slot = static_cast<uint32_t>(i);
		c.cookie = slots[i]->cookie;
		c.status = SBC_REQUEST_CANCELLED;
		ring[(head + count) % ring.size()] = c;
		count++;
	}
	uint64_t one = 1;
	ssize_t ret = write(eventFd, &one, sizeof(one));
	(void)ret;
}

/* The character devices /dev/media* as they are now. */
static std::vector<dev_t> mediaNodesNow()
{
	std::vector<dev_t> nodes;
	DIR *dir = opendir("/dev");
	if (!dir)
		return nodes;
	while (struct dirent *e = readdir(dir)) {
		if (strncmp(e->d_name, "media", 5) != 0)
			continue;
		struct stat st;
		std::string path = std::string("/dev/") + e->d_name;
		if (stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode))
			nodes.push_back(st.st_rdev);
	}
	closedir(dir);
	return nodes;
}

/*
 * Whether a media device present at acquire time has gone. libcamera disconnects a camera only
 * where its pipeline handler registered for hotplug (UVC); others (vimc, the Pi's) keep the
 * camera registered after its device went away, and stopping it then asserts (see
 * cancelQueued()). A media node gone is the sign; on a board with several cameras it may be
 * another's, and this camera is then given up with it (the caller reopens or restarts).
 */
bool sbc_camera::devicesGone() const
{
	std::vector<dev_t> now = mediaNodesNow();
	for (dev_t d : mediaNodes) {
		if (std::find(now.begin(), now.end(), d) == now.end())
			return true;
	}
	return false;
}

/*
 * What libcamera may still point at after its camera went away while running: the requests it
 * holds queued, their buffers, the allocator and the camera. Kept for the life of the process,
 * never freed (a few buffers per unplug) rather than freed under libcamera's feet: not at exit
 * either, where a static vector's destructor would free them while libcamera's threads, never
 * stopped, still run (hence the list on the heap, never deleted).
 */
struct Remains {
	std::shared_ptr<Camera> camera;
	std::unique_ptr<CameraConfiguration> config;
	std::unique_ptr<FrameBufferAllocator> allocator;
	std::vector<std::unique_ptr<Slot>> slots;
};

static std::mutex &remainsLock = *new std::mutex;
static std::vector<std::unique_ptr<Remains>> &remains = *new std::vector<std::unique_ptr<Remains>>;

void sbc_camera::freeBuffers()
{
	slots.clear();
	for (auto &[fd, m] : mappings) {
		if (m.address != MAP_FAILED)
			munmap(m.address, m.length);
	}
	mappings.clear();
	if (allocator) {
		for (Stream *stream : streams)
			allocator->free(stream);
	}
	allocator.reset();
	std::lock_guard<std::mutex> guard(lock);
	ring.clear();
	head = count = 0;
}

/*
 * Copies the requested controls into a libcamera ControlList, leaving out those the camera does
 * not list, and returns their bits so the caller can report them.
 */
uint32_t sbc_camera::apply(const sbc_controls *in, ControlList &out) const
{
	if (!in || !in->set)
		return 0;

	const ControlInfoMap &info = camera->controls();
	auto has = [&](const ControlId &id) { return info.find(&id) != info.end(); };
	uint32_t unsupported = 0;

#if SBC_HAS_EXPOSURE_MODES
	if (in->set & SBC_CTRL_AE_ENABLE) {
		int32_t mode = in->ae_enable ? controls::ExposureTimeModeAuto
					     : controls::ExposureTimeModeManual;
		int32_t gainMode = in->ae_enable ? controls::AnalogueGainModeAuto
						 : controls::AnalogueGainModeManual;
		bool any = false;
		if (has(controls::ExposureTimeMode)) {
			out.set(controls::ExposureTimeMode, mode);
			any = true;
		}
		if (has(controls::AnalogueGainMode)) {
			out.set(controls::AnalogueGainMode, gainMode);
			any = true;
		}
		if (!any)
			unsupported |= SBC_CTRL_AE_ENABLE;
	}
#else
	if (in->set & SBC_CTRL_AE_ENABLE) {
		if (has(controls::AeEnable))
			out.set(controls::AeEnable, in->ae_enable);
		else
			unsupported |= SBC_CTRL_AE_ENABLE;
	}
#endif
	if (in->set & SBC_CTRL_EXPOSURE_TIME) {
		if (has(controls::ExposureTime))
			out.set(controls::ExposureTime,
				static_cast<int32_t>(in->exposure_time_us));
		else
			unsupported |= SBC_CTRL_EXPOSURE_TIME;
	}
	if (in->set & SBC_CTRL_ANALOGUE_GAIN) {
		if (has(controls::AnalogueGain))
			out.set(controls::AnalogueGain, in->analogue_gain);
		else
			unsupported |= SBC_CTRL_ANALOGUE_GAIN;
	}
	if (in->set & SBC_CTRL_EXPOSURE_VALUE) {
		if (has(controls::ExposureValue))
			out.set(controls::ExposureValue, in->exposure_value);
		else
			unsupported |= SBC_CTRL_EXPOSURE_VALUE;
	}
	if (in->set & SBC_CTRL_AWB_ENABLE) {
		if (has(controls::AwbEnable))
			out.set(controls::AwbEnable, in->awb_enable);
		else
			unsupported |= SBC_CTRL_AWB_ENABLE;
	}
	if (in->set & SBC_CTRL_COLOUR_GAINS) {
		if (has(controls::ColourGains))
			out.set(controls::ColourGains,
				Span<const float, 2>(in->colour_gains));
		else
			unsupported |= SBC_CTRL_COLOUR_GAINS;
	}
	if (in->set & SBC_CTRL_FRAME_DURATION_LIMITS) {
		if (has(controls::FrameDurationLimits)) {
			const int64_t limits[2] = { in->frame_duration_min_us,
						    in->frame_duration_max_us };
			out.set(controls::FrameDurationLimits,
				Span<const int64_t, 2>(limits));
		} else {
			unsupported |= SBC_CTRL_FRAME_DURATION_LIMITS;
		}
	}
	if (in->set & SBC_CTRL_AF_MODE) {
		if (has(controls::AfMode))
			out.set(controls::AfMode, in->af_mode);
		else
			unsupported |= SBC_CTRL_AF_MODE;
	}
	if (in->set & SBC_CTRL_LENS_POSITION) {
		if (has(controls::LensPosition))
			out.set(controls::LensPosition, in->lens_position);
		else
			unsupported |= SBC_CTRL_LENS_POSITION;
	}
	return unsupported;
}

extern "C" {

sbc_version sbc_compiled_version(void)
{
	return { LIBCAMERA_VERSION_MAJOR, LIBCAMERA_VERSION_MINOR, LIBCAMERA_VERSION_PATCH };
}

size_t sbc_runtime_version(char *buffer, size_t size)
{
	/* A static string libcamera sets when it is built; reading it starts nothing. */
	const std::string &v = CameraManager::version();
	if (buffer && size > 0) {
		size_t n = std::min(v.size(), size - 1);
		std::memcpy(buffer, v.data(), n);
		buffer[n] = '\0';
	}
	return v.size();
}

int sbc_manager_create(sbc_manager **out)
{
	return guarded([&] {
		/* libcamera logs INFO to stderr by default; keep warnings unless the user chose.
		 * The logger reads the variable when it first starts, which may be now. */
		if (!std::getenv("LIBCAMERA_LOG_LEVELS")) {
			setenv("LIBCAMERA_LOG_LEVELS", "*:WARN", 0);
			logSetLevel("*", "WARN");
		}

		auto m = std::make_unique<sbc_manager>();
		m->manager = std::make_unique<CameraManager>();
		/* The threads libcamera starts take their name from the thread that starts them: the
		 * caller's (in Swift, a dispatch worker's) would make `top -H` on a Pi blame it for
		 * libcamera's work. Named for the start, then restored. */
		char caller[16] = "";
		bool named = pthread_getname_np(pthread_self(), caller, sizeof(caller)) == 0 &&
			     pthread_setname_np(pthread_self(), "libcamera") == 0;
		int ret = m->manager->start();
		if (named)
			pthread_setname_np(pthread_self(), caller);
		if (ret < 0)
			return ret;
		*out = m.release();
		return 0;
	});
}

void sbc_manager_destroy(sbc_manager *manager)
{
	if (!manager)
		return;
	manager->manager->stop();
	delete manager;
}

size_t sbc_manager_camera_count(sbc_manager *manager)
{
	return manager->manager->cameras().size();
}

int sbc_manager_camera_info(sbc_manager *manager, size_t index, sbc_camera_info *info)
{
	return guarded([&] {
		auto cameras = manager->manager->cameras();
		if (index >= cameras.size())
			return -ERANGE;
		const std::shared_ptr<Camera> &cam = cameras[index];
		*info = {};
		copyString(info->id, sizeof(info->id), cam->id());
		const ControlList &props = cam->properties();
		if (auto model = props.get(properties::Model))
			copyString(info->model, sizeof(info->model), *model);
		info->location = props.get(properties::Location).value_or(-1);
		info->rotation = props.get(properties::Rotation).value_or(-1);
		if (auto size = props.get(properties::PixelArraySize)) {
			info->pixel_array_width = size->width;
			info->pixel_array_height = size->height;
		}
		return 0;
	});
}

int sbc_camera_acquire(sbc_manager *manager, const char *id, sbc_camera **out)
{
	return guarded([&] {
		std::shared_ptr<Camera> cam = manager->manager->get(id);
		if (!cam)
			return -ENODEV;
		int ret = cam->acquire();
		if (ret < 0)
			return ret;
		auto c = std::make_unique<sbc_camera>();
		c->camera = cam;
		c->mediaNodes = mediaNodesNow();
		c->eventFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (c->eventFd < 0) {
			ret = -errno;
			cam->release();
			return ret;
		}
		c->camera->requestCompleted.connect(c.get(), &sbc_camera::requestComplete);
		c->camera->disconnected.connect(c.get(), &sbc_camera::cameraDisconnected);
		*out = c.release();
		return 0;
	});
}

void sbc_camera_release(sbc_camera *camera)
{
	if (!camera)
		return;
	camera->camera->requestCompleted.disconnect(camera);
	camera->camera->disconnected.disconnect(camera);
	if (camera->disconnected && camera->running) {
		/* See cancelQueued(): neither stopped nor freed. */
		for (auto &[fd, m] : camera->mappings) {
			if (m.address != MAP_FAILED)
				munmap(m.address, m.length);
		}
		camera->mappings.clear();
		auto r = std::make_unique<Remains>();
		r->camera = std::move(camera->camera);
		r->config = std::move(camera->config);
		r->allocator = std::move(camera->allocator);
		r->slots = std::move(camera->slots);
		std::lock_guard<std::mutex> guard(remainsLock);
		remains.push_back(std::move(r));
	} else {
		if (camera->running)
			camera->camera->stop();
		camera->freeBuffers();
		camera->camera->release();
	}
	close(camera->eventFd);
	delete camera;
}

int sbc_camera_configure(sbc_camera *camera, sbc_stream_config *streams, size_t count,
			 sbc_config_status *status)
{
	return guarded([&] {
		if (camera->running)
			return -EBUSY;
		if (count == 0 || count > SBC_MAX_STREAMS)
			return -EINVAL;

		std::vector<StreamRole> roles;
		for (size_t i = 0; i < count; i++)
			roles.push_back(toRole(streams[i].role));

		std::unique_ptr<CameraConfiguration> config =
			camera->camera->generateConfiguration(roles);
		if (!config || config->size() != count)
			return -EINVAL;

		for (size_t i = 0; i < count; i++) {
			StreamConfiguration &cfg = config->at(i);
			if (streams[i].width && streams[i].height)
				cfg.size = Size(streams[i].width, streams[i].height);
			if (streams[i].pixel_format)
				cfg.pixelFormat = PixelFormat(streams[i].pixel_format, streams[i].pixel_modifier);
			if (streams[i].buffer_count)
				cfg.bufferCount = streams[i].buffer_count;
		}

		CameraConfiguration::Status st = config->validate();
		if (st == CameraConfiguration::Invalid)
			return -EINVAL;

		/* Report the adjustment against what was asked, not only libcamera's flag. */
		bool adjusted = st == CameraConfiguration::Adjusted;
		for (size_t i = 0; i < count; i++) {
			const StreamConfiguration &cfg = config->at(i);
			if ((streams[i].width && cfg.size.width != streams[i].width) ||
			    (streams[i].height && cfg.size.height != streams[i].height) ||
			    (streams[i].pixel_format && (cfg.pixelFormat.fourcc() != streams[i].pixel_format ||
							 cfg.pixelFormat.modifier() != streams[i].pixel_modifier)) ||
			    (streams[i].buffer_count && cfg.bufferCount != streams[i].buffer_count))
				adjusted = true;
		}

		camera->freeBuffers();
		int ret = camera->camera->configure(config.get());
		if (ret < 0)
			return ret;

		camera->streams.clear();
		for (size_t i = 0; i < count; i++) {
			const StreamConfiguration &cfg = config->at(i);
			streams[i].width = cfg.size.width;
			streams[i].height = cfg.size.height;
			streams[i].pixel_format = cfg.pixelFormat.fourcc();
			streams[i].pixel_modifier = cfg.pixelFormat.modifier();
			streams[i].buffer_count = cfg.bufferCount;
			streams[i].stride = cfg.stride;
			streams[i].frame_size = cfg.frameSize;
			camera->streams.push_back(cfg.stream());
		}
		camera->config = std::move(config);
		if (status)
			*status = adjusted ? SBC_CONFIG_ADJUSTED : SBC_CONFIG_VALID;
		return 0;
	});
}

int sbc_camera_allocate(sbc_camera *camera)
{
	return guarded([&] {
		if (camera->running)
			return -EBUSY;
		if (camera->streams.empty())
			return -EINVAL;

		camera->freeBuffers();
		camera->allocator = std::make_unique<FrameBufferAllocator>(camera->camera);

		size_t slotCount = SIZE_MAX;
		for (Stream *stream : camera->streams) {
			int ret = camera->allocator->allocate(stream);
			if (ret < 0) {
				camera->freeBuffers();
				return ret;
			}
			slotCount = std::min(slotCount, camera->allocator->buffers(stream).size());
		}
		if (slotCount == 0 || slotCount == SIZE_MAX) {
			camera->freeBuffers();
			return -ENOMEM;
		}

		/* Map each dmabuf once, over the extent of all its planes. */
		for (Stream *stream : camera->streams) {
			for (const auto &buffer : camera->allocator->buffers(stream)) {
				std::map<int, size_t> extent;
				for (const FrameBuffer::Plane &plane : buffer->planes()) {
					size_t end = plane.offset + plane.length;
					size_t &e = extent[plane.fd.get()];
					e = std::max(e, end);
				}
				for (auto &[fd, length] : extent) {
					if (camera->mappings.count(fd))
						continue;
					void *addr = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
					if (addr == MAP_FAILED) {
						int ret = -errno;
						camera->freeBuffers();
						return ret;
					}
					camera->mappings[fd] = { addr, length };
				}
			}
		}

		for (size_t i = 0; i < slotCount; i++) {
			auto slot = std::make_unique<Slot>();
			slot->request = camera->camera->createRequest(i);
			if (!slot->request) {
				camera->freeBuffers();
				return -ENOMEM;
			}
			for (Stream *stream : camera->streams) {
				int ret = slot->request->addBuffer(
					stream, camera->allocator->buffers(stream)[i].get());
				if (ret < 0) {
					camera->freeBuffers();
					return ret;
				}
			}
			camera->slots.push_back(std::move(slot));
		}

		std::lock_guard<std::mutex> guard(camera->lock);
		camera->ring.assign(slotCount, sbc_completion{});
		camera->head = camera->count = 0;
		return static_cast<int>(slotCount);
	});
}

int sbc_camera_buffer_info(sbc_camera *camera, uint32_t stream, uint32_t slot,
			   sbc_buffer_info *info)
{
	return guarded([&] {
		if (!camera->allocator || stream >= camera->streams.size())
			return -EINVAL;
		const auto &buffers = camera->allocator->buffers(camera->streams[stream]);
		if (slot >= buffers.size())
			return -ERANGE;
		const FrameBuffer *buffer = buffers[slot].get();
		*info = {};
		for (const FrameBuffer::Plane &plane : buffer->planes()) {
			if (info->plane_count >= SBC_MAX_PLANES)
				break;
			sbc_plane &p = info->planes[info->plane_count++];
			p.fd = plane.fd.get();
			p.offset = plane.offset;
			p.length = plane.length;
			auto it = camera->mappings.find(p.fd);
			p.data = it == camera->mappings.end()
					 ? nullptr
					 : static_cast<const uint8_t *>(it->second.address) + plane.offset;
		}
		return 0;
	});
}

int sbc_camera_control_limits(sbc_camera *camera, sbc_control_limits *limits)
{
	return guarded([&] {
		*limits = {};
		const ControlInfoMap &info = camera->camera->controls();
		auto range = [&](const ControlId &id, sbc_control_range &r, uint32_t bit) {
			auto it = info.find(&id);
			if (it == info.end())
				return;
			limits->supported |= bit;
			r.supported = true;
			auto number = [](const ControlValue &v) -> double {
				if (v.isNone() || v.isArray())
					return 0;
				switch (v.type()) {
				case ControlTypeInteger32:
					return v.get<int32_t>();
				case ControlTypeInteger64:
					return static_cast<double>(v.get<int64_t>());
				case ControlTypeFloat:
					return v.get<float>();
				default:
					return 0;
				}
			};
			r.min = number(it->second.min());
			r.max = number(it->second.max());
			r.def = number(it->second.def());
		};
		sbc_control_range unused;
#if SBC_HAS_EXPOSURE_MODES
		range(controls::ExposureTimeMode, unused, SBC_CTRL_AE_ENABLE);
#else
		range(controls::AeEnable, unused, SBC_CTRL_AE_ENABLE);
#endif
		range(controls::ExposureTime, limits->exposure_time_us, SBC_CTRL_EXPOSURE_TIME);
		range(controls::AnalogueGain, limits->analogue_gain, SBC_CTRL_ANALOGUE_GAIN);
		range(controls::ExposureValue, unused, SBC_CTRL_EXPOSURE_VALUE);
		range(controls::AwbEnable, unused, SBC_CTRL_AWB_ENABLE);
		range(controls::ColourGains, unused, SBC_CTRL_COLOUR_GAINS);
		range(controls::FrameDurationLimits, limits->frame_duration_us,
		      SBC_CTRL_FRAME_DURATION_LIMITS);
		range(controls::AfMode, unused, SBC_CTRL_AF_MODE);
		range(controls::LensPosition, limits->lens_position, SBC_CTRL_LENS_POSITION);
		return 0;
	});
}

int sbc_camera_start(sbc_camera *camera, const sbc_controls *controls, uint32_t *unsupported)
{
	return guarded([&] {
		if (camera->running)
			return -EBUSY;
		if (camera->slots.empty())
			return -EINVAL;
		ControlList list(camera->camera->controls());
		uint32_t dropped = camera->apply(controls, list);
		if (unsupported)
			*unsupported = dropped;
		int ret = camera->camera->start(controls ? &list : nullptr);
		if (ret < 0)
			return ret;
		camera->running = true;
		return 0;
	});
}

int sbc_camera_queue(sbc_camera *camera, uint32_t slot, uint64_t cookie,
		     const sbc_controls *controls, uint32_t *unsupported)
{
	return guarded([&] {
		if (!camera->running)
			return -EACCES;
		if (slot >= camera->slots.size())
			return -ERANGE;
		Slot &s = *camera->slots[slot];
		bool expected = false;
		if (!s.queued.compare_exchange_strong(expected, true))
			return -EBUSY;

		s.request->reuse(Request::ReuseBuffers);
		s.cookie = cookie;
		uint32_t dropped = camera->apply(controls, s.request->controls());
		if (unsupported)
			*unsupported = dropped;
		int ret = camera->camera->queueRequest(s.request.get());
		if (ret < 0)
			s.queued = false;
		return ret;
	});
}

int sbc_camera_stop(sbc_camera *camera)
{
	return guarded([&] {
		if (!camera->running)
			return 0;
		if (camera->disconnected || camera->devicesGone()) {
			/* Left running (see cancelQueued()); released as such. */
			camera->disconnected = true;
			camera->cancelQueued();
			return 0;
		}
		/* Camera::stop() cancels pending requests; their completions are queued before
		 * it returns. */
		int ret = camera->camera->stop();
		camera->running = false;
		return ret;
	});
}

int sbc_camera_event_fd(sbc_camera *camera)
{
	return camera->eventFd;
}

bool sbc_camera_disconnected(sbc_camera *camera)
{
	return camera->disconnected;
}

int sbc_camera_next_completion(sbc_camera *camera, sbc_completion *out)
{
	std::lock_guard<std::mutex> guard(camera->lock);
	if (camera->count == 0)
		return 0;
	*out = camera->ring[camera->head];
	camera->head = (camera->head + 1) % camera->ring.size();
	camera->count--;
	if (out->slot < camera->slots.size())
		camera->slots[out->slot]->queued = false;
	return 1;
}

} /* extern "C" */
