/*
 * t_store_writer.c — the two store calls indexd added for its writers: lb_store_mem (the open
 * interval's index memory, what --max-memory adds up) and lb_store_sync (a group commit's
 * timer: fdatasync what unsynced commits wrote). What is checked is what a caller can see:
 * memory grows with appends and drops after a flush, sync keeps every committed message and
 * does nothing on a store with nothing to sync, readers report no memory.
 */
#include <errno.h>

#include "t_helper.h"

static void
append_n(struct lb_store *st, int n, int64_t t0)
{
	char		buf[128];
	struct lb_msg	m;

	for (int i = 0; i < n; i++) {
		memset(&m, 0, sizeof(m));
		snprintf(buf, sizeof(buf), "message %d with words alpha%d beta%d", i, i % 97, i);
		m.message.p = (const uint8_t *)buf;
		m.message.len = strlen(buf);
		m.received = t0 + i;
		m.timestamp = LB_NOTIME;
		m.facility = m.severity = LB_NOVALUE;
		assert_ok(lb_store_append(st, &m));
	}
}

static void
test_mem_and_sync(void **state)
{
	char			 dir[256];
	struct lb_catalog	*cat;
	struct lb_store		*st, *rd;
	uint64_t		 first, next;
	int64_t			 t0 = 1795359974000000LL;
	size_t			 mem;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	assert_ok(lb_store_open_writer(cat, dir, "main", &st));
	assert_int_equal(lb_store_mem(st), 0);
	assert_ok(lb_store_sync(st));			/* nothing appended: nothing to do */

	append_n(st, 20000, t0);
	mem = lb_store_mem(st);
	assert_true(mem > 0);
	assert_ok(lb_store_commit(st, 0));
	assert_ok(lb_store_sync(st));			/* the unsynced commit */
	assert_ok(lb_store_sync(st));			/* and again: nothing left */
	append_n(st, 10, t0 + 20000);
	assert_ok(lb_store_sync(st));			/* appended, not committed: commits */
	lb_store_range(st, &first, &next);
	assert_int_equal(next, 20011);

	assert_ok(lb_store_flush(st));
	assert_true(lb_store_mem(st) < mem);

	assert_ok(lb_store_open_reader(cat, dir, "main", &rd));
	assert_int_equal(lb_store_mem(rd), 0);
	assert_int_equal(lb_store_sync(rd), EBADF);
	lb_store_range(rd, &first, &next);
	assert_int_equal(next, 20011);
	assert_ok(lb_store_close(rd));
	assert_ok(lb_store_close(st));
	lb_catalog_close(cat);
	t_rmtree(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mem_and_sync),
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
