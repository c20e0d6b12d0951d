/*
 * The Raspberry Pi 5's compressed raw format, PISP_COMP1 (the kernel's
 * V4L2_PIX_FMT_PISP_COMP1_*, libcamera's *_PISP_COMP1): each row padded to a multiple of 8
 * pixels; each block of 8 pixels is two little-endian 32-bit words, the even pixels (0, 2, 4,
 * 6) then the odd ones, each coding 4 samples of 16-bit scale with a black-level offset of
 * 2048 taken off. Written from the format's description in the kernel documentation
 * (Documentation/userspace-api/media/v4l/pixfmt-srggb8-pisp-comp.rst).
 *
 * A word's 2 low bits are its quantisation mode:
 *   0: levels 0..320 are multiples of 16, then successive multiples of 32 (to 11232);
 *   1: multiples of 64;  2: multiples of 128;
 *      fields 2, 9, 7, 7, 7 bits, LSB first: mode, min(q1, q2), q2 - q1 + 64, then q0 and q3
 *      each relative to max(0, inner - 64). In mode 2, inner pairs both in 384..511 are q1
 *      then q2 & 127, and an outer sample beside an inner one in 448..511 is coded as q - 384.
 *   3: the escape: 176 levels (0..94 multiples of 256, then multiples of 512, saturating);
 *      (q0, q1) and (q2, q3) each as 2816 * (qa >> 4) + 16 * qb + (qa & 15), in 15 bits.
 */
#include "sbraw.h"


#define PISP_OFFSET 2048

static uint32_t dequantise(uint32_t q, uint32_t mode)
{
	switch (mode) {
	case 0:
		return q <= 320 ? 16 * q : 32 * (q - 160);
	case 1:
		return 64 * q;
	case 2:
		return 128 * q;
	default:
		return q < 95 ? 256 * q : 512 * (q - 47);
	}
}

static uint16_t output(uint32_t v)
{
	v += PISP_OFFSET;
	return (uint16_t)(v > 65535 ? 65535 : v);
}

/* Decodes one word into out[0], out[2], out[4], out[6]. */
static void decode_word(uint32_t w, uint16_t *out)
{
	uint32_t mode = w & 3, q[4];
	if (mode < 3) {
		uint32_t f0 = (w >> 2) & 511, f1 = (w >> 11) & 127, f2 = (w >> 18) & 127, f3 = (w >> 25) & 127;
		if (mode == 2 && f0 >= 384) {
			q[1] = f0;
			q[2] = f1 + 384;
		} else if (f1 >= 64) {
			q[1] = f0;
			q[2] = f0 + f1 - 64;
		} else {
			q[2] = f0;
			q[1] = f0 + 64 - f1;
		}
		q[0] = (mode == 2 && q[1] >= 448) ? f2 + 384 : f2 + (q[1] > 64 ? q[1] - 64 : 0);
		q[3] = (mode == 2 && q[2] >= 448) ? f3 + 384 : f3 + (q[2] > 64 ? q[2] - 64 : 0);
	} else {
		uint32_t a = (w >> 2) & 32767, b = (w >> 17) & 32767;
		q[0] = (a & 15) + 16 * (a / 2816);
		q[1] = (a >> 4) % 176;
		q[2] = (b & 15) + 16 * (b / 2816);
		q[3] = (b >> 4) % 176;
	}
	for (int i = 0; i < 4; i++)
		out[2 * i] = output(dequantise(q[i], mode));
}

static uint32_t read_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int sbr_pisp_decompress_row(const uint8_t *src, uint32_t width, uint16_t *out)
{
	uint16_t block[8];
	for (uint32_t x = 0; x < width; x += 8, src += 8) {
		if (x + 8 <= width) {
			decode_word(read_le32(src), out + x);
			decode_word(read_le32(src + 4), out + x + 1);
		} else {
			decode_word(read_le32(src), block);
			decode_word(read_le32(src + 4), block + 1);
			for (uint32_t k = 0; x + k < width; k++)
				out[x + k] = block[k];
		}
	}
	return 0;
}

/* The nearest level to v in a mode, capped at the mode's top code. */
static uint32_t quantise(uint32_t v, uint32_t mode)
{
	uint32_t q;
	switch (mode) {
	case 0:
		/* 5136 is halfway between the last fine level (5120) and the first coarse (5152). */
		if (v <= 5136) {
			q = (v + 8) / 16;
			return q > 320 ? 320 : q;
		}
		q = (v + 16) / 32 + 160;
		return q > 511 ? 511 : q;
	case 1:
		q = (v + 32) / 64;
		return q > 511 ? 511 : q;
	case 2:
		q = (v + 64) / 128;
		return q > 511 ? 511 : q;
	default:
		/* 24320 is halfway between level 94 (24064) and level 95 (24576). */
		if (v < 24320) {
			q = (v + 128) / 256;
			return q > 94 ? 94 : q;
		}
		q = (v + 256) / 512 + 47;
		return q > 175 ? 175 : q;
	}
}

