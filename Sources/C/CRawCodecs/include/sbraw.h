#ifndef SHUTTERBUG_RAW_H
#define SHUTTERBUG_RAW_H

/* Raw Bayer codecs with no library behind them, shared by the DNG writer and the simulated
 * camera. */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PISP_COMP1, the Raspberry Pi 5's compressed raw (pisp.c): decodes one row of `width`
 * samples to 16 bits (the 2048 black-level offset added back), or codes one (for the simulated
 * Pi 5). A row takes ((width + 7) / 8) * 8 bytes. The decoder reproduces a sample within half
 * the step of the quantisation mode its block needed (8 to 256 in 16-bit units); samples at or
 * below 2048 come back as 2048. Both return 0. */
int sbr_pisp_decompress_row(const uint8_t *src, uint32_t width, uint16_t *out);
int sbr_pisp_compress_row(const uint16_t *src, uint32_t width, uint8_t *dst);

/* The quantisation mode (0 to 3) of each 32-bit word of a compressed row: even pixels, then
 * odd, per block of 8; `modes` holds 2 * ((width + 7) / 8) entries. For tests and figures. */
void sbr_pisp_row_modes(const uint8_t *src, uint32_t width, uint8_t *modes);

#ifdef __cplusplus
}
#endif

#endif
