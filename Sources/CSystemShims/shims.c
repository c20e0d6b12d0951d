/* The shims are static inline in include/sbshim.h; this file gives the target a source. */
