/*
 * t_store_writer.c — the store calls indexd added for its writers: lb_store_mem (the open
 * interval's index memory, what --max-memory adds up), lb_store_sync (a group commit's
 * timer: fdatasync what unsynced commits wrote), lb_store_set_delims (new delimiters for the
 * messages stored from then on) and, for readers of a logspace whose old days retention
 * removes, lb_store_refresh. What is checked is what a caller can see: memory grows with
 * appends and drops after a flush, sync keeps every committed message and does nothing on a
 * store with nothing to sync, readers report no memory; messages keep the tokens they were
 * stored with, in the tail and in segments, before and after a reopen; a reader's range follows
 * a removed day once refreshed. And a segment the segment thread could not write is written
 * again by a later flush on the same handle, with nothing lost or indexed twice.
 */
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

static void
append_one(struct lb_store *st, const char *text, int64_t t)
{
	struct lb_msg m;

	memset(&m, 0, sizeof(m));
	m.message.p = (const uint8_t *)text;
	m.message.len = strlen(text);
	m.received = t;
	m.timestamp = LB_NOTIME;
	m.facility = m.severity = LB_NOVALUE;
	assert_ok(lb_store_append(st, &m));
}

/* The ids holding text token tok, as "1,2," (or "" when none). */
static const char *
ids_of(struct lb_store *st, const char *tok)
{
	static char		out[256];
	uint8_t			term[128];
	struct lb_postings	p = { NULL, 0, 0 };
	size_t			o = 0;
	int			rc;

	term[0] = LB_NS_TEXT;
	memcpy(term + 1, tok, strlen(tok));
	out[0] = '\0';
	rc = lb_store_lookup(st, term, strlen(tok) + 1, 0, &p);
	if (rc == LB_ENOTFOUND)
		return (out);
	assert_ok(rc);
	for (size_t i = 0; i < p.n; i++)
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%llu,",
		    (unsigned long long)p.ids[i]);
	lb_postings_free(&p);
	return (out);
}

static size_t
nsegs(struct lb_catalog *cat)
{
	struct lb_segref	*refs = NULL;
	size_t			 n = 0;

	assert_ok(lb_catalog_segments(cat, "main", 0, UINT64_MAX, &refs, &n));
	free(refs);
	return (n);
}

