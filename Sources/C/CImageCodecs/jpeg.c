/* SPDX-License-Identifier: MIT */
/*
 * JPEG straight from YUV 4:2:0 planes (libjpeg's raw-data interface, no colour conversion, as
 * rpicam-apps does), and the EXIF segment through libexif.
 */
#include "sbimage.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <libexif/exif-data.h>

void sbi_free(void *p)
{
	free(p);
}

struct error_trap {
	struct jpeg_error_mgr pub;
	jmp_buf jump;
	char message[JMSG_LENGTH_MAX];
};

static void trap_error_exit(j_common_ptr cinfo)
{
	struct error_trap *t = (struct error_trap *)cinfo->err;
	(*cinfo->err->format_message)(cinfo, t->message);
	longjmp(t->jump, 1);
}

static void quiet_output(j_common_ptr cinfo)
{
	(void)cinfo;
}

int sbi_jpeg_encode(const sbi_yuv420 *im, int quality, const uint8_t *app1, size_t app1_len,
		    uint8_t **out, size_t *capacity, size_t *out_len, char *err, size_t errlen)
{
	if (!im || im->width == 0 || im->height == 0 || im->width > 65500 || im->height > 65500) {
		if (err && errlen)
			snprintf(err, errlen, "JPEG size must be 1...65500 on each side");
		return -EINVAL;
	}
	if (quality < 1 || quality > 100) {
		if (err && errlen)
			snprintf(err, errlen, "JPEG quality must be 1...100, not %d", quality);
		return -EINVAL;
	}

	struct jpeg_compress_struct cinfo;
	struct error_trap trap;
	/* volatile: they change between setjmp and a longjmp back to it. */
	/* libjpeg writes into the caller's buffer and, when it fills, into a larger one it mallocs
	 * (copying what it has); the caller's is then ours to free. */
	unsigned char *volatile buffer = *out && *capacity ? *out : NULL;
	unsigned long size = buffer ? (unsigned long)*capacity : 0;
	uint8_t *volatile pad = NULL;

	cinfo.err = jpeg_std_error(&trap.pub);
	trap.pub.error_exit = trap_error_exit;
	trap.pub.output_message = quiet_output;
	if (setjmp(trap.jump)) {
		if (err && errlen)
			snprintf(err, errlen, "libjpeg: %s", trap.message);
		jpeg_destroy_compress(&cinfo);
		if (buffer != *out)
			free(buffer);
		free(pad);
		return -EIO;
	}
	jpeg_create_compress(&cinfo);
	jpeg_mem_dest(&cinfo, (unsigned char **)&buffer, &size);

	cinfo.image_width = im->width;
	cinfo.image_height = im->height;
	cinfo.input_components = 3;
	cinfo.in_color_space = JCS_YCbCr;
	jpeg_set_defaults(&cinfo);
	jpeg_set_colorspace(&cinfo, JCS_YCbCr);
	cinfo.raw_data_in = TRUE;
	cinfo.comp_info[0].h_samp_factor = 2;
	cinfo.comp_info[0].v_samp_factor = 2;
	cinfo.comp_info[1].h_samp_factor = 1;
	cinfo.comp_info[1].v_samp_factor = 1;
	cinfo.comp_info[2].h_samp_factor = 1;
	cinfo.comp_info[2].v_samp_factor = 1;
	jpeg_set_quality(&cinfo, quality, TRUE);
	cinfo.dct_method = JDCT_ISLOW;
	jpeg_start_compress(&cinfo, TRUE);
	if (app1 && app1_len)
		jpeg_write_marker(&cinfo, JPEG_APP0 + 1, app1, (unsigned int)app1_len);

	/* The raw-data interface reads whole blocks: rows padded to the MCU (16 luma, 8 chroma
	 * samples) and 16 luma rows per call. Rows past the image repeat its last row; a plane
	 * whose stride is too short for the padding is copied into padded rows. */
	const uint32_t cw = (im->width + 1) / 2, ch = (im->height + 1) / 2;
	const uint32_t ypad = (im->width + 15) & ~15u, cpad = (cw + 7) & ~7u;
	const int copy = im->stride[0] < ypad || im->stride[1] < cpad || im->stride[2] < cpad;
	if (copy) {
		pad = malloc((size_t)ypad * 16 + (size_t)cpad * 8 * 2);
		if (!pad) {
			snprintf(trap.message, sizeof(trap.message), "out of memory for padded rows");
			longjmp(trap.jump, 1);
		}
	}
	JSAMPROW yrows[16], urows[8], vrows[8];
	JSAMPARRAY planes[3] = { yrows, urows, vrows };
	for (uint32_t row = 0; row < im->height; row += 16) {
		for (uint32_t i = 0; i < 16; i++) {
			uint32_t y = row + i < im->height ? row + i : im->height - 1;
			const uint8_t *src = im->plane[0] + (size_t)y * im->stride[0];
			if (copy) {
				uint8_t *d = pad + (size_t)i * ypad;
				memcpy(d, src, im->width);
				memset(d + im->width, src[im->width - 1], ypad - im->width);
				yrows[i] = d;
			} else {
				yrows[i] = (JSAMPROW)src;
			}
		}
		for (uint32_t i = 0; i < 8; i++) {
			uint32_t y = row / 2 + i < ch ? row / 2 + i : ch - 1;
			for (int p = 1; p <= 2; p++) {
				const uint8_t *src = im->plane[p] + (size_t)y * im->stride[p];
				JSAMPROW *rows = p == 1 ? urows : vrows;
				if (copy) {
					uint8_t *d = pad + (size_t)ypad * 16 + (size_t)cpad * (8 * (p - 1) + i);
					memcpy(d, src, cw);
					memset(d + cw, src[cw - 1], cpad - cw);
					rows[i] = d;
				} else {
					rows[i] = (JSAMPROW)src;
				}
			}
		}
		jpeg_write_raw_data(&cinfo, planes, 16);
	}
	jpeg_finish_compress(&cinfo);
	jpeg_destroy_compress(&cinfo);
	free(pad);
	if (buffer != *out) {
		free(*out);
		*out = buffer;
		*capacity = size;
	}
	*out_len = size;
	return 0;
}

