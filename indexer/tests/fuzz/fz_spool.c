/*
 * fz_spool.c — random bytes as a spool file (FORMAT.md §13) through indexd's own spool input:
 * the file is written and closed in the spool directory, and indexd's event loop runs the very
 * code indexd runs on it (inotify, taking, the record reader, resync, torn tails, parsing with
 * lb_syslog_parse, the state file's intent and position, appends through the store, quarantine,
 * the writer test and deletion). indexd's sources are linked in with main() renamed away
 * (Makefile), so nothing is copied. Asserts that indexd never holds on per-record input, never
 * crashes, stores exactly the records the reader finds whole (an oracle built on
 * spool_rec_parse and spool_resync, as a final file is read) whose receive time the store
 * takes, quarantines the others, and deletes the file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "lb_util.h"
#include "fz_indexd_env.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char		 spool[300];
static unsigned		 serial;

/* indexd's start-up with the spool input (main.c does the same). */
static void
setup(void)
{
	fz_indexd_start("fz_spool");
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	env.spool_dir = spool;
	assert(spool_init(&env) == 0);
	assert(spool_recover(&env) == 0);
	inputs_resume(&env);
}

/* What indexd makes of a final file holding buf: records stored (good) and set aside (bad). */
static void
oracle(const uint8_t *buf, size_t len, uint64_t *good, uint64_t *bad)
{
	struct spool_rec r;
	const char	*why;
	size_t		 pos = 0, skip;
	int		 rc;

	*good = *bad = 0;
	while (pos < len) {
		rc = spool_rec_parse(buf + pos, len - pos, &r, &why);
		if (rc == 0) {
			assert(r.size <= len - pos && buf[pos + r.size - 1] == '\n');
			assert(r.hdr + r.len + 1 == r.size && r.listener.len >= 1);
			if (r.rtime > LB_RECEIVED_MAX)
				(*bad)++;
			else
				(*good)++;
			pos += r.size;
			continue;
		}
		skip = spool_resync(buf + pos, len - pos);
		assert(skip >= 1 && skip <= len - pos);
		if (rc == EAGAIN && skip == len - pos)
			break;	/* torn */
		pos += skip;
	}
}

static int
spool_empty(void)
{
	DIR		*d;
	struct dirent	*de;
	int		 n = 0;

	assert((d = opendir(spool)) != NULL);
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return (n == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char		 path[400];
	uint64_t	 good, bad, stored, quarantined;
	int		 fd;

	if (env.base_ev == NULL)
		setup();
	oracle(data, size, &good, &bad);
	stored = env.stored;
	quarantined = env.quarantined;
	snprintf(path, sizeof(path), "%s/20261122T150614.f%u.lbs", spool, serial++);
	assert((fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640)) != -1);
	assert(lb_write_all(fd, data, size) == 0);
	assert(close(fd) == 0);
	for (int i = 0; i < 100000 && !spool_empty(); i++) {
		assert(env.holding[0] == '\0');
		event_base_loop(env.base_ev, EVLOOP_ONCE);
	}
	assert(spool_empty());
	assert(env.holding[0] == '\0');
	assert(env.stored - stored == good);
	assert(env.quarantined - quarantined == bad);
	return (0);
}
