/*
 * lsname.c — the one rule for logspace names, asked by every input (frames, the --logspaces
 * settings, the --routes rule file): [a-z0-9_-]{1,64}, and not one of the data directory's own
 * folders, since a logspace lives in <data>/<name>/. It owns nothing else.
 */
#include <string.h>

#include "indexd.h"

/*
 * A logspace name: [a-z0-9_-]{1,64}, but not the names of the data directory's
 * own folders (a logspace lives in <data>/<name>/).
 */
int
ls_name_ok(const uint8_t *name, size_t len, const char **why)
{
	if (len == 0 || len > LB_NAME_MAX) {
		*why = "logspace name length not 1..64";
		return (0);
	}
	for (size_t i = 0; i < len; i++) {
		uint8_t c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
			*why = "logspace name not [a-z0-9_-]";
			return (0);
		}
	}
	if ((len == 6 && memcmp(name, "indexd", 6) == 0) ||
	    (len == 7 && memcmp(name, "catalog", 7) == 0) ||
	    (len == 9 && memcmp(name, "collector", 9) == 0) ||
	    (len == 8 && memcmp(name, "accounts", 8) == 0) ||
	    (len == 3 && memcmp(name, "run", 3) == 0) ||
	    (len == 3 && memcmp(name, "tls", 3) == 0) ||
	    (len == 5 && memcmp(name, "spool", 5) == 0)) {
		*why = "reserved logspace name";
		return (0);
	}
	return (1);
}