/* ---- EXIF ---- */

static ExifEntry *entry(ExifData *d, ExifIfd ifd, ExifTag tag, ExifFormat format, unsigned long components)
{
	ExifEntry *e = exif_entry_new();
	if (!e)
		return NULL;
	size_t size = exif_format_get_size(format) * components;
	e->data = calloc(1, size ? size : 1);
	if (!e->data) {
		exif_entry_unref(e);
		return NULL;
	}
	e->tag = tag;
	e->format = format;
	e->components = components;
	e->size = (unsigned int)size;
	exif_content_add_entry(d->ifd[ifd], e);
	exif_entry_unref(e);
	return e;
}

static int put_string(ExifData *d, ExifIfd ifd, ExifTag tag, const char *s)
{
	if (!s)
		return 0;
	size_t n = strlen(s) + 1;
	ExifEntry *e = entry(d, ifd, tag, EXIF_FORMAT_ASCII, n);
	if (!e)
		return -1;
	memcpy(e->data, s, n);
	return 0;
}

static int put_short(ExifData *d, ExifIfd ifd, ExifTag tag, uint16_t v)
{
	ExifEntry *e = entry(d, ifd, tag, EXIF_FORMAT_SHORT, 1);
	if (!e)
		return -1;
	exif_set_short(e->data, exif_data_get_byte_order(d), v);
	return 0;
}

static int put_long(ExifData *d, ExifIfd ifd, ExifTag tag, uint32_t v)
{
	ExifEntry *e = entry(d, ifd, tag, EXIF_FORMAT_LONG, 1);
	if (!e)
		return -1;
	exif_set_long(e->data, exif_data_get_byte_order(d), v);
	return 0;
}

