/* SPDX-License-Identifier: MIT */
/*
 * DNG through libtiff, laid out as rpicam-apps and most raw converters expect: IFD 0 is an RGB
 * preview (NewSubFileType 1) carrying the DNG and camera tags, its SubIFD the raw CFA image,
 * and an EXIF IFD the capture facts.
 */
#define _GNU_SOURCE
#include "sbimage.h"
#include "sbraw.h"

#include <endian.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <tiffio.h>

/* libtiff reports through a process-wide handler; keep each thread's last message apart. */
static _Thread_local char tiff_message[256];
static _Thread_local int tiff_errno;

static void tiff_error(const char *module, const char *fmt, va_list ap)
{
	char text[200];
	tiff_errno = errno;
	vsnprintf(text, sizeof(text), fmt, ap);
	snprintf(tiff_message, sizeof(tiff_message), "%s%s%s", module ? module : "", module ? ": " : "", text);
}

static void tiff_warning(const char *module, const char *fmt, va_list ap)
{
	(void)module;
	(void)fmt;
	(void)ap;
}

static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

static void install_handlers(void)
{
	TIFFSetErrorHandler(tiff_error);
	TIFFSetWarningHandler(tiff_warning);
}

static int fail(char *err, size_t errlen, const char *what)
{
	int e = tiff_errno ? tiff_errno : errno;
	if (e == 0)
		e = EIO;
	if (err && errlen)
		snprintf(err, errlen, "%s: %s%s%s", what, e != EIO ? strerror(e) : "",
			 e != EIO && tiff_message[0] ? " (" : "", tiff_message[0] ? tiff_message : "");
	if (err && errlen && e != EIO && tiff_message[0])
		strncat(err, ")", errlen - strlen(err) - 1);
	return -e;
}

int sbi_unpack_row(const uint8_t *src, uint32_t width, uint32_t bits, sbi_packing packing, uint16_t *out)
{
	uint32_t i = 0;
	if (packing == SBI_PACKING_CSI2 && bits == 10) {
		for (; i + 4 <= width; i += 4, src += 5) {
			uint8_t low = src[4];
			out[i] = (uint16_t)(src[0] << 2 | (low & 3));
			out[i + 1] = (uint16_t)(src[1] << 2 | ((low >> 2) & 3));
			out[i + 2] = (uint16_t)(src[2] << 2 | ((low >> 4) & 3));
			out[i + 3] = (uint16_t)(src[3] << 2 | (low >> 6));
		}
		for (uint32_t k = 0; i + k < width; k++)
			out[i + k] = (uint16_t)(src[k] << 2 | ((src[width - i] >> (2 * k)) & 3));
	} else if (packing == SBI_PACKING_CSI2 && bits == 12) {
		for (; i + 2 <= width; i += 2, src += 3) {
			out[i] = (uint16_t)(src[0] << 4 | (src[2] & 0xf));
			out[i + 1] = (uint16_t)(src[1] << 4 | (src[2] >> 4));
		}
		if (i < width)
			out[i] = (uint16_t)(src[0] << 4 | (src[1] & 0xf));
	} else if (packing == SBI_PACKING_PISP_COMP1 && bits == 16) {
		return sbr_pisp_decompress_row(src, width, out);
	} else if (packing == SBI_PACKING_NONE && bits <= 8) {
		for (; i < width; i++)
			out[i] = src[i];
	} else if (packing == SBI_PACKING_NONE && bits <= 16) {
		memcpy(out, src, (size_t)width * 2);
	} else {
		return -EINVAL;
	}
	return 0;
}

static void set_string(TIFF *tif, uint32_t tag, const char *s)
{
	if (s)
		TIFFSetField(tif, tag, s);
}

#if __BYTE_ORDER != __LITTLE_ENDIAN
#error "raw strips are written as they sit in memory; a big-endian host needs TIFFWriteEncodedStrip"
#endif