/* The highest code of a mode: 511 for modes 0 to 2, 175 for the escape. */
static uint32_t top_code(uint32_t mode)
{
	return mode == 3 ? 175 : 511;
}

/*
 * Whether level q of a mode holds v: v lies within half the gap to the neighbouring level on
 * its side (at level 320 of mode 0 that is 8 below and 16 above, where the steps change from
 * 16 to 32). The escape mode holds everything (it saturates).
 */
static int fits(uint32_t v, uint32_t mode, uint32_t q)
{
	if (mode == 3)
		return 1;
	uint32_t d = dequantise(q, mode);
	if (v >= d) {
		uint32_t next = q < top_code(mode) ? dequantise(q + 1, mode) : d + (d - dequantise(q - 1, mode));
		return 2 * (v - d) <= next - d;
	}
	uint32_t prev = q > 0 ? dequantise(q - 1, mode) : 0;
	return 2 * (d - v) <= d - prev;
}

/* Codes 4 samples (16-bit scale, offset already taken off) in the finest mode that holds them. */
static uint32_t encode_word(const uint32_t v[4])
{
	for (uint32_t mode = 0; mode < 3; mode++) {
		uint32_t q[4];
		int ok = 1;
		for (int i = 0; i < 4; i++) {
			q[i] = quantise(v[i], mode);
			ok &= fits(v[i], mode, q[i]);
		}
		if (!ok)
			continue;
		uint32_t f0, f1;
		if (mode == 2 && q[1] >= 384 && q[2] >= 384) {
			f0 = q[1];
			f1 = q[2] & 127;
		} else {
			int diff = (int)q[2] - (int)q[1] + 64;
			if (diff < 0 || diff > 127)
				continue;
			f0 = q[1] < q[2] ? q[1] : q[2];
			f1 = (uint32_t)diff;
		}
		uint32_t base1 = (mode == 2 && q[1] >= 448) ? 384 : (q[1] > 64 ? q[1] - 64 : 0);
		uint32_t base2 = (mode == 2 && q[2] >= 448) ? 384 : (q[2] > 64 ? q[2] - 64 : 0);
		if (q[0] < base1 || q[0] - base1 > 127 || q[3] < base2 || q[3] - base2 > 127)
			continue;
		return mode | f0 << 2 | f1 << 11 | (q[0] - base1) << 18 | (q[3] - base2) << 25;
	}
	uint32_t q[4];
	for (int i = 0; i < 4; i++)
		q[i] = quantise(v[i], 3);
	uint32_t a = 2816 * (q[0] >> 4) + 16 * q[1] + (q[0] & 15);
	uint32_t b = 2816 * (q[2] >> 4) + 16 * q[3] + (q[2] & 15);
	return 3u | a << 2 | b << 17;
}

static void write_le32(uint8_t *p, uint32_t w)
{
	p[0] = (uint8_t)w;
	p[1] = (uint8_t)(w >> 8);
	p[2] = (uint8_t)(w >> 16);
	p[3] = (uint8_t)(w >> 24);
}

int sbr_pisp_compress_row(const uint16_t *src, uint32_t width, uint8_t *dst)
{
	for (uint32_t x = 0; x < width; x += 8, dst += 8) {
		for (uint32_t phase = 0; phase < 2; phase++) {
			uint32_t v[4];
			for (uint32_t i = 0; i < 4; i++) {
				/*
				 * Pad a short last block with its last sample of the same phase (the
				 * same Bayer colour), never the other colour's: a bright red beside a
				 * dark green would force a coarser mode on the greens.
				 */
				uint32_t k = x + phase + 2 * i;
				uint32_t j = k < width ? k : width - 1 - ((width - 1 + k) & 1);
				if (j >= width)
					j = width - 1;
				uint32_t s = src[j];
				v[i] = s > PISP_OFFSET ? s - PISP_OFFSET : 0;
			}
			write_le32(dst + 4 * phase, encode_word(v));
		}
	}
	return 0;
}

void sbr_pisp_row_modes(const uint8_t *src, uint32_t width, uint8_t *modes)
{
	for (uint32_t b = 0; b < 2 * ((width + 7) / 8); b++)
		modes[b] = src[4 * b] & 3;
}
