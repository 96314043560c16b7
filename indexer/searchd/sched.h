/*
 * sched.h — searchd's fair scheduler (sched.c): which waiting request a free worker runs next.
 * It knows callers, queues and counts only; it takes no lock (pool.c holds sd_mtx around every
 * call) and knows nothing of HTTP or the store, so that it is tested alone (tests/t_sched.c).
 */
#ifndef SCHED_H
#define SCHED_H

#include <sys/queue.h>

#include <stddef.h>

#define SCHED_NAME_MAX	128	/* bytes of a caller's name (X-Logbox-Caller) */

struct sched_caller;

/* A request as the scheduler sees it; embedded in the request (struct job). */
struct sched_item {
	TAILQ_ENTRY(sched_item)	 si_entry;
	struct sched_caller	*si_caller;	/* set by sched_push, until sched_done */
};
TAILQ_HEAD(sched_itemq, sched_item);

/* One caller with requests waiting or running; freed when it has neither. */
struct sched_caller {
	TAILQ_ENTRY(sched_caller) sc_all;	/* every caller with requests */
	TAILQ_ENTRY(sched_caller) sc_ring;	/* callers with requests waiting, in turn */
	int			 sc_inring;
	struct sched_itemq	 sc_queue;	/* waiting, oldest first */
	size_t			 sc_nqueued;
	size_t			 sc_nrunning;
	char			 sc_name[SCHED_NAME_MAX + 1];
};

struct sched {
	TAILQ_HEAD(, sched_caller) s_all;
	TAILQ_HEAD(, sched_caller) s_ring;
	size_t			 s_ncallers;
	size_t			 s_nqueued;	/* every caller's */
	size_t			 s_nrunning;
	size_t			 s_max_running;	/* per caller running at once */
	size_t			 s_max_queued;	/* per caller waiting */
	size_t			 s_max_total;	/* waiting, all callers together */
};

/* sched_push's refusals */
#define SCHED_FULL	1		/* s_max_total requests wait already */
#define SCHED_CALLER_FULL 2		/* this caller has s_max_queued waiting */

/* An empty scheduler with these limits (each at least 1). */
void	sched_init(struct sched *s, size_t max_running, size_t max_queued, size_t max_total);

/*
 * Frees every caller. Items still queued are not touched (they belong to the caller of
 * sched_push): take them out with sched_flush first.
 */
void	sched_free(struct sched *s);

/*
 * Queues it for caller (a NUL-terminated name of at most SCHED_NAME_MAX bytes; "" is a name
 * too). Returns 0, SCHED_FULL, SCHED_CALLER_FULL, or ENOMEM; on a refusal it is not queued.
 */
int	sched_push(struct sched *s, const char *caller, struct sched_item *it);

/*
 * The next item to run, taken off its queue and counted as running, or NULL when none may run
 * now (nothing waits, or every caller that waits runs s_max_running already). Callers take
 * turns: the one served goes to the back of the line, so a caller with many requests waiting
 * gets one worker in turn with each other caller, never all of them in a row.
 */
struct sched_item *sched_pop(struct sched *s);

/* it has finished running (it was returned by sched_pop). */
void	sched_done(struct sched *s, struct sched_item *it);

/* Takes any waiting item off its queue, ignoring the limits (stopping); NULL when none. */
struct sched_item *sched_flush(struct sched *s);

#endif /* SCHED_H */
