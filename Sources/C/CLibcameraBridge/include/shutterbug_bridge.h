/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shutterbug_bridge.h - plain C interface over libcamera
 *
 * The only C++ in Shutterbug lives behind this header, so Swift never enables C++ interop.
 * It carries what the product uses (streams, buffers, per-request exposure, gain, white balance,
 * frame duration and lens controls, metadata back) and nothing else.
 *
 * Conventions:
 *  - opaque handles with create/destroy pairs; ownership is written next to each function;
 *  - functions return 0 or a negative errno; no C++ exception ever crosses this header;
 *  - completions are copied into a queue on libcamera's thread and signalled through an eventfd
 *    (sbc_camera_event_fd); the caller drains them with sbc_camera_next_completion on its own
 *    thread. Nothing else runs on libcamera's thread.
 *
 * Threading: a camera handle is used from one thread at a time, except
 * sbc_camera_next_completion and sbc_camera_event_fd, which may run concurrently with the others.
 */
#ifndef SHUTTERBUG_BRIDGE_H
#define SHUTTERBUG_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbc_manager sbc_manager;
typedef struct sbc_camera sbc_camera;

#define SBC_MAX_STREAMS 4
#define SBC_MAX_PLANES 3

/* The libcamera version the bridge was compiled against. */
typedef struct sbc_version {
	unsigned int major;
	unsigned int minor;
	unsigned int patch;
} sbc_version;

sbc_version sbc_compiled_version(void);
/* The version of the libcamera loaded at run time, as it names itself (CameraManager::version():
 * "v0.7.1+rpt20260429" for the Raspberry Pi fork, "v0.0.3" for Debian 12's), copied into
 * buffer (size bytes, NUL-terminated, cut if short). Returns the full length. */
size_t sbc_runtime_version(char *buffer, size_t size);

/* ---- manager --------------------------------------------------------------------------- */

/* Creates and starts a libcamera CameraManager. On success *out is owned by the caller and
 * must be passed to sbc_manager_destroy. No camera attached is not an error: the count is 0. */
int sbc_manager_create(sbc_manager **out);
/* Stops the manager and frees it. Every camera acquired from it must be released first. */
void sbc_manager_destroy(sbc_manager *manager);

typedef struct sbc_camera_info {
	char id[256];
	char model[64];          /* properties::Model, or "" */
	int32_t location;        /* properties::Location, -1 when unknown */
	int32_t rotation;        /* properties::Rotation in degrees, -1 when unknown */
	uint32_t pixel_array_width;  /* properties::PixelArraySize, 0 when unknown */
	uint32_t pixel_array_height;
} sbc_camera_info;

size_t sbc_manager_camera_count(sbc_manager *manager);
/* Fills *info for camera number index (0-based, in libcamera's order). -ERANGE past the end. */
int sbc_manager_camera_info(sbc_manager *manager, size_t index, sbc_camera_info *info);

/* ---- camera ---------------------------------------------------------------------------- */

/* Acquires the camera with this id for exclusive use. *out is owned by the caller and must be
 * passed to sbc_camera_release. -ENODEV: no such camera; -EBUSY: another user holds it. */
int sbc_camera_acquire(sbc_manager *manager, const char *id, sbc_camera **out);
/* Stops the camera if running, frees buffers and requests, releases it and frees the handle.
 * Completions not yet drained are discarded. */
void sbc_camera_release(sbc_camera *camera);

typedef enum sbc_role {
	SBC_ROLE_RAW = 0,
	SBC_ROLE_STILL = 1,
	SBC_ROLE_VIDEO = 2,
	SBC_ROLE_VIEWFINDER = 3,
} sbc_role;

typedef struct sbc_stream_config {
	/* in: what is asked; 0 means "the role's default" */
	sbc_role role;
	uint32_t width;
	uint32_t height;
	uint32_t pixel_format;   /* DRM fourcc; 0 for the role's default */
	uint64_t pixel_modifier; /* DRM modifier (MIPI CSI-2 packing for _CSI2P raw formats) */
	uint32_t buffer_count;
	/* out: what libcamera settled on */
	uint32_t stride;
	uint32_t frame_size;
} sbc_stream_config;

typedef enum sbc_config_status {
	SBC_CONFIG_VALID = 0,
	SBC_CONFIG_ADJUSTED = 1,
} sbc_config_status;

