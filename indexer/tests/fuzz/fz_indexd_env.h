/*
 * fz_indexd_env.h — what the fuzz targets that run indexd's own input code (fz_indexd.c,
 * fz_spool.c) share: indexd's start-up, the parts every input needs (main.c does the same),
 * in a fresh data directory under $TMPDIR that is removed at exit. Each target adds its own
 * input (the FIFO, the spool) after fz_indexd_start().
 */
#ifndef FZ_INDEXD_ENV_H
#define FZ_INDEXD_ENV_H

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <event2/event.h>

#include "indexd.h"

static struct indexd	 env;
static char		 dir[256];	/* the data directory */
static const char	*fz_name;	/* the target's name, for its directory and messages */

static void
fz_indexd_cleanup(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (dir[0] != '\0' && system(cmd) != 0)
		fprintf(stderr, "%s: could not remove %s\n", fz_name, dir);
}

/* indexd with its catalog, event base and hold timer on a fresh data directory named after name. */
static void
fz_indexd_start(const char *name)
{
	const char	*t = getenv("TMPDIR");
	char		 sub[300];

	fz_name = name;
	log_init(IX_NAME, LOGL_WARN);
	indexd_init(&env);
	env.conf.max_memory_mb = 64;
	env.started = now_real_us();
	env.started_mono = now_mono_us();
	snprintf(dir, sizeof(dir), "%s/%s.XXXXXX", t != NULL ? t : "/tmp", name);
	assert(mkdtemp(dir) != NULL);
	atexit(fz_indexd_cleanup);
	env.data = dir;
	snprintf(sub, sizeof(sub), "%s/indexd", dir);
	assert(mkdir(sub, 0750) == 0);	/* (main.c's lock_take makes it) */
	assert((env.base_ev = event_base_new()) != NULL);
	assert(lb_catalog_open(env.data, LB_RDWR, &env.cat) == 0);
	assert((env.ev_hold = evtimer_new(env.base_ev, hold_retry_cb, &env)) != NULL);
}

#endif /* FZ_INDEXD_ENV_H */
