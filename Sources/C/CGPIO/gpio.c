/* The wrappers are static inline in include/sbgpio.h; this file gives the target a source. */