/* Generates a configuration for the roles in streams[0..count), applies the requested sizes,
 * formats and buffer counts, validates it and, when valid, configures the camera. The streams
 * are updated in place with what libcamera settled on; *status says whether anything changed.
 * -EINVAL: the configuration cannot be made valid. Must not be called while running. */
int sbc_camera_configure(sbc_camera *camera, sbc_stream_config *streams, size_t count,
			 sbc_config_status *status);

/* Allocates the buffers of every configured stream once, maps them for CPU reads, and creates
 * one reusable request per buffer index. Returns the number of request slots (> 0), or -errno.
 * Buffers live until the next configure or release. */
int sbc_camera_allocate(sbc_camera *camera);

typedef struct sbc_plane {
	int fd;                  /* dmabuf fd; borrowed, owned by the camera */
	uint32_t offset;
	uint32_t length;
	const uint8_t *data;     /* CPU mapping of this plane; borrowed */
} sbc_plane;

typedef struct sbc_buffer_info {
	uint32_t plane_count;
	sbc_plane planes[SBC_MAX_PLANES];
} sbc_buffer_info;

/* Describes buffer `slot` of stream `stream`. The pointers stay valid until reconfigure or
 * release. */
int sbc_camera_buffer_info(sbc_camera *camera, uint32_t stream, uint32_t slot,
			   sbc_buffer_info *info);

/* The controls Shutterbug sends. `set` says which fields carry a value. */
typedef enum sbc_control_bit {
	SBC_CTRL_AE_ENABLE = 1u << 0,
	SBC_CTRL_EXPOSURE_TIME = 1u << 1,
	SBC_CTRL_ANALOGUE_GAIN = 1u << 2,
	SBC_CTRL_EXPOSURE_VALUE = 1u << 3,
	SBC_CTRL_AWB_ENABLE = 1u << 4,
	SBC_CTRL_COLOUR_GAINS = 1u << 5,
	SBC_CTRL_FRAME_DURATION_LIMITS = 1u << 6,
	SBC_CTRL_AF_MODE = 1u << 7,
	SBC_CTRL_LENS_POSITION = 1u << 8,
} sbc_control_bit;

typedef struct sbc_controls {
	uint32_t set;            /* OR of sbc_control_bit */
	bool ae_enable;
	int64_t exposure_time_us;
	float analogue_gain;
	float exposure_value;    /* EV bias for the AE */
	bool awb_enable;
	float colour_gains[2];   /* red, blue */
	int64_t frame_duration_min_us;
	int64_t frame_duration_max_us;
	int32_t af_mode;         /* 0 manual, 1 auto, 2 continuous (libcamera's AfModeEnum) */
	float lens_position;     /* dioptres */
} sbc_controls;

typedef struct sbc_control_range {
	bool supported;
	double min;
	double max;
	double def;
} sbc_control_range;

typedef struct sbc_control_limits {
	uint32_t supported;      /* OR of sbc_control_bit the camera accepts */
	sbc_control_range exposure_time_us;
	sbc_control_range analogue_gain;
	sbc_control_range frame_duration_us;
	sbc_control_range lens_position;
} sbc_control_limits;

/* Which of the product's controls the camera accepts, and their ranges. */
int sbc_camera_control_limits(sbc_camera *camera, sbc_control_limits *limits);

/* Starts streaming; `controls` (may be NULL; borrowed) apply from the first frame. Bits the
 * camera does not support are left out and reported in *unsupported (may be NULL). */
int sbc_camera_start(sbc_camera *camera, const sbc_controls *controls, uint32_t *unsupported);

/* Queues request slot `slot` (reused with its buffers) carrying `controls` (may be NULL;
 * borrowed) and the caller's cookie, which comes back in its completion. Unsupported control
 * bits are dropped from the request and reported in *unsupported (may be NULL).
 * -EBUSY: the slot is still queued; -EACCES: not running. */
int sbc_camera_queue(sbc_camera *camera, uint32_t slot, uint64_t cookie,
		     const sbc_controls *controls, uint32_t *unsupported);

/* Stops streaming. Every queued request has completed (cancelled ones included) and sits in the
 * completion queue before this returns. */
int sbc_camera_stop(sbc_camera *camera);