static int put_rational(ExifData *d, ExifIfd ifd, ExifTag tag, uint32_t num, uint32_t den)
{
	ExifEntry *e = entry(d, ifd, tag, EXIF_FORMAT_RATIONAL, 1);
	if (!e)
		return -1;
	ExifRational r = { num, den };
	exif_set_rational(e->data, exif_data_get_byte_order(d), r);
	return 0;
}

static int put_srational(ExifData *d, ExifIfd ifd, ExifTag tag, int32_t num, int32_t den)
{
	ExifEntry *e = entry(d, ifd, tag, EXIF_FORMAT_SRATIONAL, 1);
	if (!e)
		return -1;
	ExifSRational r = { num, den };
	exif_set_srational(e->data, exif_data_get_byte_order(d), r);
	return 0;
}

static int put_undefined(ExifData *d, ExifIfd ifd, ExifTag tag, const void *bytes, size_t n)
{
	ExifEntry *e = entry(d, ifd, tag, EXIF_FORMAT_UNDEFINED, n);
	if (!e)
		return -1;
	memcpy(e->data, bytes, n);
	return 0;
}

/* A positive value as a rational with the most precision that fits 32 bits. */
static void rational(double v, uint32_t *num, uint32_t *den)
{
	uint32_t d = 1;
	while (d < 1000000000u && v * d * 10 < 4294967295.0 && fabs(v * d - round(v * d)) > 1e-9 * v * d)
		d *= 10;
	double n = round(v * d);
	*num = n > 4294967295.0 ? 4294967295u : (uint32_t)n;
	*den = d;
}

