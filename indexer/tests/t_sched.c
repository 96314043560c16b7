/*
 * t_sched.c — searchd's fair scheduler (searchd/sched.c) alone: the per-caller cap on running
 * requests, callers served in turn instead of first come first served, the per-caller and total
 * queue limits, callers forgotten once idle, and flushing at stop.
 */
#include "t_helper.h"
#include "sched.h"

#include <errno.h>

struct titem {
	struct sched_item	 it;
	int			 id;
};

static int
pop_id(struct sched *s)
{
	struct sched_item *it = sched_pop(s);

	return (it == NULL ? -1 : ((struct titem *)it)->id);
}

static struct titem *
item_of(struct titem *v, size_t n, int id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].id == id)
			return (&v[i]);
	return (NULL);
}

/*
 * One caller's 8 requests and a cap of 3: 3 run, and then a free worker (a pop) finds nothing
 * of hers to run but takes another caller's request at once, not after her 5 others.
 */
static void
t_cap_and_turns(void **state)
{
	struct sched	s;
	struct titem	a[8], b[2];

	(void)state;
	sched_init(&s, 3, 64, 1024);
	for (int i = 0; i < 8; i++) {
		a[i].id = i;
		assert_int_equal(sched_push(&s, "user:alice", &a[i].it), 0);
	}
	/* Free workers: alice gets her cap, and then nothing may run. */
	assert_int_equal(pop_id(&s), 0);
	assert_int_equal(pop_id(&s), 1);
	assert_int_equal(pop_id(&s), 2);
	assert_int_equal(pop_id(&s), -1);
	assert_int_equal(s.s_nrunning, 3);
	assert_int_equal(s.s_nqueued, 5);
	/* bob arrives behind 5 of alice's: his request runs at the free worker at once. */
	b[0].id = 100;
	b[1].id = 101;
	assert_int_equal(sched_push(&s, "user:bob", &b[0].it), 0);
	assert_int_equal(sched_push(&s, "user:bob", &b[1].it), 0);
	assert_int_equal(pop_id(&s), 100);
	/* bob's first ends: the worker goes to bob again, alice is still at her cap. */
	sched_done(&s, &b[0].it);
	assert_int_equal(pop_id(&s), 101);
	/* One of alice's ends: her fourth runs. */
	sched_done(&s, &a[0].it);
	assert_int_equal(pop_id(&s), 3);
	assert_int_equal(pop_id(&s), -1);
	sched_done(&s, &b[1].it);
	/* bob is forgotten once he has nothing running or waiting; alice is not. */
	assert_int_equal(s.s_ncallers, 1);
	assert_int_equal(pop_id(&s), -1);	/* alice runs 3: her cap */
	for (int i = 1; i < 8; i++) {
		sched_done(&s, &a[i].it);
		if (i < 5)
			assert_int_equal(pop_id(&s), i + 3);
	}
	assert_int_equal(pop_id(&s), -1);
	assert_int_equal(s.s_nrunning, 0);
	assert_int_equal(s.s_nqueued, 0);
	assert_int_equal(s.s_ncallers, 0);
	sched_free(&s);
}

/* Three callers with work waiting are served round robin, oldest first within each. */
static void
t_round_robin(void **state)
{
	struct sched	 s;
	struct titem	 v[9];
	const char	*names[3] = { "a", "b", "-" };
	int		 want[9] = { 0, 1, 2, 3, 4, 5, 6, 7, 8 };

	(void)state;
	sched_init(&s, 100, 64, 1024);
	/* a's three first, then b's three, then -'s three: ids 0,3,6 / 1,4,7 / 2,5,8. */
	for (int c = 0; c < 3; c++)
		for (int k = 0; k < 3; k++) {
			v[c * 3 + k].id = k * 3 + c;
			assert_int_equal(sched_push(&s, names[c], &v[c * 3 + k].it), 0);
		}
	for (int i = 0; i < 9; i++)
		assert_int_equal(pop_id(&s), want[i]);
	assert_int_equal(pop_id(&s), -1);
	for (int i = 0; i < 9; i++)
		sched_done(&s, &item_of(v, 9, i)->it);
	assert_int_equal(s.s_ncallers, 0);
	sched_free(&s);
}

/* A caller's queue full: SCHED_CALLER_FULL for it only; everybody's: SCHED_FULL. */
static void
t_limits(void **state)
{
	struct sched	s;
	struct titem	v[8];

	(void)state;
	sched_init(&s, 1, 2, 4);
	assert_int_equal(sched_push(&s, "a", &v[0].it), 0);
	assert_int_equal(sched_push(&s, "a", &v[1].it), 0);
	assert_int_equal(sched_push(&s, "a", &v[2].it), SCHED_CALLER_FULL);
	/* A running request does not count against the queue. */
	assert_non_null(sched_pop(&s));
	assert_int_equal(sched_push(&s, "a", &v[2].it), 0);
	assert_int_equal(sched_push(&s, "b", &v[3].it), 0);
	assert_int_equal(sched_push(&s, "c", &v[4].it), 0);
	assert_int_equal(sched_push(&s, "d", &v[5].it), SCHED_FULL);
	/* A caller refused is not kept. */
	assert_int_equal(s.s_ncallers, 3);
	sched_free(&s);
	/* A name over SCHED_NAME_MAX bytes cannot be a caller. */
	{
		char long_name[SCHED_NAME_MAX + 2];

		memset(long_name, 'x', sizeof(long_name) - 1);
		long_name[sizeof(long_name) - 1] = '\0';
		sched_init(&s, 1, 2, 4);
		v[6].id = 6;
		assert_int_equal(sched_push(&s, long_name, &v[6].it), ENOMEM);
		long_name[SCHED_NAME_MAX] = '\0';
		assert_int_equal(sched_push(&s, long_name, &v[6].it), 0);
		assert_int_equal(pop_id(&s), v[6].id);
		sched_done(&s, &v[6].it);
		assert_int_equal(s.s_ncallers, 0);
		sched_free(&s);
	}
}

/* Stopping: sched_flush hands back every waiting item, ignoring the caps, then NULL. */
static void
t_flush(void **state)
{
	struct sched		 s;
	struct titem		 v[5];
	struct sched_item	*it;
	int			 n = 0;

	(void)state;
	sched_init(&s, 1, 64, 1024);
	for (int i = 0; i < 5; i++) {
		v[i].id = i;
		assert_int_equal(sched_push(&s, i < 3 ? "a" : "b", &v[i].it), 0);
	}
	assert_int_equal(pop_id(&s), 0);
	assert_int_equal(pop_id(&s), 3);
	while ((it = sched_flush(&s)) != NULL) {
		assert_null(it->si_caller);
		n++;
	}
	assert_int_equal(n, 3);
	assert_int_equal(s.s_nqueued, 0);
	assert_int_equal(s.s_nrunning, 2);
	sched_done(&s, &v[0].it);
	sched_done(&s, &v[3].it);
	assert_int_equal(s.s_ncallers, 0);
	sched_free(&s);
}

T_MAIN(
	cmocka_unit_test(t_cap_and_turns),
	cmocka_unit_test(t_round_robin),
	cmocka_unit_test(t_limits),
	cmocka_unit_test(t_flush))