/* An eventfd that becomes readable when completions are waiting; borrowed, owned by the camera.
 * Reading it resets the count; sbc_camera_next_completion does not read it. */
int sbc_camera_event_fd(sbc_camera *camera);

typedef enum sbc_completion_status {
	SBC_REQUEST_COMPLETE = 0,
	SBC_REQUEST_CANCELLED = 1,
	SBC_REQUEST_ERROR = 2,   /* completed, but a buffer reported an error */
	/* A start-up frame: AGC/AWB still converging after start (FrameStartup, from libcamera
	 * 0.5.2; earlier versions dropped these frames instead). Not to be captured. */
	SBC_REQUEST_STARTUP = 3,
} sbc_completion_status;

/* Which metadata fields of sbc_completion were reported. */
typedef enum sbc_metadata_bit {
	SBC_META_SENSOR_TIMESTAMP = 1u << 0,
	SBC_META_EXPOSURE_TIME = 1u << 1,
	SBC_META_ANALOGUE_GAIN = 1u << 2,
	SBC_META_DIGITAL_GAIN = 1u << 3,
	SBC_META_FRAME_DURATION = 1u << 4,
	SBC_META_LENS_POSITION = 1u << 5,
	SBC_META_COLOUR_GAINS = 1u << 6,
	SBC_META_COLOUR_TEMPERATURE = 1u << 7,
	SBC_META_LUX = 1u << 8,
	/* rpi::ControlListSequence: the Raspberry Pi fork names the request whose controls took
	 * effect on this frame (compiled in only where the header defines it). */
	SBC_META_CONTROL_LIST_SEQUENCE = 1u << 9,
	SBC_META_COLOUR_CORRECTION_MATRIX = 1u << 10,
	SBC_META_SENSOR_BLACK_LEVELS = 1u << 11,
	SBC_META_SENSOR_TEMPERATURE = 1u << 12,
	SBC_META_FOCUS_FOM = 1u << 13,
	SBC_META_AF_STATE = 1u << 14,
	/* FrameWallClock: CLOCK_REALTIME at the SensorTimestamp instant (libcamera 0.5.2 on). */
	SBC_META_FRAME_WALL_CLOCK = 1u << 15,
} sbc_metadata_bit;

typedef struct sbc_completion {
	uint32_t slot;
	uint64_t cookie;
	sbc_completion_status status;
	uint32_t stream_count;
	uint32_t sequence;                        /* FrameMetadata::sequence of the first buffer */
	uint32_t request_sequence;                /* Request::sequence(): queued-request count */
	uint64_t buffer_timestamp_ns;             /* FrameMetadata::timestamp of the first buffer */
	uint32_t bytes_used[SBC_MAX_STREAMS];     /* first plane of each stream's buffer */
	uint32_t metadata_set;                    /* OR of sbc_metadata_bit */
	int64_t sensor_timestamp_ns;
	int32_t exposure_time_us;
	float analogue_gain;
	float digital_gain;
	int64_t frame_duration_us;
	float lens_position;
	float colour_gains[2];
	int32_t colour_temperature;
	float lux;
	int64_t control_list_sequence;            /* a Request::sequence(); see the bit above */
	float colour_correction_matrix[9];        /* row-major, camera RGB to sRGB-linear */
	int32_t sensor_black_levels[4];           /* R, Gr, Gb, B in 16-bit units */
	float sensor_temperature;                 /* degrees Celsius */
	int32_t focus_fom;                        /* focus figure of merit */
	int32_t af_state;                         /* controls::AfStateEnum: 0 idle, 1 scanning, 2 focused, 3 failed */
	int64_t frame_wall_clock_ns;              /* CLOCK_REALTIME */
} sbc_completion;

/* True once libcamera reported the camera gone (Camera::disconnected); the event fd is
 * signalled when it happens. Queued requests still come back through the completion queue. */
bool sbc_camera_disconnected(sbc_camera *camera);

/* Pops the oldest completion into *out: 1 when one was popped, 0 when the queue is empty. The
 * slot's buffers belong to the caller until the slot is queued again. Thread-safe. */
int sbc_camera_next_completion(sbc_camera *camera, sbc_completion *out);

#ifdef __cplusplus
}
#endif

#endif /* SHUTTERBUG_BRIDGE_H */
