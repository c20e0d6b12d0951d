/* SPDX-License-Identifier: Apache-2.0 */
/* PNG through libpng, into memory: 8-bit RGB, for keograms and sheets of a run. */
#include "sbimage.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sink {
	uint8_t *data;
	size_t len, cap;
	int failed;
};

static void sink_write(png_structp png, png_bytep bytes, png_size_t n)
{
	struct sink *s = png_get_io_ptr(png);
	if (s->failed)
		return;
	if (s->len + n > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 65536;
		while (cap < s->len + n)
			cap *= 2;
		uint8_t *p = realloc(s->data, cap);
		if (!p) {
			s->failed = 1;
			return;
		}
		s->data = p;
		s->cap = cap;
	}
	memcpy(s->data + s->len, bytes, n);
	s->len += n;
}

static void sink_flush(png_structp png) { (void)png; }

int sbi_png_encode_rgb(const uint8_t *rgb, uint32_t width, uint32_t height, size_t stride, uint8_t **out, size_t *out_len,
		       char *err, size_t errlen)
{
	if (!rgb || width == 0 || height == 0 || width > 1000000 || height > 65535 || stride < (size_t)width * 3) {
		if (err && errlen)
			snprintf(err, errlen, "PNG size must be 1...1000000 x 1...65535 with a stride of at least 3 x width");
		return -EINVAL;
	}
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	if (!png || !info) {
		png_destroy_write_struct(&png, &info);
		return -ENOMEM;
	}
	struct sink s = { 0 };
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		free(s.data);
		if (err && errlen)
			snprintf(err, errlen, "libpng could not encode the image");
		return -EIO;
	}
	png_set_write_fn(png, &s, sink_write, sink_flush);
	png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
		     PNG_FILTER_TYPE_DEFAULT);
	png_set_sRGB_gAMA_and_cHRM(png, info, PNG_sRGB_INTENT_PERCEPTUAL);
	png_write_info(png, info);
	for (uint32_t y = 0; y < height; y++)
		png_write_row(png, (png_const_bytep)(rgb + (size_t)y * stride));
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	if (s.failed) {
		free(s.data);
		return -ENOMEM;
	}
	*out = s.data;
	*out_len = s.len;
	return 0;
}