static void
test_set_delims(void **state)
{
	char			 dir[256], long_delims[80];
	struct lb_catalog	*cat;
	struct lb_store		*st, *rd;
	struct lb_lsconf	 conf;
	int64_t			 t0 = 1795359974000000LL;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	assert_ok(lb_store_open_writer(cat, dir, "main", &st));
	append_one(st, "alpha#beta gamma%delta", t0);		/* id 1: '#' and '%' are token bytes */
	append_one(st, "one#two three%four", t0 + 1);		/* id 2 */
	assert_string_equal(ids_of(st, "alpha#beta"), "1,");
	assert_int_equal(nsegs(cat), 0);

	/* Refused: a letter, a digit, 64 bytes; and a reader cannot. Nothing changes. */
	assert_int_equal(lb_store_set_delims(st, "a."), LB_EBADCONF);
	assert_int_equal(lb_store_set_delims(st, "7"), LB_EBADCONF);
	memset(long_delims, '.', 64);
	long_delims[64] = '\0';
	assert_int_equal(lb_store_set_delims(st, long_delims), LB_EBADCONF);
	assert_int_equal(nsegs(cat), 0);
	/* The delimiters in use: nothing to do (no flush). */
	assert_ok(lb_store_set_delims(st, LB_DEFAULT_DELIMS));
	assert_int_equal(nsegs(cat), 0);

	/*
	 * '#' becomes a delimiter: ids 1 and 2 go to a segment as they were tokenized. ('#' and
	 * '%' rather than '.' and '@': those would make parts, FORMAT.md §6, found either way.)
	 */
	assert_ok(lb_store_set_delims(st, LB_DEFAULT_DELIMS "#"));
	assert_int_equal(nsegs(cat), 1);
	assert_string_equal(lb_store_tokconf(st)->delim['#'] ? "y" : "n", "y");
	append_one(st, "alpha#beta gamma%delta", t0 + 2);	/* id 3 */
	append_one(st, "one#two three%four", t0 + 3);		/* id 4 */
	/* ids 3 and 4 are the tail, searched by brute force with the new delimiters */
	assert_string_equal(ids_of(st, "alpha#beta"), "1,");
	assert_string_equal(ids_of(st, "alpha"), "3,");
	assert_string_equal(ids_of(st, "gamma%delta"), "1,3,");
	assert_string_equal(ids_of(st, "two"), "4,");

	/* '%' too, '#' no longer: ids 3 and 4 to a segment; id 5 the new way. */
	lb_lsconf_default(&conf);
	assert_ok(lb_catalog_logspace_get(cat, "main", &conf));
	snprintf(conf.delims, sizeof(conf.delims), "%s", LB_DEFAULT_DELIMS "%");
	assert_ok(lb_catalog_logspace_set(cat, "main", &conf));
	assert_ok(lb_store_set_delims(st, conf.delims));
	assert_int_equal(nsegs(cat), 2);
	append_one(st, "alpha#beta gamma%delta", t0 + 4);	/* id 5 */
	assert_string_equal(ids_of(st, "alpha#beta"), "1,5,");
	assert_string_equal(ids_of(st, "alpha"), "3,");
	assert_string_equal(ids_of(st, "gamma"), "5,");
	assert_string_equal(ids_of(st, "gamma%delta"), "1,3,");
	assert_ok(lb_store_close(st));

	/* Reopened (the catalog's delimiters, '%'), and read: the same tokens. */
	assert_ok(lb_store_open_reader(cat, dir, "main", &rd));
	assert_int_equal(lb_store_set_delims(rd, "#"), EBADF);
	assert_string_equal(ids_of(rd, "alpha#beta"), "1,5,");
	assert_string_equal(ids_of(rd, "alpha"), "3,");
	assert_string_equal(ids_of(rd, "gamma"), "5,");
	assert_string_equal(ids_of(rd, "delta"), "5,");
	assert_string_equal(ids_of(rd, "gamma%delta"), "1,3,");
	assert_ok(lb_store_close(rd));
	lb_catalog_close(cat);
	t_rmtree(dir);
}

/* A reader sees a day that retention removed from the catalog once it refreshes. */
static void
test_refresh_after_day_delete(void **state)
{
	char			 dir[256];
	struct lb_catalog	*cat;
	struct lb_store		*st, *rd;
	struct lb_msg		 m;
	uint64_t		 first, next;
	int64_t			 day0 = 1795305600000000LL;	/* 2026-11-22T00:00:00Z */
	int64_t			 d = 86400LL * 1000000;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	assert_ok(lb_store_open_writer(cat, dir, "main", &st));
	append_one(st, "old one", day0 - 2 * d);		/* ids 1, 2: 2026-11-20 */
	append_one(st, "old two", day0 - 2 * d + 1);
	append_one(st, "new one", day0);			/* id 3: 2026-11-22 */
	assert_ok(lb_store_commit(st, 1));
	assert_ok(lb_store_open_reader(cat, dir, "main", &rd));
	assert_ok(lb_store_get(rd, 1, &m));
	assert_string_equal(ids_of(rd, "old"), "1,2,");
	lb_store_range(rd, &first, &next);
	assert_int_equal(first, 1);
	assert_int_equal(next, 4);

	assert_ok(lb_catalog_day_delete(cat, "main", 20261120));
	lb_store_range(rd, &first, &next);		/* as last loaded */
	assert_int_equal(first, 1);
	assert_ok(lb_store_refresh(rd));
	lb_store_range(rd, &first, &next);
	assert_int_equal(first, 3);
	assert_int_equal(next, 4);
	assert_int_equal(lb_store_get(rd, 1, &m), LB_ENOTFOUND);
	assert_string_equal(ids_of(rd, "old"), "");
	assert_string_equal(ids_of(rd, "new"), "3,");
	assert_ok(lb_store_refresh(st));		/* a writer: nothing to do */
	assert_ok(lb_store_close(rd));
	assert_ok(lb_store_close(st));
	lb_catalog_close(cat);
	t_rmtree(dir);
}

