/* SPDX-License-Identifier: MIT */
/*
 * Shutterbug image codecs: DNG through libtiff, JPEG through libjpeg(-turbo), EXIF through
 * libexif. Plain C so Swift can call it; no call keeps state between calls, every call may run
 * on any thread at the same time as others.
 *
 * Errors: functions return 0 or a negative errno (-EIO when the library failed without one)
 * and, when `err` is given, a sentence saying what failed.
 */
#ifndef SHUTTERBUG_IMAGE_H
#define SHUTTERBUG_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The truths about one photo that both file formats record. Strings may be NULL (omitted). */
typedef struct sbi_photo_facts {
	const char *make;          /* "Raspberry Pi" */
	const char *model;         /* sensor model, "imx477" */
	const char *unique_model;  /* DNG UniqueCameraModel */
	const char *software;
	const char *description;   /* ImageDescription: capture, bracket step */
	const char *unique_id;     /* ImageUniqueID: 32 hex digits */
	const char *datetime;      /* "YYYY:MM:DD HH:MM:SS", local time of the frame's exposure */
	const char *subsec;        /* fraction of that second, "123" = 0.123 s */
	const char *offset;        /* UTC offset of datetime, "+01:00" */
	double exposure_s;         /* <= 0: unknown */
	double iso;                /* <= 0: unknown */
	double subject_distance_m; /* < 0: unknown; >= 4294967295: infinity */
	double exposure_bias_ev;   /* used when has_exposure_bias */
	int has_exposure_bias;
	int exposure_mode;         /* EXIF ExposureMode: 0 auto, 1 manual, 2 auto bracket */
} sbi_photo_facts;

/* How raw rows sit in memory: 8-bit, 16-bit little-endian containers, or MIPI CSI-2 packed
 * (RAW10: 4 samples in 5 bytes; RAW12: 2 in 3). */
typedef enum sbi_packing {
	SBI_PACKING_NONE = 0,
	SBI_PACKING_CSI2 = 1,
	/* Raspberry Pi 5 PISP_COMP1: 8 bytes per 8 pixels, 16-bit samples out (bits = 16). */
	SBI_PACKING_PISP_COMP1 = 2,
} sbi_packing;


/* Unpacks one row of `width` samples to 16 bits (at their native depth). 0, or -EINVAL for a
 * depth or packing it does not know. */
int sbi_unpack_row(const uint8_t *src, uint32_t width, uint32_t bits, sbi_packing packing, uint16_t *out);

/* A raw Bayer frame as the camera delivered it. */
typedef struct sbi_dng_image {
	uint32_t width;
	uint32_t height;
	const uint8_t *data;       /* first row */
	size_t stride;             /* bytes from one row to the next */
	uint32_t bits;             /* 8, 10, 12 or 16 */
	sbi_packing packing;
	uint8_t cfa[4];            /* TIFF CFAPattern: 0 red, 1 green, 2 blue; 2x2 row by row */
	uint32_t white_level;
	float black_level[4];      /* per CFA site */
	float colour_matrix[9];    /* ColorMatrix1: XYZ (D65) to camera, row-major */
	float as_shot_neutral[3];
	const uint8_t *thumb_rgb;  /* 8-bit RGB preview, may be NULL */
	uint32_t thumb_width;
	uint32_t thumb_height;
} sbi_dng_image;

/* Writes a DNG 1.4 to `fd` (opened read-write, empty): IFD 0 the RGB preview, its SubIFD the
 * raw CFA image (16-bit, unpacked strip by strip as it is written, with write-back started
 * after each strip so the disk works while the next is unpacked), an EXIF IFD with the facts.
 * `fd` stays open; the caller syncs and closes it. */
int sbi_dng_write(int fd, const sbi_dng_image *image, const sbi_photo_facts *facts,
		  char *err, size_t errlen);

/* A YUV 4:2:0 frame (full-range BT.601, as JPEG wants), three planes. */
typedef struct sbi_yuv420 {
	uint32_t width;
	uint32_t height;
	const uint8_t *plane[3];
	uint32_t stride[3];
} sbi_yuv420;

/* Encodes `image` to a baseline JPEG in memory with quality 1..100, straight from the planes
 * (no colour conversion). `app1` (may be NULL) is written as the APP1 segment, e.g. EXIF.
 *
 * The output goes into *buffer (malloc'ed, *capacity bytes; NULL and 0 to start), which is
 * reused from call to call: when it is too small it is replaced by a larger one (the old one
 * freed) and *capacity updated. *out_len is the JPEG's length. Free the buffer with sbi_free(). */
int sbi_jpeg_encode(const sbi_yuv420 *image, int quality, const uint8_t *app1, size_t app1_len,
		    uint8_t **buffer, size_t *capacity, size_t *out_len, char *err, size_t errlen);

/* Builds an EXIF APP1 payload ("Exif\0\0" + TIFF) with the facts, the pixel dimensions and,
 * when given, a JPEG thumbnail in IFD 1. On success *out is malloc'ed; free with sbi_free(). */
int sbi_exif_build(const sbi_photo_facts *facts, uint32_t width, uint32_t height,
		   const uint8_t *thumb_jpeg, size_t thumb_len, uint8_t **out, size_t *out_len,
		   char *err, size_t errlen);

/* Encodes 8-bit RGB rows (`stride` bytes apart) as a PNG (sRGB) in memory. On success *out is
 * malloc'ed; free with sbi_free(). */
int sbi_png_encode_rgb(const uint8_t *rgb, uint32_t width, uint32_t height, size_t stride, uint8_t **out, size_t *out_len,
		       char *err, size_t errlen);

void sbi_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* SHUTTERBUG_IMAGE_H */
