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
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "indexd.h"
#include "lb_util.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct indexd	 env;
static char		 dir[256], spool[300];
static unsigned		 serial;

static void
cleanup(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (dir[0] != '\0' && system(cmd) != 0)
		fprintf(stderr, "fz_spool: could not remove %s\n", dir);
}

static void
setup(void)
{
	const char	*t = getenv("TMPDIR");
	char		 sub[300];

	log_init(IX_NAME, LOGL_WARN);
	indexd_init(&env);
	env.conf.max_memory_mb = 64;
	env.started = now_real_us();
	env.started_mono = now_mono_us();
	snprintf(dir, sizeof(dir), "%s/fz_spool.XXXXXX", t != NULL ? t : "/tmp");
	assert(mkdtemp(dir) != NULL);
	atexit(cleanup);
	env.data = dir;
	snprintf(sub, sizeof(sub), "%s/indexd", dir);
	assert(mkdir(sub, 0750) == 0);
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	env.spool_dir = spool;
	assert((env.base_ev = event_base_new()) != NULL);
	assert(lb_catalog_open(env.data, LB_RDWR, &env.cat) == 0);
	assert((env.ev_hold = evtimer_new(env.base_ev, hold_retry_cb, &env)) != NULL);
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