int sbi_dng_write(int fd, const sbi_dng_image *im, const sbi_photo_facts *f, char *err, size_t errlen)
{
	pthread_once(&handlers_once, install_handlers);
	tiff_message[0] = 0;
	tiff_errno = 0;
	errno = 0;

	/* TIFFClose closes its descriptor; give it a duplicate so the caller keeps `fd`. */
	int own = dup(fd);
	if (own < 0)
		return fail(err, errlen, "cannot duplicate the file descriptor");
	TIFF *tif = TIFFFdOpen(own, "dng", "w");
	if (!tif) {
		close(own);
		return fail(err, errlen, "libtiff cannot open the file");
	}

	static const uint8_t dng_version[4] = { 1, 4, 0, 0 };
	static const uint8_t dng_backward[4] = { 1, 1, 0, 0 };
	const uint16_t repeat_dim[2] = { 2, 2 };
	uint64_t sub_ifd = 0, exif_ifd = 0;
	uint16_t *strip_buffer = NULL;
	int ret = 0;

	/* IFD 0: the preview, and the tags that describe the camera. */
	const int has_thumb = im->thumb_rgb && im->thumb_width && im->thumb_height;
	TIFFSetField(tif, TIFFTAG_SUBFILETYPE, FILETYPE_REDUCEDIMAGE);
	TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, has_thumb ? im->thumb_width : 1);
	TIFFSetField(tif, TIFFTAG_IMAGELENGTH, has_thumb ? im->thumb_height : 1);
	TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
	TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
	TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
	TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_NONE);
	TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
	TIFFSetField(tif, TIFFTAG_ORIENTATION, ORIENTATION_TOPLEFT);
	set_string(tif, TIFFTAG_MAKE, f->make);
	set_string(tif, TIFFTAG_MODEL, f->model);
	set_string(tif, TIFFTAG_SOFTWARE, f->software);
	set_string(tif, TIFFTAG_IMAGEDESCRIPTION, f->description);
	set_string(tif, TIFFTAG_DATETIME, f->datetime);
	TIFFSetField(tif, TIFFTAG_DNGVERSION, dng_version);
	TIFFSetField(tif, TIFFTAG_DNGBACKWARDVERSION, dng_backward);
	set_string(tif, TIFFTAG_UNIQUECAMERAMODEL, f->unique_model ? f->unique_model : f->model);
	TIFFSetField(tif, TIFFTAG_COLORMATRIX1, 9, im->colour_matrix);
	TIFFSetField(tif, TIFFTAG_ASSHOTNEUTRAL, 3, im->as_shot_neutral);
	TIFFSetField(tif, TIFFTAG_CALIBRATIONILLUMINANT1, 21); /* D65 */
	TIFFSetField(tif, TIFFTAG_SUBIFD, 1, &sub_ifd);
	TIFFSetField(tif, TIFFTAG_EXIFIFD, exif_ifd);
	if (has_thumb) {
		for (uint32_t y = 0; y < im->thumb_height; y++) {
			if (TIFFWriteScanline(tif, (void *)(im->thumb_rgb + (size_t)y * im->thumb_width * 3), y, 0) != 1) {
				ret = fail(err, errlen, "cannot write the DNG preview");
				goto out;
			}
		}
	} else {
		uint8_t black[3] = { 0, 0, 0 };
		if (TIFFWriteScanline(tif, black, 0, 0) != 1) {
			ret = fail(err, errlen, "cannot write the DNG preview");
			goto out;
		}
	}
	if (!TIFFWriteDirectory(tif)) {
		ret = fail(err, errlen, "cannot write the DNG's first directory");
		goto out;
	}

	/* The raw image: libtiff makes the directory written after one with SubIFD set (count 1)
	 * that SubIFD and patches its offset into IFD 0 itself. */
	TIFFSetField(tif, TIFFTAG_SUBFILETYPE, 0);
	TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, im->width);
	TIFFSetField(tif, TIFFTAG_IMAGELENGTH, im->height);
	TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 16);
	TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
	TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_CFA);
	TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_NONE);
	TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
	/* Strips of about 1 MiB, written raw (the samples are already what an uncompressed
	 * little-endian strip holds): one write() per strip, no copy through libtiff's buffer. */
	uint32_t rows_per_strip = (uint32_t)((1u << 20) / ((size_t)im->width * 2));
	if (rows_per_strip < 1)
		rows_per_strip = 1;
	if (rows_per_strip > im->height)
		rows_per_strip = im->height;
	TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, rows_per_strip);
	TIFFSetField(tif, TIFFTAG_CFAREPEATPATTERNDIM, repeat_dim);
	TIFFSetField(tif, TIFFTAG_CFAPATTERN, 4, im->cfa);
	TIFFSetField(tif, TIFFTAG_BLACKLEVELREPEATDIM, repeat_dim);
	TIFFSetField(tif, TIFFTAG_BLACKLEVEL, 4, im->black_level);
	TIFFSetField(tif, TIFFTAG_WHITELEVEL, 1, &im->white_level);
	strip_buffer = malloc((size_t)rows_per_strip * im->width * 2);
	if (!strip_buffer) {
		errno = ENOMEM;
		ret = fail(err, errlen, "no memory for a DNG strip");
		goto out;
	}
	for (uint32_t y = 0, strip = 0; y < im->height; y += rows_per_strip, strip++) {
		uint32_t rows = im->height - y < rows_per_strip ? im->height - y : rows_per_strip;
		for (uint32_t r = 0; r < rows; r++) {
			if (sbi_unpack_row(im->data + (size_t)(y + r) * im->stride, im->width, im->bits, im->packing,
					   strip_buffer + (size_t)r * im->width) != 0) {
				errno = EINVAL;
				ret = fail(err, errlen, "unknown raw packing");
				goto out;
			}
		}
		tmsize_t bytes = (tmsize_t)rows * im->width * 2;
		if (TIFFWriteRawStrip(tif, strip, strip_buffer, bytes) != bytes) {
			ret = fail(err, errlen, "cannot write the DNG raw image");
			goto out;
		}
		/* Start write-back now, so the disk writes this strip while the next is unpacked
		 * and the final fsync has little left to wait for. */
		sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	}
	if (!TIFFWriteDirectory(tif)) {
		ret = fail(err, errlen, "cannot write the DNG raw directory");
		goto out;
	}

	/* EXIF. */
	if (TIFFCreateEXIFDirectory(tif) != 0) {
		ret = fail(err, errlen, "cannot create the EXIF directory");
		goto out;
	}
	if (f->exposure_s > 0)
		TIFFSetField(tif, EXIFTAG_EXPOSURETIME, f->exposure_s);
	if (f->iso > 0) {
		uint16_t iso = (uint16_t)(f->iso > 65535 ? 65535 : lround(f->iso));
		TIFFSetField(tif, EXIFTAG_ISOSPEEDRATINGS, 1, &iso);
	}
	set_string(tif, EXIFTAG_DATETIMEORIGINAL, f->datetime);
	set_string(tif, EXIFTAG_SUBSECTIMEORIGINAL, f->subsec);
	set_string(tif, EXIFTAG_OFFSETTIMEORIGINAL, f->offset);
	if (f->subject_distance_m >= 0)
		TIFFSetField(tif, EXIFTAG_SUBJECTDISTANCE, f->subject_distance_m);
	if (f->has_exposure_bias)
		TIFFSetField(tif, EXIFTAG_EXPOSUREBIASVALUE, f->exposure_bias_ev);
	TIFFSetField(tif, EXIFTAG_EXPOSUREMODE, f->exposure_mode);
	set_string(tif, EXIFTAG_IMAGEUNIQUEID, f->unique_id);
	if (!TIFFWriteCustomDirectory(tif, &exif_ifd)) {
		ret = fail(err, errlen, "cannot write the EXIF directory");
		goto out;
	}

	/* Back to IFD 0 to fill in where the EXIF IFD went (its SubIFD offset is already there). */
	if (!TIFFSetDirectory(tif, 0)) {
		ret = fail(err, errlen, "cannot reread the DNG's first directory");
		goto out;
	}
	TIFFSetField(tif, TIFFTAG_EXIFIFD, exif_ifd);
	if (!TIFFRewriteDirectory(tif) || !TIFFFlush(tif)) {
		ret = fail(err, errlen, "cannot finish the DNG");
		goto out;
	}
out:
	TIFFClose(tif);
	free(strip_buffer);
	return ret;
}
