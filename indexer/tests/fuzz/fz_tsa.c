/*
 * fz_tsa.c — a day root's time-stamp file (root.tsr, FORMAT.md §14.7) on arbitrary bytes:
 * lb_tsa_check parses it as an RFC 3161 reply and checks it against a digest. Whatever the
 * bytes, it returns a code (0 only for a granted stamp of that digest), never crashes or
 * leaks. The digest is the input's first 32 bytes when there are that many.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"
#include "lb_chain.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t	digest[LB_SHA256_LEN] = { 0 };
	char	why[256];
	int64_t	when;
	int	rc;

	if (size >= LB_SHA256_LEN)
		memcpy(digest, data, LB_SHA256_LEN);
	rc = lb_tsa_check(data, size, digest, NULL, &when, why, sizeof(why));
	if (rc != 0 && rc != LB_ECORRUPT && rc != ENOMEM)
		abort();
	return (0);
}