int sbi_exif_build(const sbi_photo_facts *f, uint32_t width, uint32_t height,
		   const uint8_t *thumb, size_t thumb_len, uint8_t **out, size_t *out_len,
		   char *err, size_t errlen)
{
	ExifData *d = exif_data_new();
	if (!d) {
		if (err && errlen)
			snprintf(err, errlen, "libexif: out of memory");
		return -ENOMEM;
	}
	exif_data_set_option(d, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
	exif_data_set_data_type(d, EXIF_DATA_TYPE_COMPRESSED);
	exif_data_set_byte_order(d, EXIF_BYTE_ORDER_INTEL);

	int bad = 0;
	bad |= put_string(d, EXIF_IFD_0, EXIF_TAG_MAKE, f->make);
	bad |= put_string(d, EXIF_IFD_0, EXIF_TAG_MODEL, f->model);
	bad |= put_string(d, EXIF_IFD_0, EXIF_TAG_SOFTWARE, f->software);
	bad |= put_string(d, EXIF_IFD_0, EXIF_TAG_IMAGE_DESCRIPTION, f->description);
	bad |= put_string(d, EXIF_IFD_0, EXIF_TAG_DATE_TIME, f->datetime);
	bad |= put_short(d, EXIF_IFD_0, EXIF_TAG_ORIENTATION, 1);
	bad |= put_rational(d, EXIF_IFD_0, EXIF_TAG_X_RESOLUTION, 72, 1);
	bad |= put_rational(d, EXIF_IFD_0, EXIF_TAG_Y_RESOLUTION, 72, 1);
	bad |= put_short(d, EXIF_IFD_0, EXIF_TAG_RESOLUTION_UNIT, 2);
	bad |= put_short(d, EXIF_IFD_0, EXIF_TAG_YCBCR_POSITIONING, 1);

	bad |= put_undefined(d, EXIF_IFD_EXIF, EXIF_TAG_EXIF_VERSION, "0232", 4);
	if (f->exposure_s > 0) {
		uint32_t n, dd;
		rational(f->exposure_s, &n, &dd);
		bad |= put_rational(d, EXIF_IFD_EXIF, EXIF_TAG_EXPOSURE_TIME, n, dd);
	}
	if (f->iso > 0)
		bad |= put_short(d, EXIF_IFD_EXIF, EXIF_TAG_ISO_SPEED_RATINGS,
				 (uint16_t)(f->iso > 65535 ? 65535 : lround(f->iso)));
	bad |= put_string(d, EXIF_IFD_EXIF, EXIF_TAG_DATE_TIME_ORIGINAL, f->datetime);
	bad |= put_string(d, EXIF_IFD_EXIF, EXIF_TAG_SUB_SEC_TIME_ORIGINAL, f->subsec);
	bad |= put_string(d, EXIF_IFD_EXIF, EXIF_TAG_OFFSET_TIME_ORIGINAL, f->offset);
	if (f->has_exposure_bias)
		bad |= put_srational(d, EXIF_IFD_EXIF, EXIF_TAG_EXPOSURE_BIAS_VALUE,
				     (int32_t)lround(f->exposure_bias_ev * 100), 100);
	if (f->subject_distance_m >= 4294967295.0) {
		/* Infinity: numerator 0xFFFFFFFF (EXIF 2.32), over 0 as libtiff writes it in the DNG,
		 * so both formats carry the same bytes and exiftool shows "inf" for both. */
		bad |= put_rational(d, EXIF_IFD_EXIF, EXIF_TAG_SUBJECT_DISTANCE, 0xffffffffu, 0);
	} else if (f->subject_distance_m >= 0) {
		bad |= put_rational(d, EXIF_IFD_EXIF, EXIF_TAG_SUBJECT_DISTANCE,
				    (uint32_t)lround(f->subject_distance_m * 1000), 1000);
	}
	bad |= put_short(d, EXIF_IFD_EXIF, EXIF_TAG_EXPOSURE_MODE, (uint16_t)f->exposure_mode);
	bad |= put_short(d, EXIF_IFD_EXIF, EXIF_TAG_COLOR_SPACE, 1);
	/* Required by EXIF for a compressed image: Y, Cb, Cr, -; and FlashPix 1.0. */
	bad |= put_undefined(d, EXIF_IFD_EXIF, EXIF_TAG_COMPONENTS_CONFIGURATION, "\1\2\3\0", 4);
	bad |= put_undefined(d, EXIF_IFD_EXIF, EXIF_TAG_FLASH_PIX_VERSION, "0100", 4);
	bad |= put_long(d, EXIF_IFD_EXIF, EXIF_TAG_PIXEL_X_DIMENSION, width);
	bad |= put_long(d, EXIF_IFD_EXIF, EXIF_TAG_PIXEL_Y_DIMENSION, height);
	bad |= put_string(d, EXIF_IFD_EXIF, EXIF_TAG_IMAGE_UNIQUE_ID, f->unique_id);

	if (thumb && thumb_len) {
		/* IFD 1 describes the thumbnail; libexif writes its offset and length itself. */
		bad |= put_short(d, EXIF_IFD_1, EXIF_TAG_COMPRESSION, 6);
		bad |= put_rational(d, EXIF_IFD_1, EXIF_TAG_X_RESOLUTION, 72, 1);
		bad |= put_rational(d, EXIF_IFD_1, EXIF_TAG_Y_RESOLUTION, 72, 1);
		bad |= put_short(d, EXIF_IFD_1, EXIF_TAG_RESOLUTION_UNIT, 2);
		d->data = malloc(thumb_len);
		if (d->data) {
			memcpy(d->data, thumb, thumb_len);
			d->size = (unsigned int)thumb_len;
		} else {
			bad = 1;
		}
	}
	if (bad) {
		exif_data_unref(d);
		if (err && errlen)
			snprintf(err, errlen, "libexif: out of memory building the EXIF entries");
		return -ENOMEM;
	}

	unsigned char *buf = NULL;
	unsigned int len = 0;
	exif_data_save_data(d, &buf, &len);
	exif_data_unref(d);
	if (!buf || len == 0) {
		if (err && errlen)
			snprintf(err, errlen, "libexif could not serialise the EXIF data");
		return -EIO;
	}
	if (len > 65533) {
		free(buf);
		if (err && errlen)
			snprintf(err, errlen, "EXIF data of %u bytes exceeds a JPEG segment (65533); the thumbnail is too large", len);
		return -E2BIG;
	}
	*out = buf;
	*out_len = len;
	return 0;
}
