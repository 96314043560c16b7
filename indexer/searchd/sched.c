/*
 * sched.c — the order in which searchd's workers take waiting requests: fair between callers.
 * It owns the per-caller queues and counts; pool.c owns the lock, the threads and the jobs.
 *
 * The one idea: a request waits in its caller's queue, not in one line for everybody, and the
 * callers that have requests waiting take turns (a ring): a free worker serves the first
 * caller in the ring that is below its cap of running requests, and that caller goes to the
 * back of the ring. So one caller's eight heavy queries take at most s_max_running workers,
 * and another caller's count starts at the next free worker instead of behind all eight. A
 * caller is looked up by name (X-Logbox-Caller, or "" for requests without one) among those
 * that have requests queued or running, and forgotten once it has none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched.h"

void
sched_init(struct sched *s, size_t max_running, size_t max_queued, size_t max_total)
{
	memset(s, 0, sizeof(*s));
	TAILQ_INIT(&s->s_all);
	TAILQ_INIT(&s->s_ring);
	s->s_max_running = max_running > 0 ? max_running : 1;
	s->s_max_queued = max_queued > 0 ? max_queued : 1;
	s->s_max_total = max_total > 0 ? max_total : 1;
}

static void
caller_forget(struct sched *s, struct sched_caller *c)
{
	if (c->sc_inring)
		TAILQ_REMOVE(&s->s_ring, c, sc_ring);
	TAILQ_REMOVE(&s->s_all, c, sc_all);
	s->s_ncallers--;
	free(c);
}

void
sched_free(struct sched *s)
{
	struct sched_caller *c;

	while ((c = TAILQ_FIRST(&s->s_all)) != NULL)
		caller_forget(s, c);
	s->s_nqueued = s->s_nrunning = 0;
}

static struct sched_caller *
caller_get(struct sched *s, const char *name)
{
	struct sched_caller	*c;
	size_t			 len = strlen(name);

	TAILQ_FOREACH(c, &s->s_all, sc_all)
		if (strcmp(c->sc_name, name) == 0)
			return (c);
	if (len > SCHED_NAME_MAX || (c = calloc(1, sizeof(*c))) == NULL)
		return (NULL);
	memcpy(c->sc_name, name, len + 1);
	TAILQ_INIT(&c->sc_queue);
	TAILQ_INSERT_TAIL(&s->s_all, c, sc_all);
	s->s_ncallers++;
	return (c);
}

int
sched_push(struct sched *s, const char *caller, struct sched_item *it)
{
	struct sched_caller *c;

	if (s->s_nqueued >= s->s_max_total)
		return (SCHED_FULL);
	if ((c = caller_get(s, caller)) == NULL)
		return (ENOMEM);
	if (c->sc_nqueued >= s->s_max_queued)
		return (SCHED_CALLER_FULL);	/* (c has requests: it is not new) */
	it->si_caller = c;
	TAILQ_INSERT_TAIL(&c->sc_queue, it, si_entry);
	c->sc_nqueued++;
	s->s_nqueued++;
	if (!c->sc_inring) {
		TAILQ_INSERT_TAIL(&s->s_ring, c, sc_ring);
		c->sc_inring = 1;
	}
	return (0);
}

/* Takes c's oldest waiting item; c leaves the ring when nothing of it waits any more. */
static struct sched_item *
caller_take(struct sched *s, struct sched_caller *c)
{
	struct sched_item *it = TAILQ_FIRST(&c->sc_queue);

	TAILQ_REMOVE(&c->sc_queue, it, si_entry);
	c->sc_nqueued--;
	s->s_nqueued--;
	TAILQ_REMOVE(&s->s_ring, c, sc_ring);
	c->sc_inring = 0;
	if (c->sc_nqueued > 0) {
		TAILQ_INSERT_TAIL(&s->s_ring, c, sc_ring);
		c->sc_inring = 1;
	}
	return (it);
}

struct sched_item *
sched_pop(struct sched *s)
{
	struct sched_caller *c;

	TAILQ_FOREACH(c, &s->s_ring, sc_ring)
		if (c->sc_nrunning < s->s_max_running) {
			c->sc_nrunning++;
			s->s_nrunning++;
			return (caller_take(s, c));
		}
	return (NULL);
}

void
sched_done(struct sched *s, struct sched_item *it)
{
	struct sched_caller *c = it->si_caller;

	it->si_caller = NULL;
	if (c == NULL)
		return;
	c->sc_nrunning--;
	s->s_nrunning--;
	if (c->sc_nrunning == 0 && c->sc_nqueued == 0)
		caller_forget(s, c);
}

struct sched_item *
sched_flush(struct sched *s)
{
	struct sched_caller	*c;
	struct sched_item	*it;

	if ((c = TAILQ_FIRST(&s->s_ring)) == NULL)
		return (NULL);
	it = caller_take(s, c);
	it->si_caller = NULL;
	if (c->sc_nrunning == 0 && c->sc_nqueued == 0)
		caller_forget(s, c);
	return (it);
}