static void
append_unique(struct lb_store *st, int from, int to, int64_t t0)
{
	char	buf[128];

	for (int i = from; i < to; i++) {
		snprintf(buf, sizeof(buf), "n%d k%d the same words every time", i, i + 1000000);
		append_one(st, buf, t0 + i);
	}
}

/*
 * A segment the segment thread cannot write is written again by a later flush on the same
 * handle: nothing is lost, nothing indexed twice, no reopen. The failure is real: the thread
 * cannot open its file, RLIMIT_NOFILE being set to the lowest free descriptor (EMFILE), from
 * just after the message file and the catalog took the interval (flush_begin opens nothing:
 * the WAL is not stale) until after a second try.
 */
static void
test_segment_write_error(void **state)
{
	char			 dir[256];
	struct lb_catalog	*cat;
	struct lb_store		*st;
	struct lb_lsconf	 conf;
	struct rlimit		 old, lim;
	struct timespec		 ts = { 1, 300000000 };
	int64_t			 t0 = 1795359974000000LL;
	int			 fd, rc, rc2;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	lb_lsconf_default(&conf);
	conf.flush_ms = 1000;
	assert_ok(lb_catalog_logspace_create(cat, "main", &conf));
	assert_ok(lb_store_open_writer(cat, dir, "main", &st));
	append_unique(st, 0, 20000, t0);
	/*
	 * The interval is due; and the message file's compressor thread, which makes the WAL
	 * stale (a rewrite, opening a file) as each queued block is written, has had the same
	 * time to finish: commits right after the appends left it racing them on a loaded box.
	 */
	nanosleep(&ts, NULL);
	assert_ok(lb_store_commit(st, 1));
	assert_ok(lb_store_commit(st, 1));		/* the WAL is fresh: no rewrite to come */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	assert_true((fd = dup(0)) != -1);
	close(fd);
	lim = old;
	lim.rlim_cur = (rlim_t)fd;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
	append_unique(st, 20000, 20001, t0);		/* hands the interval to the thread */
	rc = lb_store_flush(st);			/* waits for it: failed */
	rc2 = lb_store_flush(st);			/* tries again: fails again */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(rc, EMFILE);
	assert_int_equal(rc2, EMFILE);
	/* The cause is gone: the same handle goes on. */
	assert_ok(lb_store_flush(st));
	append_unique(st, 20001, 20010, t0);
	assert_ok(lb_store_flush(st));
	assert_int_equal(nsegs(cat), 2);
	assert_string_equal(ids_of(st, "n17"), "18,");
	assert_string_equal(ids_of(st, "n19999"), "20000,");
	assert_string_equal(ids_of(st, "k1020005"), "20006,");
	assert_ok(lb_store_verify(st, NULL, NULL));
	assert_ok(lb_store_close(st));
	assert_ok(lb_store_open_writer(cat, dir, "main", &st));
	assert_string_equal(ids_of(st, "n20000"), "20001,");
	assert_string_equal(ids_of(st, "k1020009"), "20010,");
	assert_ok(lb_store_verify(st, NULL, NULL));
	assert_ok(lb_store_close(st));
	lb_catalog_close(cat);
	t_rmtree(dir);
}

T_MAIN(
	cmocka_unit_test(test_mem_and_sync),
	cmocka_unit_test(test_set_delims),
	cmocka_unit_test(test_refresh_after_day_delete),
	cmocka_unit_test(test_segment_write_error))
