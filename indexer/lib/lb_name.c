/*
 * lb_name.c — the one logspace name rule: [a-z0-9_-]{1,64}, and not one of the data
 * directory's own folders (LB_RESERVED_NAMES), since a logspace lives in <data>/<name>/. The
 * catalog, the hand-off frame, indexd and searchd ask it; rpc/logbox_core/constants.py is the
 * Python copy, pinned to this rule by tests/test_constants_pinned.py. It owns nothing else.
 */
#include <string.h>

#include "lb_format.h"
#include "logbox.h"

static const char *const reserved[] = { LB_RESERVED_NAMES };

int
lb_logspace_name_reserved(const void *name, size_t len)
{
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strlen(reserved[i]) == len && memcmp(name, reserved[i], len) == 0)
			return (1);
	return (0);
}

int
lb_logspace_name_ok(const void *name, size_t len, const char **why)
{
	const unsigned char	*p = name;
	const char		*bad;

	if (len == 0 || len > LB_NAME_MAX) {
		bad = "logspace name length not 1..64";
		goto fail;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = p[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
			bad = "logspace name not [a-z0-9_-]";
			goto fail;
		}
	}
	if (lb_logspace_name_reserved(name, len)) {
		bad = "reserved logspace name";
		goto fail;
	}
	return (1);
 fail:
	if (why != NULL)
		*why = bad;
	return (0);
}
