/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sbshim.h - glibc calls Swift's Glibc module does not import (they live in headers outside
 * its module map). Each shim is a one-line static inline; remove one when Glibc exports it.
 */
#ifndef SBSHIM_H
#define SBSHIM_H

#include <stddef.h>

#ifdef __linux__
#include <malloc.h>
#endif

/* Bytes handed out by malloc and not yet freed (mallinfo2's uordblks); 0 where unknown. */
static inline size_t sbshim_heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	return mallinfo2().uordblks;
#else
	return 0;
#endif
}

#endif /* SBSHIM_H */
