/*
 * store.c — where frames go: one writer store per logspace, all on the one catalog the process
 * opened read-write, opened when a frame first names the logspace. It owns appends, the commit
 * and fdatasync policy (every commit writes to the kernel; a commit fdatasync()s when the
 * logspace's fsync_ms has passed since the last one, and the tick syncs what is left over),
 * the --max-memory bound (the biggest interval is flushed when the sum passes it) and
 * "holding": when a store cannot take a message (ENOSPC, EIO, a locked logspace...), every
 * input stops being read, the error is logged once and everything is retried every second.
 * Nothing is dropped: what was not stored stays in the FIFO or in a connection's buffer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "indexd.h"

/*
 * The logspace called name[0..len) (already checked by lb_logspace_name_ok), its store opened (and the
 * logspace created) on first use.
 */
int
ls_get(struct indexd *env, const uint8_t *name, size_t len, struct lspace **out)
{
	struct lspace		*l;
	struct lb_lsconf	 conf;
	uint64_t		 first;
	int			 rc;

	if ((l = env->ls_last) != NULL && l->namelen == len && memcmp(l->name, name, len) == 0) {
		*out = l;
		return (0);
	}
	for (size_t i = 0; i < env->nls; i++) {
		l = env->ls[i];
		if (l->namelen == len && memcmp(l->name, name, len) == 0) {
			*out = env->ls_last = l;
			return (0);
		}
	}
	if (env->nls == env->capls) {
		size_t		 cap = env->capls ? env->capls * 2 : 8;
		struct lspace	**n;

		if ((n = reallocarray(env->ls, cap, sizeof(*n))) == NULL)
			return (ENOMEM);
		env->ls = n;
		env->capls = cap;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return (ENOMEM);
	memcpy(l->name, name, len);
	l->namelen = len;
	if ((rc = lb_store_open_writer(env->cat, env->data, l->name, &l->st)) != 0) {
		disk_note(env, rc);
		free(l);
		return (rc);
	}
	if ((rc = lb_catalog_logspace_get(env->cat, l->name, &conf)) != 0) {
		lb_store_close(l->st);
		free(l);
		return (rc);
	}
	lb_store_set_blob_budget(l->st, 0);
	l->fsync_ms = conf.fsync_ms;
	lb_store_range(l->st, &first, &l->next_id);
	l->last_received = LB_NOTIME;
	l->last_sync = now_mono_us();
	env->ls[env->nls++] = l;
	log_info("logspace %s: writing from id %llu (fsync every %u ms)", l->name,
	    (unsigned long long)l->next_id, l->fsync_ms);
	*out = env->ls_last = l;
	return (0);
}

/*
 * Appends m to l. *stored says whether m got an id: a store may take a message and then fail
 * (a flush that followed it), in which case the message is stored and the error is returned.
 */
int
ls_append(struct indexd *env, struct lspace *l, struct lb_msg *m, int *stored)
{
	uint64_t	first, next;
	int		rc;

	m->id = 0;
	rc = lb_store_append(l->st, m);
	if (rc == 0)
		next = l->next_id + 1;
	else
		lb_store_range(l->st, &first, &next);
	disk_note(env, rc);
	*stored = next > l->next_id;
	if (*stored) {
		l->next_id = next;
		l->dirty = 1;
		l->stored++;
		l->last_received = m->received;
		env->stored++;
		if (m->flags & LB_MSG_TRUNCATED)
			env->truncated++;
	}
	return (rc);
}

static int
ls_commit(struct indexd *env, struct lspace *l, int64_t now, int force_sync)
{
	int	sync, rc;

	/*
	 * While the disk is full (or the reserve given up), every commit syncs: a synced commit
	 * replaces the WAL with the records of blocks not yet sealed, so the frames of sealed
	 * blocks do not pile up in it for a whole fsync period and eat the room the store needs.
	 */
	sync = force_sync || l->fsync_ms == 0 || disk_full(env) ||
	    now - l->last_sync >= (int64_t)l->fsync_ms * 1000;
	if (!l->dirty && !(sync && l->unsynced))
		return (0);
	if ((rc = l->dirty ? lb_store_commit(l->st, sync) : lb_store_sync(l->st)) != 0) {
		disk_note(env, rc);
		return (rc);
	}
	l->dirty = 0;
	if (sync) {
		l->unsynced = 0;
		l->last_sync = now;
	} else
		l->unsynced = 1;
	return (0);
}

/*
 * Commits every logspace appended to since its last commit (force_sync: with fdatasync).
 * Returns the first error (after trying them all); the caller holds.
 */
int
ls_commit_dirty(struct indexd *env, int force_sync)
{
	int64_t	now = now_mono_us();
	int	rc, first = 0;

	for (size_t i = 0; i < env->nls; i++) {
		struct lspace *l = env->ls[i];

		if ((rc = ls_commit(env, l, now, force_sync)) != 0) {
			if (first == 0)
				first = rc;
			hold(env, "logspace %s: commit: %s", l->name, lb_strerror(rc));
		}
	}
	return (first);
}

/* The tick: fdatasync()s logspaces whose group-commit period has passed. */
int
ls_sync_due(struct indexd *env)
{
	int64_t	now = now_mono_us();
	int	rc, first = 0;

	for (size_t i = 0; i < env->nls; i++) {
		struct lspace *l = env->ls[i];

		if (!l->unsynced && !l->dirty)
			continue;
		if (now - l->last_sync < (int64_t)l->fsync_ms * 1000)
			continue;
		if ((rc = ls_commit(env, l, now, 1)) != 0) {
			if (first == 0)
				first = rc;
			hold(env, "logspace %s: commit: %s", l->name, lb_strerror(rc));
		}
	}
	return (first);
}

/*
 * The tick: every logspace's interval older than its flush_ms becomes a segment, and a segment
 * written meanwhile is published, also while no message arrives (lb_store_flush_due): the last
 * messages before a quiet spell are indexed within about a second, not at the next message.
 */
int
ls_flush_due(struct indexd *env)
{
	int	rc, first = 0;

	for (size_t i = 0; i < env->nls; i++) {
		struct lspace *l = env->ls[i];

		if ((rc = lb_store_flush_due(l->st)) != 0) {
			disk_note(env, rc);
			hold(env, "logspace %s: flush: %s", l->name, lb_strerror(rc));
			if (first == 0)
				first = rc;
		}
	}
	return (first);
}

size_t
ls_mem_total(struct indexd *env)
{
	size_t	sum = 0;

	for (size_t i = 0; i < env->nls; i++)
		sum += lb_store_mem(env->ls[i]->st);
	return (sum);
}

/* --max-memory: while the intervals together hold more, flush the biggest. */
void
ls_memory(struct indexd *env)
{
	uint64_t	limit = env->conf.max_memory_mb << 20;
	size_t		sum, big, m;
	struct lspace	*l;
	int		rc;

	for (int tries = 0; tries < 4 && (sum = ls_mem_total(env)) > limit; tries++) {
		l = NULL;
		big = 0;
		for (size_t i = 0; i < env->nls; i++)
			if ((m = lb_store_mem(env->ls[i]->st)) > big) {
				big = m;
				l = env->ls[i];
			}
		if (l == NULL)
			return;
		log_debug("memory %zu bytes over --max-memory: flushing logspace %s (%zu bytes)",
		    sum, l->name, big);
		if ((rc = lb_store_flush(l->st)) != 0) {
			disk_note(env, rc);
			hold(env, "logspace %s: flush: %s", l->name, lb_strerror(rc));
			return;
		}
		l->dirty = 0;
		l->unsynced = 0;
		l->last_sync = now_mono_us();
	}
}

/* Commits (synced) and closes every store: final segments. Returns the first error. */
int
ls_close_all(struct indexd *env)
{
	int	rc, first = 0;

	for (size_t i = 0; i < env->nls; i++) {
		struct lspace *l = env->ls[i];

		if ((rc = lb_store_sync(l->st)) != 0) {
			log_warnx("%s: logspace %s: commit: %s", __func__, l->name,
			    lb_strerror(rc));
			if (first == 0)
				first = rc;
		}
		if ((rc = lb_store_close(l->st)) != 0) {
			log_warnx("%s: logspace %s: close: %s", __func__, l->name,
			    lb_strerror(rc));
			if (first == 0)
				first = rc;
		}
		free(l);
	}
	free(env->ls);
	env->ls = NULL;
	env->nls = env->capls = 0;
	env->ls_last = NULL;
	return (first);
}

/*
 * Stops reading every input because a store failed; logs once and retries every second
 * (hold_retry_cb). A second call while holding only keeps the first reason.
 */
void
hold(struct indexd *env, const char *fmt, ...)
{
	struct timeval	tv = { 1, 0 };
	va_list		ap;

	if (env->holding[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(env->holding, sizeof(env->holding), fmt, ap);
	va_end(ap);
	if (env->holding[0] == '\0')
		snprintf(env->holding, sizeof(env->holding), "error");
	log_warnx("holding: %s (inputs are not read; retrying every second)", env->holding);
	inputs_pause(env);
	if (env->ev_hold != NULL)
		evtimer_add(env->ev_hold, &tv);
}

/*
 * Every second while holding: free space above the reserve (disk.c), commit, finish what
 * was taken, read again. The reason stays set while retrying, so a failure in here does not
 * log again. Nothing in here needs a restart: the stores retry what failed (lb_msgfile.c,
 * lb_store.c), and the FIFO's batch is finished by the exactly-once skip rule.
 */
void
hold_retry_cb(int fd, short what, void *arg)
{
	struct indexd	*env = arg;
	struct timeval	 tv = { 1, 0 };
	struct input	*in, *next;

	(void)fd;
	(void)what;
	if (env->holding[0] == '\0')
		return;
	if (disk_check(env) != 0 || ls_commit_dirty(env, 0) != 0 || fifo_resume(env) != 0 ||
	    spool_resume(env) != 0)
		goto still;
	for (in = TAILQ_FIRST(&env->inputs); in != NULL; in = next) {
		next = TAILQ_NEXT(in, in_entry);
		if (in->in_kind == IN_CONN && conn_resume(env, in) != 0)
			goto still;
	}
	log_info("holding ended (was: %s)", env->holding);
	env->holding[0] = '\0';
	disk_hold_ended(env);
	if (!env->stopping)
		inputs_resume(env);
	return;
 still:
	evtimer_add(env->ev_hold, &tv);
}
