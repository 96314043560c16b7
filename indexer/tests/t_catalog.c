/*
 * t_catalog.c — the LMDB catalog on real files: every call's round trip and persistence across
 * reopen, publish atomicity and overlap rejection, segment range queries and the time map
 * against brute force over random data, the golden bytes of each value, readers in another
 * thread and in a forked process that must always see a consistent segment set, damaged values
 * (LB_ECORRUPT), a foreign format version (LB_EFORMAT) and bad names (LB_EBADCONF).
 */
#include "t_helper.h"
#include "lb_format.h"
#include "lb_util.h"

#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct fix {
	char			 dir[256];
	struct lb_catalog	*cat;
};

static int
setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	t_mkdtemp(f->dir, sizeof(f->dir));
	assert_ok(lb_catalog_open(f->dir, LB_RDWR, &f->cat));
	*state = f;
	return (0);
}

static int
teardown(void **state)
{
	struct fix *f = *state;

	lb_catalog_close(f->cat);
	t_rmtree(f->dir);
	free(f);
	return (0);
}

static void
mkls(struct lb_catalog *cat, const char *name)
{
	struct lb_lsconf c;

	lb_lsconf_default(&c);
	assert_ok(lb_catalog_logspace_create(cat, name, &c));
}

static struct lb_segref
seg(uint64_t first, uint64_t last, uint32_t day)
{
	struct lb_segref s;

	memset(&s, 0, sizeof(s));
	s.first_id = first;
	s.last_id = last;
	s.count = last - first + 1;
	s.tmin = (int64_t)first * 1000;
	s.tmax = (int64_t)last * 1000;
	s.size = 4096 + first;
	s.day = day;
	s.level = 0;
	snprintf(s.file, sizeof(s.file), "%016jx-%016jx.seg", (uintmax_t)first, (uintmax_t)last);
	return (s);
}

static void
assert_seg_equal(const struct lb_segref *a, const struct lb_segref *b)
{
	assert_true(a->first_id == b->first_id);
	assert_true(a->last_id == b->last_id);
	assert_true(a->count == b->count);
	assert_true(a->tmin == b->tmin);
	assert_true(a->tmax == b->tmax);
	assert_true(a->size == b->size);
	assert_int_equal(a->day, b->day);
	assert_int_equal(a->level, b->level);
	assert_string_equal(a->file, b->file);
}

static void
assert_day_equal(const struct lb_dayref *a, const struct lb_dayref *b)
{
	assert_int_equal(a->day, b->day);
	assert_true(a->first_id == b->first_id);
	assert_true(a->next_id == b->next_id);
	assert_true(a->tmin == b->tmin);
	assert_true(a->tmax == b->tmax);
}

/* ---------------------------------------------------------------- raw LMDB access */

/* Opens the catalog's environment directly (the catalog handle must be closed). */
static void
raw_open(const char *dir, MDB_env **env)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, LB_DIR_CATALOG);
	assert_ok(mdb_env_create(env));
	assert_ok(mdb_env_set_maxdbs(*env, LB_CAT_MAXDBS));
	assert_ok(mdb_env_open(*env, path, 0, 0640));
}

static void
raw_put(const char *dir, const char *db, const void *k, size_t klen, const void *v,
    size_t vlen)
{
	MDB_env	*env;
	MDB_txn	*txn;
	MDB_dbi	 dbi;
	MDB_val	 key = { klen, (void *)(uintptr_t)k }, val = { vlen, (void *)(uintptr_t)v };

	raw_open(dir, &env);
	assert_ok(mdb_txn_begin(env, NULL, 0, &txn));
	assert_ok(mdb_dbi_open(txn, db, MDB_CREATE, &dbi));
	assert_ok(mdb_put(txn, dbi, &key, &val, 0));
	assert_ok(mdb_txn_commit(txn));
	mdb_env_close(env);
}

/* Copies the value of key k in db into v (at most vmax bytes); returns its size. */
static size_t
raw_get(const char *dir, const char *db, const void *k, size_t klen, void *v, size_t vmax)
{
	MDB_env	*env;
	MDB_txn	*txn;
	MDB_dbi	 dbi;
	MDB_val	 key = { klen, (void *)(uintptr_t)k }, val;
	size_t	 n;

	raw_open(dir, &env);
	assert_ok(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	assert_ok(mdb_dbi_open(txn, db, 0, &dbi));
	assert_ok(mdb_get(txn, dbi, &key, &val));
	n = val.mv_size;
	assert_true(n <= vmax);
	memcpy(v, val.mv_data, n);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return (n);
}

/* name 00 BE64(v) */
static size_t
rkey64(uint8_t *k, const char *name, uint64_t v)
{
	size_t n = strlen(name);

	memcpy(k, name, n);
	k[n] = 0;
	lb_put64be(k + n + 1, v);
	return (n + 9);
}

static size_t
rkey32(uint8_t *k, const char *name, uint32_t v)
{
	size_t n = strlen(name);

	memcpy(k, name, n);
	k[n] = 0;
	k[n + 1] = v >> 24; k[n + 2] = v >> 16; k[n + 3] = v >> 8; k[n + 4] = v;
	return (n + 5);
}

static void
reopen(struct fix *f, int mode)
{
	lb_catalog_close(f->cat);
	f->cat = NULL;
	assert_ok(lb_catalog_open(f->dir, mode, &f->cat));
}

/* ---------------------------------------------------------------- logspaces */

struct names {
	char	 n[16][LB_NAME_MAX + 1];
	int	 cnt;
	int	 stop;	/* return 7 after this many */
};

static int
collect_name(void *arg, const char *name)
{
	struct names *ns = arg;

	assert_true(ns->cnt < 16);
	snprintf(ns->n[ns->cnt++], sizeof(ns->n[0]), "%s", name);
	return (ns->stop && ns->cnt == ns->stop ? 7 : 0);
}

static void
t_logspace_roundtrip(void **state)
{
	struct fix		*f = *state;
	struct lb_lsconf	 c, d, e;
	struct names		 ns;
	const char		*order[] = { "zeta", "main", "a-b_c", "09" };

	lb_lsconf_default(&c);
	assert_string_equal(c.delims, LB_DEFAULT_DELIMS);
	assert_int_equal(c.retention_days, 0);
	assert_true(c.flush_ms > 0 && c.mem_limit > 0);

	for (int i = 0; i < 4; i++)
		mkls(f->cat, order[i]);
	assert_int_equal(lb_catalog_logspace_create(f->cat, "main", &c), EEXIST);

	memset(&d, 0, sizeof(d));
	snprintf(d.delims, sizeof(d.delims), ",;\x01\xff");
	d.retention_days = 30;
	d.flush_ms = 250;
	d.mem_limit = 5ULL << 32;
	d.fsync_ms = 0;
	assert_ok(lb_catalog_logspace_set(f->cat, "zeta", &d));
	assert_ok(lb_catalog_logspace_get(f->cat, "zeta", &e));
	assert_string_equal(e.delims, d.delims);
	assert_int_equal(e.retention_days, 30);
	assert_int_equal(e.flush_ms, 250);
	assert_true(e.mem_limit == 5ULL << 32);
	assert_int_equal(e.fsync_ms, 0);
	assert_ok(lb_catalog_logspace_get(f->cat, "main", &e));
	assert_string_equal(e.delims, c.delims);
	assert_int_equal(e.retention_days, c.retention_days);
	assert_int_equal(e.flush_ms, c.flush_ms);
	assert_true(e.mem_limit == c.mem_limit);
	assert_int_equal(e.fsync_ms, c.fsync_ms);

	assert_int_equal(lb_catalog_logspace_get(f->cat, "nope", &e), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_logspace_set(f->cat, "nope", &d), LB_ENOTFOUND);

	/* Bad settings. */
	snprintf(d.delims, sizeof(d.delims), ",a");
	assert_int_equal(lb_catalog_logspace_set(f->cat, "zeta", &d), LB_EBADCONF);
	memset(d.delims, ',', sizeof(d.delims));
	assert_int_equal(lb_catalog_logspace_create(f->cat, "new", &d), LB_EBADCONF);
	lb_lsconf_default(&d);
	d.flush_ms = 0;
	assert_int_equal(lb_catalog_logspace_set(f->cat, "zeta", &d), LB_EBADCONF);
	assert_ok(lb_catalog_logspace_get(f->cat, "zeta", &e));
	assert_int_equal(e.flush_ms, 250);

	/* Listing is in name order; a non-zero callback return stops it. */
	memset(&ns, 0, sizeof(ns));
	assert_ok(lb_catalog_logspaces(f->cat, collect_name, &ns));
	assert_int_equal(ns.cnt, 4);
	assert_string_equal(ns.n[0], "09");
	assert_string_equal(ns.n[1], "a-b_c");
	assert_string_equal(ns.n[2], "main");
	assert_string_equal(ns.n[3], "zeta");
	memset(&ns, 0, sizeof(ns));
	ns.stop = 2;
	assert_int_equal(lb_catalog_logspaces(f->cat, collect_name, &ns), 7);
	assert_int_equal(ns.cnt, 2);

	/* Everything survives a reopen, read-only too. */
	reopen(f, LB_RDONLY);
	assert_ok(lb_catalog_logspace_get(f->cat, "zeta", &e));
	assert_int_equal(e.flush_ms, 250);
	memset(&ns, 0, sizeof(ns));
	assert_ok(lb_catalog_logspaces(f->cat, collect_name, &ns));
	assert_int_equal(ns.cnt, 4);
	/* A reader cannot write. */
	assert_int_equal(lb_catalog_logspace_set(f->cat, "zeta", &c), EROFS);
	assert_int_equal(lb_catalog_state_put(f->cat, "zeta",
	    &(struct lb_lsstate){ 1, 1, 0 }), EROFS);
}

static void
t_bad_names(void **state)
{
	struct fix		*f = *state;
	struct lb_lsconf	 c;
	struct lb_lsstate	 st = { 1, 1, 0 };
	struct lb_dayref	 d = { 20260101, 1, 1, 0, 0 }, *days;
	struct lb_segref	 s = seg(1, 10, 20260101), *segs;
	char			 longname[LB_NAME_MAX + 2];
	size_t			 n;
	uint64_t		 id;
	const char		*bad[] = { "", "Main", "a/b", "a b", "a.b", "a\xff", "..",
	    longname, NULL };

	lb_lsconf_default(&c);
	memset(longname, 'a', LB_NAME_MAX + 1);
	longname[LB_NAME_MAX + 1] = '\0';
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *b = bad[i];

		assert_int_equal(lb_catalog_logspace_create(f->cat, b, &c), LB_EBADCONF);
		assert_int_equal(lb_catalog_logspace_get(f->cat, b, &c), LB_EBADCONF);
		assert_int_equal(lb_catalog_logspace_set(f->cat, b, &c), LB_EBADCONF);
		assert_int_equal(lb_catalog_publish(f->cat, b, NULL, 0, &s, 1), LB_EBADCONF);
		assert_int_equal(lb_catalog_segments(f->cat, b, 0, 9, &segs, &n), LB_EBADCONF);
		assert_int_equal(lb_catalog_day_put(f->cat, b, &d), LB_EBADCONF);
		assert_int_equal(lb_catalog_days(f->cat, b, &days, &n), LB_EBADCONF);
		assert_int_equal(lb_catalog_day_delete(f->cat, b, d.day), LB_EBADCONF);
		assert_int_equal(lb_catalog_timemap_put(f->cat, b, 0, 1), LB_EBADCONF);
		assert_int_equal(lb_catalog_time_to_id(f->cat, b, 0, &id), LB_EBADCONF);
		assert_int_equal(lb_catalog_state_get(f->cat, b, &st), LB_EBADCONF);
		assert_int_equal(lb_catalog_state_put(f->cat, b, &st), LB_EBADCONF);
	}
	/* 64 bytes is the longest name. */
	longname[LB_NAME_MAX] = '\0';
	assert_ok(lb_catalog_logspace_create(f->cat, longname, &c));
	assert_ok(lb_catalog_state_get(f->cat, longname, &st));

	/* Calls on a logspace that does not exist. */
	assert_int_equal(lb_catalog_publish(f->cat, "nope", NULL, 0, &s, 1), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_segments(f->cat, "nope", 0, 9, &segs, &n), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_day_put(f->cat, "nope", &d), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_days(f->cat, "nope", &days, &n), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_timemap_put(f->cat, "nope", 0, 1), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_time_to_id(f->cat, "nope", 0, &id), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_state_get(f->cat, "nope", &st), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_state_put(f->cat, "nope", &st), LB_ENOTFOUND);
}

/* ---------------------------------------------------------------- state */

static void
t_state(void **state)
{
	struct fix		*f = *state;
	struct lb_lsstate	 st, s2;

	mkls(f->cat, "main");
	assert_ok(lb_catalog_state_get(f->cat, "main", &st));
	assert_true(st.next_id == 1 && st.indexed_id == 1 && st.last_received == LB_NOTIME);

	st.next_id = 1000001;
	st.indexed_id = 999000;
	st.last_received = -5;
	assert_ok(lb_catalog_state_put(f->cat, "main", &st));
	reopen(f, LB_RDWR);
	assert_ok(lb_catalog_state_get(f->cat, "main", &s2));
	assert_memory_equal(&st, &s2, sizeof(st));

	st.indexed_id = st.next_id + 1;
	assert_int_equal(lb_catalog_state_put(f->cat, "main", &st), EINVAL);

	/* Readers of the group may take a reader slot in lock.mdb. */
	{
		char		 p[512];
		struct stat	 sb;

		snprintf(p, sizeof(p), "%s/%s/lock.mdb", f->dir, LB_DIR_CATALOG);
		assert_int_equal(stat(p, &sb), 0);
		assert_int_equal(sb.st_mode & 0777, 0660);
	}
}

/* ---------------------------------------------------------------- publish */

static void
assert_segs(struct lb_catalog *cat, const char *ls, uint64_t lo, uint64_t hi,
    const struct lb_segref *want, size_t nwant)
{
	struct lb_segref	*got;
	size_t			 n;

	assert_ok(lb_catalog_segments(cat, ls, lo, hi, &got, &n));
	assert_int_equal(n, nwant);
	for (size_t i = 0; i < n; i++)
		assert_seg_equal(&got[i], &want[i]);
	free(got);
}

static void
t_publish(void **state)
{
	struct fix		*f = *state;
	struct lb_segref	 a = seg(1, 100, 20260101), b = seg(101, 250, 20260101);
	struct lb_segref	 c = seg(251, 300, 20260102), m = seg(1, 250, 20260101);
	struct lb_segref	 all[3];
	struct lb_lsstate	 st;
	struct lb_dayref	*days;
	struct lb_segref	*segs;
	size_t			 n;
	uint64_t		 del[2];

	mkls(f->cat, "main");
	mkls(f->cat, "other");
	a.level = 0;
	c.tmin = LB_NOTIME;	/* a segment without times leaves the day's times alone */
	c.tmax = LB_NOTIME;
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, &a, 1));
	all[0] = b;
	all[1] = c;
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, all, 2));
	/* Another logspace's segments never show. */
	assert_ok(lb_catalog_publish(f->cat, "other", NULL, 0, &m, 1));

	all[0] = a;
	all[1] = b;
	all[2] = c;
	assert_segs(f->cat, "main", 0, UINT64_MAX, all, 3);
	assert_segs(f->cat, "main", 100, 101, all, 2);
	assert_segs(f->cat, "main", 101, 101, all + 1, 1);
	assert_segs(f->cat, "main", 250, 251, all + 1, 2);
	assert_segs(f->cat, "main", 301, 400, NULL, 0);
	assert_segs(f->cat, "main", 0, 0, NULL, 0);
	assert_int_equal(lb_catalog_segments(f->cat, "main", 5, 4, &segs, &n), EINVAL);

	/* next_id and the days grew. */
	assert_ok(lb_catalog_state_get(f->cat, "main", &st));
	assert_true(st.next_id == 301);
	assert_true(st.indexed_id == 1);
	assert_ok(lb_catalog_days(f->cat, "main", &days, &n));
	assert_int_equal(n, 2);
	assert_int_equal(days[0].day, 20260101);
	assert_true(days[0].first_id == 1 && days[0].next_id == 251);
	assert_true(days[0].tmin == 1000 && days[0].tmax == 250000);
	assert_int_equal(days[1].day, 20260102);
	assert_true(days[1].first_id == 251 && days[1].next_id == 301);
	assert_true(days[1].tmin == LB_NOTIME && days[1].tmax == LB_NOTIME);
	free(days);

	/* A merge: two out, one in, in one transaction. */
	del[0] = 1;
	del[1] = 101;
	m.level = 1;
	assert_ok(lb_catalog_publish(f->cat, "main", del, 2, &m, 1));
	all[0] = m;
	all[1] = c;
	assert_segs(f->cat, "main", 0, UINT64_MAX, all, 2);
	assert_segs(f->cat, "main", 77, 77, all, 1);

	/* A publish with nothing in it is fine; next_id never shrinks. */
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, NULL, 0));
	del[0] = 251;
	assert_ok(lb_catalog_publish(f->cat, "main", del, 1, NULL, 0));
	assert_segs(f->cat, "main", 0, UINT64_MAX, all, 1);
	assert_ok(lb_catalog_state_get(f->cat, "main", &st));
	assert_true(st.next_id == 301);

	/* Bad segments. */
	a = seg(500, 400, 20260101);
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, &a, 1), EINVAL);
	a = seg(500, 600, 20261301);
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, &a, 1), EINVAL);
	a = seg(500, 600, 20260101);
	a.file[0] = '\0';
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, &a, 1), EINVAL);
	snprintf(a.file, sizeof(a.file), "../x.seg");
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, &a, 1), EINVAL);
	memset(a.file, 'x', sizeof(a.file));
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, &a, 1), EINVAL);
	a = seg(0, 10, 20260101);
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, &a, 1), EINVAL);
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, -1, NULL, 0), EINVAL);
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 1, NULL, 0), EINVAL);

	/* Persistence. */
	reopen(f, LB_RDONLY);
	assert_segs(f->cat, "main", 0, UINT64_MAX, all, 1);
}

/* Snapshot of everything publish may touch, to prove a failed publish changed nothing. */
struct snap {
	struct lb_segref	*segs;
	size_t			 nsegs;
	struct lb_dayref	*days;
	size_t			 ndays;
	struct lb_lsstate	 st;
};

static void
snap_take(struct lb_catalog *cat, struct snap *s)
{
	assert_ok(lb_catalog_segments(cat, "main", 0, UINT64_MAX, &s->segs, &s->nsegs));
	assert_ok(lb_catalog_days(cat, "main", &s->days, &s->ndays));
	assert_ok(lb_catalog_state_get(cat, "main", &s->st));
}

static void
snap_same(struct lb_catalog *cat, struct snap *a)
{
	struct snap b;

	snap_take(cat, &b);
	assert_int_equal(a->nsegs, b.nsegs);
	for (size_t i = 0; i < a->nsegs; i++)
		assert_seg_equal(&a->segs[i], &b.segs[i]);
	assert_int_equal(a->ndays, b.ndays);
	for (size_t i = 0; i < a->ndays; i++)
		assert_day_equal(&a->days[i], &b.days[i]);
	assert_true(a->st.next_id == b.st.next_id);
	assert_true(a->st.indexed_id == b.st.indexed_id);
	assert_true(a->st.last_received == b.st.last_received);
	free(b.segs);
	free(b.days);
}

static void
t_publish_atomic(void **state)
{
	struct fix		*f = *state;
	struct lb_segref	 base[3] = { seg(1, 10, 20260101), seg(11, 20, 20260101),
	    seg(31, 40, 20260102) };
	struct lb_segref	 add[3];
	struct snap		 s;
	uint64_t		 del[2];

	mkls(f->cat, "main");
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, base, 3));
	snap_take(f->cat, &s);

	/* A listed segment is missing: the valid delete and the adds are rolled back. */
	del[0] = 1;
	del[1] = 12;
	add[0] = seg(1, 20, 20260101);
	add[1] = seg(41, 50, 20260103);
	assert_int_equal(lb_catalog_publish(f->cat, "main", del, 2, add, 2), LB_ENOTFOUND);
	snap_same(f->cat, &s);

	/* Overlap with the segment before, after, inside, around, or an identical start. */
	{
		struct lb_segref bad[] = { seg(5, 25, 20260103), seg(25, 31, 20260103),
		    seg(20, 30, 20260103), seg(33, 35, 20260103), seg(30, 45, 20260103),
		    seg(1, 1, 20260103), seg(40, 40, 20260103), seg(11, 11, 20260103) };

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			add[0] = seg(60, 70, 20260104);	/* fine on its own */
			add[1] = bad[i];
			assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, add, 2),
			    EEXIST);
			snap_same(f->cat, &s);
		}
	}
	/* Two added segments that overlap each other. */
	add[0] = seg(60, 70, 20260104);
	add[1] = seg(70, 80, 20260104);
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, add, 2), EEXIST);
	add[1] = seg(65, 66, 20260104);
	assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, add, 2), EEXIST);
	/* The same first id twice in del. */
	del[0] = del[1] = 31;
	assert_int_equal(lb_catalog_publish(f->cat, "main", del, 2, NULL, 0), LB_ENOTFOUND);
	snap_same(f->cat, &s);

	/* The gap 21..30 is free, and replacing a deleted range in the same call is fine. */
	add[0] = seg(21, 30, 20260101);
	del[0] = 31;
	add[1] = seg(31, 35, 20260102);
	add[2] = seg(36, 40, 20260102);
	assert_ok(lb_catalog_publish(f->cat, "main", del, 1, add, 3));
	free(s.segs);
	free(s.days);
	snap_take(f->cat, &s);
	assert_int_equal(s.nsegs, 5);
	for (size_t i = 1; i < s.nsegs; i++)
		assert_true(s.segs[i].first_id == s.segs[i - 1].last_id + 1);
	free(s.segs);
	free(s.days);
}

/* Random non-overlapping segment sets and random queries against a brute-force list. */
static void
t_segments_random(void **state)
{
	struct fix		*f = *state;
	struct lb_segref	 segs[200], want[200];
	uint64_t		 r = 0x9e3779b97f4a7c15ULL, id = 1;
	size_t			 nsegs = 0;

	mkls(f->cat, "aa");
	mkls(f->cat, "main");
	mkls(f->cat, "zz");
	/* Neighbours on both sides in the key space. */
	assert_ok(lb_catalog_publish(f->cat, "aa", NULL, 0,
	    &(struct lb_segref){ .first_id = 1, .last_id = UINT64_MAX - 1, .count = 1,
	    .day = 20260101, .file = "x.seg" }, 1));
	assert_ok(lb_catalog_publish(f->cat, "zz", NULL, 0,
	    &(struct lb_segref){ .first_id = 1, .last_id = UINT64_MAX - 1, .count = 1,
	    .day = 20260101, .file = "x.seg" }, 1));

	while (nsegs < 200) {
		int	 k = 1 + (int)(t_rnd(&r) % 8);
		struct lb_segref batch[8];

		for (int i = 0; i < k && nsegs < 200; i++) {
			id += t_rnd(&r) % 3 == 0 ? t_rnd(&r) % 50 : 0;	/* sometimes a gap */
			uint64_t len = 1 + t_rnd(&r) % 40;

			segs[nsegs] = seg(id, id + len - 1, 20260101 + (uint32_t)(nsegs / 50));
			batch[i] = segs[nsegs++];
			id += len;
			k = i + 1;
		}
		/* Publish in a shuffled order: the catalog sorts. */
		for (int i = k - 1; i > 0; i--) {
			int j = (int)(t_rnd(&r) % (uint64_t)(i + 1));
			struct lb_segref t = batch[i];

			batch[i] = batch[j];
			batch[j] = t;
		}
		assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, batch, k));
	}
	for (int q = 0; q < 3000; q++) {
		uint64_t lo = t_rnd(&r) % (id + 20), hi = lo + t_rnd(&r) % (q % 2 ? 10 : 500);
		size_t nw = 0;

		if (q == 0) {
			lo = 0;
			hi = UINT64_MAX;
		}
		for (size_t i = 0; i < nsegs; i++)
			if (segs[i].last_id >= lo && segs[i].first_id <= hi)
				want[nw++] = segs[i];
		assert_segs(f->cat, "main", lo, hi, want, nw);
	}
}

/* ---------------------------------------------------------------- days */

static void
t_days(void **state)
{
	struct fix		*f = *state;
	struct lb_dayref	 d1 = { 20260101, 1, 500, 100, 200 };
	struct lb_dayref	 d2 = { 20260102, 500, 900, 300, LB_NOTIME };
	struct lb_dayref	*days;
	struct lb_segref	 s[3] = { seg(1, 250, 20260101), seg(251, 499, 20260101),
	    seg(500, 899, 20260102) }, *got;
	size_t			 n;
	uint64_t		 id;

	mkls(f->cat, "main");
	mkls(f->cat, "other");
	assert_ok(lb_catalog_days(f->cat, "main", &days, &n));
	assert_int_equal(n, 0);
	free(days);
	assert_ok(lb_catalog_day_put(f->cat, "main", &d2));
	assert_ok(lb_catalog_day_put(f->cat, "main", &d1));
	assert_ok(lb_catalog_day_put(f->cat, "other", &d1));
	assert_ok(lb_catalog_days(f->cat, "main", &days, &n));
	assert_int_equal(n, 2);
	assert_day_equal(&days[0], &d1);
	assert_day_equal(&days[1], &d2);
	free(days);
	/* Overwrite. */
	d1.next_id = 501;
	d1.next_id = 500;
	d1.tmax = 250;
	assert_ok(lb_catalog_day_put(f->cat, "main", &d1));
	assert_int_equal(lb_catalog_day_put(f->cat, "main",
	    &(struct lb_dayref){ 20260100, 1, 1, 0, 0 }), EINVAL);
	assert_int_equal(lb_catalog_day_put(f->cat, "main",
	    &(struct lb_dayref){ 20260103, 2, 1, 0, 0 }), EINVAL);

	/* Deleting a day takes its segments and time-map entries with it. */
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, s, 3));
	for (int64_t t = 0; t < 400; t++)
		assert_ok(lb_catalog_timemap_put(f->cat, "main", t * LB_TIMEMAP_STEP / 2,
		    (uint64_t)t * 2 + 1 + (t >= 250 ? 300 : 0)));
	assert_ok(lb_catalog_timemap_put(f->cat, "other", 0, 1));
	/* publish grew day 1's times to the segments' (1000 .. 499000). */
	assert_ok(lb_catalog_days(f->cat, "main", &days, &n));
	assert_true(days[0].tmin == 100 && days[0].tmax == 499000);
	free(days);
	assert_ok(lb_catalog_day_put(f->cat, "main",
	    &(struct lb_dayref){ 20260101, 1, 500, 0, 124 * LB_TIMEMAP_STEP + 7 }));
	assert_ok(lb_catalog_day_delete(f->cat, "main", 20260101));
	assert_int_equal(lb_catalog_day_delete(f->cat, "main", 20260101), LB_ENOTFOUND);
	assert_ok(lb_catalog_days(f->cat, "main", &days, &n));
	assert_int_equal(n, 1);
	assert_int_equal(days[0].day, 20260102);
	free(days);
	assert_ok(lb_catalog_segments(f->cat, "main", 0, UINT64_MAX, &got, &n));
	assert_int_equal(n, 1);
	assert_seg_equal(&got[0], &s[2]);
	free(got);
	/* Steps 0..124 held ids 1..499 of the day: gone. Step 125 on holds day 2's ids. */
	assert_ok(lb_catalog_time_to_id(f->cat, "main", 0, &id));
	assert_true(id == 801);
	assert_ok(lb_catalog_days(f->cat, "other", &days, &n));
	assert_int_equal(n, 1);
	free(days);
	assert_ok(lb_catalog_time_to_id(f->cat, "other", 0, &id));
	assert_true(id == 1);

	/* Without a time range, the whole map is searched for the day's ids. */
	assert_ok(lb_catalog_day_put(f->cat, "main",
	    &(struct lb_dayref){ 20260102, 500, 900, LB_NOTIME, LB_NOTIME }));
	assert_ok(lb_catalog_day_delete(f->cat, "main", 20260102));
	/* Steps 125..149 held ids 801..897; step 150 on holds ids 901.. (not the day's). */
	assert_ok(lb_catalog_time_to_id(f->cat, "main", INT64_MIN, &id));
	assert_true(id == 901);
	assert_ok(lb_catalog_segments(f->cat, "main", 0, UINT64_MAX, &got, &n));
	assert_int_equal(n, 0);
	free(got);
}

/* A day's extract (segments, day record, time map), removed, then imported: all as before. */
static void
t_day_import(void **state)
{
	struct fix		*f = *state;
	struct lb_dayref	 d1 = { 20260101, 1, 500, 0, 0 }, d2, *days;
	struct lb_segref	 s[3] = { seg(1, 250, 20260101), seg(251, 499, 20260101),
	    seg(500, 899, 20260102) }, *got, *before;
	struct lb_lsstate	 st;
	int64_t			*t, *t2;
	uint64_t		*ids, *ids2, id;
	size_t			 n, nt, nt2, nbefore;

	mkls(f->cat, "main");
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, s, 3));
	for (int64_t i = 0; i < 400; i++)
		assert_ok(lb_catalog_timemap_put(f->cat, "main", i * LB_TIMEMAP_STEP / 2,
		    (uint64_t)i * 2 + 1 + (i >= 250 ? 300 : 0)));
	d1.tmax = 124 * LB_TIMEMAP_STEP + 7;
	assert_ok(lb_catalog_day_put(f->cat, "main", &d1));
	assert_ok(lb_catalog_day_timemap(f->cat, "main", &d1, &t, &ids, &nt));
	/* Steps 0..124 (two puts each, the first id kept): ids 1, 5, 9, ... */
	assert_int_equal(nt, 125);
	for (size_t i = 0; i < nt; i++)
		assert_true(t[i] == (int64_t)i * LB_TIMEMAP_STEP && ids[i] == i * 4 + 1);
	assert_ok(lb_catalog_segments(f->cat, "main", 0, UINT64_MAX, &before, &nbefore));
	assert_ok(lb_catalog_day_delete(f->cat, "main", 20260101));

	/* Refused, with nothing written: a segment of another day, or outside the day's ids. */
	assert_int_equal(lb_catalog_day_import(f->cat, "main", &d1, &s[1], 2, t, ids, nt),
	    EINVAL);
	d2 = d1;
	d2.next_id = 400;
	assert_int_equal(lb_catalog_day_import(f->cat, "main", &d2, s, 2, t, ids, nt), EINVAL);
	assert_int_equal(lb_catalog_day_import(f->cat, "nope", &d1, s, 2, t, ids, nt),
	    LB_ENOTFOUND);
	/* Imported, removed again; then a segment over the day's ids makes it refused. */
	assert_int_equal(lb_catalog_day_import(f->cat, "main", &d1,
	    (struct lb_segref[]){ seg(1, 250, 20260101), seg(251, 499, 20260101) }, 2, t, ids,
	    nt), 0);
	assert_ok(lb_catalog_day_delete(f->cat, "main", 20260101));
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0,
	    (struct lb_segref[]){ seg(300, 310, 20260103) }, 1));
	assert_int_equal(lb_catalog_day_import(f->cat, "main", &d1, s, 2, t, ids, nt), EEXIST);
	assert_ok(lb_catalog_days(f->cat, "main", &days, &n));
	assert_int_equal(n, 2);	/* 20260102, and the segment's 20260103 */
	free(days);
	assert_ok(lb_catalog_publish(f->cat, "main", (uint64_t[]){ 300 }, 1, NULL, 0));
	assert_ok(lb_catalog_day_delete(f->cat, "main", 20260103));

	assert_ok(lb_catalog_day_import(f->cat, "main", &d1, s, 2, t, ids, nt));
	assert_int_equal(lb_catalog_day_import(f->cat, "main", &d1, s, 2, t, ids, nt), EEXIST);
	assert_ok(lb_catalog_segments(f->cat, "main", 0, UINT64_MAX, &got, &n));
	assert_int_equal(n, nbefore);
	for (size_t i = 0; i < n; i++)
		assert_seg_equal(&got[i], &before[i]);
	free(got);
	free(before);
	assert_ok(lb_catalog_days(f->cat, "main", &days, &n));
	assert_int_equal(n, 2);
	assert_day_equal(&days[0], &d1);
	free(days);
	assert_ok(lb_catalog_day_timemap(f->cat, "main", &d1, &t2, &ids2, &nt2));
	assert_int_equal(nt2, nt);
	assert_memory_equal(t2, t, nt * sizeof(*t));
	assert_memory_equal(ids2, ids, nt * sizeof(*ids));
	assert_ok(lb_catalog_time_to_id(f->cat, "main", 0, &id));
	assert_true(id == 1);
	/* The state's next id was past the day: unchanged. */
	assert_ok(lb_catalog_state_get(f->cat, "main", &st));
	assert_true(st.next_id == 900);
	free(t);
	free(ids);
	free(t2);
	free(ids2);
}

/* ---------------------------------------------------------------- time map */

static int64_t
floor_step(int64_t t)
{
	int64_t q = t / LB_TIMEMAP_STEP;

	if (t % LB_TIMEMAP_STEP < 0)
		q--;
	return (q * LB_TIMEMAP_STEP);
}

static void
t_timemap(void **state)
{
	struct fix	*f = *state;
	struct {
		int64_t	 step;
		uint64_t id;
	}		 ent[600];
	uint64_t	 r = 12345, id = 1, got;
	int64_t		 t = -300 * LB_TIMEMAP_STEP - 17;
	int		 nent = 0;

	mkls(f->cat, "aa");
	mkls(f->cat, "main");
	mkls(f->cat, "zz");
	assert_ok(lb_catalog_timemap_put(f->cat, "aa", INT64_MAX, 7));
	assert_ok(lb_catalog_timemap_put(f->cat, "zz", INT64_MIN + 1, 7));
	assert_int_equal(lb_catalog_time_to_id(f->cat, "main", 0, &got), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_timemap_put(f->cat, "main", LB_NOTIME, 1), EINVAL);

	/* Messages arrive; the first of each step is put, and sometimes a later one too. */
	while (nent < 600) {
		t += (int64_t)(t_rnd(&r) % (3 * LB_TIMEMAP_STEP));
		id += 1 + t_rnd(&r) % 100;
		if (nent == 0 || ent[nent - 1].step != floor_step(t)) {
			ent[nent].step = floor_step(t);
			ent[nent].id = id;
			nent++;
		}
		assert_ok(lb_catalog_timemap_put(f->cat, "main", t, id));
	}
	reopen(f, LB_RDONLY);
	for (int q = 0; q < 5000; q++) {
		int64_t	 x = ent[0].step - 5 * LB_TIMEMAP_STEP +
		    (int64_t)(t_rnd(&r) % (uint64_t)(t - ent[0].step + 10 * LB_TIMEMAP_STEP));
		int	 i;

		if (q == 0)
			x = INT64_MIN;
		for (i = 0; i < nent && ent[i].step < floor_step(x == INT64_MIN ? 0 : x); i++)
			;
		if (x == INT64_MIN)
			i = 0;
		if (i == nent) {
			assert_int_equal(lb_catalog_time_to_id(f->cat, "main", x, &got),
			    LB_ENOTFOUND);
			continue;
		}
		assert_ok(lb_catalog_time_to_id(f->cat, "main", x, &got));
		assert_true(got == ent[i].id);
	}
	/* Exactly on a step start and one µs before it. */
	assert_ok(lb_catalog_time_to_id(f->cat, "main", ent[10].step, &got));
	assert_true(got == ent[10].id);
	assert_ok(lb_catalog_time_to_id(f->cat, "main", ent[10].step - 1, &got));
	assert_true(got == (ent[9].step == ent[10].step - LB_TIMEMAP_STEP ? ent[9].id :
	    ent[10].id));
	assert_int_equal(lb_catalog_time_to_id(f->cat, "main", INT64_MAX, &got), LB_ENOTFOUND);
	assert_ok(lb_catalog_time_to_id(f->cat, "aa", INT64_MAX, &got));
	assert_true(got == 7);
	assert_ok(lb_catalog_time_to_id(f->cat, "zz", INT64_MIN, &got));
	assert_true(got == 7);
}

/* ---------------------------------------------------------------- golden bytes */

static void
t_golden(void **state)
{
	struct fix		*f = *state;
	struct lb_segref	 s = seg(0x0102, 0x0203, 20260314);
	uint8_t			 k[128], v[256];
	size_t			 kl, n;
	/* state after create: version 1, next_id 1, indexed_id 1, last_received INT64_MIN */
	static const uint8_t	 st1[] = { 0x01,
	    0x01, 0, 0, 0, 0, 0, 0, 0,
	    0x01, 0, 0, 0, 0, 0, 0, 0,
	    0, 0, 0, 0, 0, 0, 0, 0x80 };
	/* The worked examples of FORMAT.md §5, CRCs included. */
	static const uint8_t	 tm1[] = { 0x01, 0x34, 0x12, 0, 0, 0, 0, 0, 0,
	    0x8d, 0xd0, 0xb4, 0x00 };
	static const uint8_t	 meta1[] = { 0x4c, 0x42, 0x43, 0x54, 0x02, 0, 0, 0,
	    0xd9, 0xb5, 0xd2, 0x26 };
	static const uint8_t	 st0[] = { 0x01,
	    0x01, 0, 0, 0, 0, 0, 0, 0,
	    0x01, 0, 0, 0, 0, 0, 0, 0,
	    0, 0, 0, 0, 0, 0, 0, 0x80,
	    0x17, 0xe9, 0xb1, 0x8e };
	static const uint8_t	 tk2[] = { 0x6d, 0x61, 0x69, 0x6e, 0x00,
	    0x80, 0x06, 0x2a, 0x99, 0xba, 0x0c, 0x60, 0x00 };

	mkls(f->cat, "main");
	mkls(f->cat, "fresh");
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, &s, 1));
	/* Time -1 µs falls in the step that starts at -1 s: key time 2^63 - 10^6. */
	assert_ok(lb_catalog_timemap_put(f->cat, "main", -1, 0x1234));
	assert_ok(lb_catalog_timemap_put(f->cat, "main", 1735689600123456LL, 0x1235));
	lb_catalog_close(f->cat);
	f->cat = NULL;

	n = raw_get(f->dir, LB_CAT_DB_META, LB_CAT_META_KEY, strlen(LB_CAT_META_KEY), v,
	    sizeof(v));
	assert_int_equal(n, LB_CAT_META_SIZE);
	assert_memory_equal(v, meta1, sizeof(meta1));
	n = raw_get(f->dir, LB_CAT_DB_STATE, "fresh", 5, v, sizeof(v));
	assert_int_equal(n, sizeof(st0));
	assert_memory_equal(v, st0, sizeof(st0));
	n = raw_get(f->dir, LB_CAT_DB_TIMEMAP, tk2, sizeof(tk2), v, sizeof(v));
	assert_int_equal(n, LB_CAT_TIMEMAP_SIZE);
	assert_true(lb_get64(v + 1) == 0x1235);

	n = raw_get(f->dir, LB_CAT_DB_STATE, "main", 4, v, sizeof(v));
	assert_int_equal(n, LB_CAT_STATE_SIZE);
	/* publish moved next_id to 0x204 */
	assert_memory_equal(v, "\x01\x04\x02", 3);
	assert_memory_equal(v + 3, st1 + 3, sizeof(st1) - 3);
	assert_int_equal(lb_get32(v + 25), lb_crc32(v, 25));

	n = raw_get(f->dir, LB_CAT_DB_LOGSPACES, "main", 4, v, sizeof(v));
	assert_int_equal(n, LB_CAT_LSCONF_SIZE);
	assert_int_equal(v[0], 1);
	assert_string_equal((char *)v + 1, LB_DEFAULT_DELIMS);
	for (size_t i = 1 + strlen(LB_DEFAULT_DELIMS); i < 65; i++)
		assert_int_equal(v[i], 0);
	assert_int_equal(lb_get32(v + 85), lb_crc32(v, 85));

	kl = rkey64(k, "main", 0x0102);
	assert_memory_equal(k, "main\0\0\0\0\0\0\0\x01\x02", 13);
	n = raw_get(f->dir, LB_CAT_DB_SEGMENTS, k, kl, v, sizeof(v));
	assert_int_equal(n, LB_CAT_SEGREF_SIZE);
	assert_int_equal(v[0], 1);
	assert_true(lb_get64(v + 1) == 0x0102 && lb_get64(v + 9) == 0x0203);
	assert_true(lb_get64(v + 17) == 0x0102 && lb_get64(v + 25) == 0x0102 * 1000);
	assert_true(lb_get64(v + 33) == 0x0203 * 1000 && lb_get64(v + 41) == 4096 + 0x0102);
	assert_int_equal(lb_get32(v + 49), 20260314);
	assert_int_equal(lb_get32(v + 53), 0);
	assert_string_equal((char *)v + 57, s.file);
	assert_int_equal(lb_get32(v + 121), lb_crc32(v, 121));

	kl = rkey32(k, "main", 20260314);
	assert_memory_equal(k + 5, "\x01\x35\x25\xda", 4);	/* 20260314 = 0x013525da */
	n = raw_get(f->dir, LB_CAT_DB_DAYS, k, kl, v, sizeof(v));
	assert_int_equal(n, LB_CAT_DAYREF_SIZE);
	assert_int_equal(v[0], 1);
	assert_int_equal(lb_get32(v + 1), 20260314);
	assert_true(lb_get64(v + 5) == 0x0102 && lb_get64(v + 13) == 0x0204);
	assert_true(lb_get64(v + 21) == 0x0102 * 1000 && lb_get64(v + 29) == 0x0203 * 1000);
	assert_int_equal(lb_get32(v + 37), lb_crc32(v, 37));

	kl = rkey64(k, "main", 0x7ffffffffff0bdc0ULL);	/* 2^63 - 1000000 */
	n = raw_get(f->dir, LB_CAT_DB_TIMEMAP, k, kl, v, sizeof(v));
	assert_int_equal(n, LB_CAT_TIMEMAP_SIZE);
	assert_memory_equal(v, tm1, sizeof(tm1));
	assert_int_equal(lb_get32(v + 9), lb_crc32(v, 9));
	assert_ok(lb_catalog_open(f->dir, LB_RDWR, &f->cat));
}

/* ---------------------------------------------------------------- damage and versions */

static void
t_corrupt(void **state)
{
	struct fix		*f = *state;
	struct lb_segref	 s = seg(10, 20, 20260101), *segs;
	struct lb_dayref	*days;
	struct lb_lsconf	 c;
	struct lb_lsstate	 st;
	struct names		 ns;
	uint8_t			 k[128], v[256], garbage[256];
	uint64_t		 r = 99, id;
	size_t			 kl, n;
	struct {
		const char	*db;
		const char	*name;	/* key: name [00 u64/u32] */
		int		 kind;	/* 0 name, 1 name 00 u64, 2 name 00 u32 */
		uint64_t	 kv;
	} dbs[] = {
		{ LB_CAT_DB_LOGSPACES, "main", 0, 0 },
		{ LB_CAT_DB_STATE, "main", 0, 0 },
		{ LB_CAT_DB_SEGMENTS, "main", 1, 10 },
		{ LB_CAT_DB_DAYS, "main", 2, 20260101 },
		{ LB_CAT_DB_TIMEMAP, "main", 1, LB_CAT_TIME_BIAS },
	};

	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)t_rnd(&r);
	mkls(f->cat, "main");
	assert_ok(lb_catalog_publish(f->cat, "main", NULL, 0, &s, 1));
	assert_ok(lb_catalog_timemap_put(f->cat, "main", 0, 10));
	lb_catalog_close(f->cat);
	f->cat = NULL;

	for (size_t d = 0; d < sizeof(dbs) / sizeof(dbs[0]); d++) {
		/* damage kinds: 0 random bytes of the right size, 1 one bit flipped, 2 short,
		 * 3 empty, 4 long, 5 a good CRC over an unknown version byte */
		for (int kind = 0; kind < 6; kind++) {
			size_t vl;
			int want = kind == 5 ? LB_EFORMAT : LB_ECORRUPT;

			if (dbs[d].kind == 0)
				kl = strlen(dbs[d].name), memcpy(k, dbs[d].name, kl);
			else if (dbs[d].kind == 1)
				kl = rkey64(k, dbs[d].name, dbs[d].kv);
			else
				kl = rkey32(k, dbs[d].name, (uint32_t)dbs[d].kv);
			vl = raw_get(f->dir, dbs[d].db, k, kl, v, sizeof(v));
			{
				uint8_t	 bad[256];
				size_t	 bl = vl;

				memcpy(bad, v, vl);
				switch (kind) {
				case 0:
					memcpy(bad, garbage, vl);
					break;
				case 1:
					bad[(t_rnd(&r) % vl)] ^= 1 << (t_rnd(&r) % 8);
					break;
				case 2:
					bl = vl - 1;
					break;
				case 3:
					bl = 0;
					break;
				case 4:
					bad[vl] = 0;
					bl = vl + 1;
					lb_put32(bad + vl - 3, lb_crc32(bad, vl - 3));
					break;
				case 5:
					bad[0] = 2;
					lb_put32(bad + vl - 4, lb_crc32(bad, vl - 4));
					break;
				}
				raw_put(f->dir, dbs[d].db, k, kl, bad, bl);
			}
			assert_ok(lb_catalog_open(f->dir, LB_RDONLY, &f->cat));
			switch (d) {
			case 0:
				assert_int_equal(lb_catalog_logspace_get(f->cat, "main", &c), want);
				break;
			case 1:
				assert_int_equal(lb_catalog_state_get(f->cat, "main", &st), want);
				break;
			case 2:
				assert_int_equal(lb_catalog_segments(f->cat, "main", 0, 100, &segs,
				    &n), want);
				assert_int_equal(lb_catalog_segments(f->cat, "main", 15, 15,
				    &segs, &n), want);
				break;
			case 3:
				assert_int_equal(lb_catalog_days(f->cat, "main", &days, &n), want);
				break;
			case 4:
				assert_int_equal(lb_catalog_time_to_id(f->cat, "main", -5, &id),
				    want);
				break;
			}
			lb_catalog_close(f->cat);
			/* The writer's calls that read the value refuse too. */
			assert_ok(lb_catalog_open(f->dir, LB_RDWR, &f->cat));
			switch (d) {
			case 1:
			case 3:
				s = seg(30, 40, 20260101);
				assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, &s, 1),
				    want);
				break;
			case 2:
				s = seg(21, 40, 20260101);
				assert_int_equal(lb_catalog_publish(f->cat, "main", NULL, 0, &s, 1),
				    want);
				break;
			}
			if (d == 3)
				assert_int_equal(lb_catalog_day_delete(f->cat, "main", 20260101),
				    want);
			lb_catalog_close(f->cat);
			f->cat = NULL;
			raw_put(f->dir, dbs[d].db, k, kl, v, vl);	/* repair */
		}
	}

	/* Keys of the wrong shape. */
	raw_put(f->dir, LB_CAT_DB_LOGSPACES, "Bad!", 4, v, 1);
	assert_ok(lb_catalog_open(f->dir, LB_RDONLY, &f->cat));
	memset(&ns, 0, sizeof(ns));
	assert_int_equal(lb_catalog_logspaces(f->cat, collect_name, &ns), LB_ECORRUPT);
	lb_catalog_close(f->cat);
	f->cat = NULL;
	raw_put(f->dir, LB_CAT_DB_SEGMENTS, "main\0\x01", 6, v, 1);
	assert_ok(lb_catalog_open(f->dir, LB_RDONLY, &f->cat));
	assert_int_equal(lb_catalog_segments(f->cat, "main", 0, 100, &segs, &n), LB_ECORRUPT);
	/* A segment value stored under another first id's key. */
	lb_catalog_close(f->cat);
	f->cat = NULL;
	kl = rkey64(k, "main", 10);
	n = raw_get(f->dir, LB_CAT_DB_SEGMENTS, k, kl, v, sizeof(v));
	kl = rkey64(k, "main", 11);
	raw_put(f->dir, LB_CAT_DB_SEGMENTS, k, kl, v, n);
	assert_ok(lb_catalog_open(f->dir, LB_RDONLY, &f->cat));
	assert_int_equal(lb_catalog_segments(f->cat, "main", 11, 11, &segs, &n), LB_ECORRUPT);
}

static void
t_version(void **state)
{
	struct fix		*f = *state;
	struct lb_catalog	*cat;
	uint8_t			 v[LB_CAT_META_SIZE], good[LB_CAT_META_SIZE];
	const char		*mk = LB_CAT_META_KEY;
	char			 path[512];

	lb_catalog_close(f->cat);
	f->cat = NULL;
	raw_get(f->dir, LB_CAT_DB_META, mk, strlen(mk), good, sizeof(good));

	/* A newer (or older) format: refused by readers and writers alike. */
	memcpy(v, good, sizeof(v));
	lb_put32(v + 4, LB_CAT_VERSION + 1);
	lb_put32(v + 8, lb_crc32(v, 8));
	raw_put(f->dir, LB_CAT_DB_META, mk, strlen(mk), v, sizeof(v));
	assert_int_equal(lb_catalog_open(f->dir, LB_RDONLY, &cat), LB_EFORMAT);
	assert_int_equal(lb_catalog_open(f->dir, LB_RDWR, &cat), LB_EFORMAT);
	lb_put32(v + 4, LB_CAT_VERSION_MIN - 1);
	lb_put32(v + 8, lb_crc32(v, 8));
	raw_put(f->dir, LB_CAT_DB_META, mk, strlen(mk), v, sizeof(v));
	assert_int_equal(lb_catalog_open(f->dir, LB_RDONLY, &cat), LB_EFORMAT);
	assert_int_equal(lb_catalog_open(f->dir, LB_RDWR, &cat), LB_EFORMAT);
	/*
	 * Version 1 (before zstd blocks): a reader opens it as it is, a writer
	 * raises it to this version, so the logbox that wrote it refuses it.
	 */
	{
		uint8_t	 v1[LB_CAT_META_SIZE] = { 0x4c, 0x42, 0x43, 0x54, 0x01, 0x00, 0x00,
		    0x00, 0x37, 0x1a, 0x67, 0x34 };
		uint8_t	 got[LB_CAT_META_SIZE];

		raw_put(f->dir, LB_CAT_DB_META, mk, strlen(mk), v1, sizeof(v1));
		assert_ok(lb_catalog_open(f->dir, LB_RDONLY, &cat));
		lb_catalog_close(cat);
		raw_get(f->dir, LB_CAT_DB_META, mk, strlen(mk), got, sizeof(got));
		assert_memory_equal(got, v1, sizeof(v1));
		assert_ok(lb_catalog_open(f->dir, LB_RDWR, &cat));
		lb_catalog_close(cat);
		raw_get(f->dir, LB_CAT_DB_META, mk, strlen(mk), got, sizeof(got));
		assert_memory_equal(got, good, sizeof(good));
		assert_int_equal(lb_get32(got + 4), LB_CAT_VERSION);
	}
	/* Not our magic. */
	memcpy(v, good, sizeof(v));
	memcpy(v, "LMDB", 4);
	lb_put32(v + 8, lb_crc32(v, 8));
	raw_put(f->dir, LB_CAT_DB_META, mk, strlen(mk), v, sizeof(v));
	assert_int_equal(lb_catalog_open(f->dir, LB_RDWR, &cat), LB_EFORMAT);
	/* Damaged. */
	memcpy(v, good, sizeof(v));
	v[5] ^= 0x40;
	raw_put(f->dir, LB_CAT_DB_META, mk, strlen(mk), v, sizeof(v));
	assert_int_equal(lb_catalog_open(f->dir, LB_RDONLY, &cat), LB_ECORRUPT);
	raw_put(f->dir, LB_CAT_DB_META, mk, strlen(mk), v, 3);
	assert_int_equal(lb_catalog_open(f->dir, LB_RDWR, &cat), LB_ECORRUPT);
	raw_put(f->dir, LB_CAT_DB_META, mk, strlen(mk), good, sizeof(good));
	assert_ok(lb_catalog_open(f->dir, LB_RDONLY, &f->cat));
	lb_catalog_close(f->cat);
	f->cat = NULL;

	/* An LMDB environment that is not a catalog. */
	snprintf(path, sizeof(path), "%s/other", f->dir);
	{
		char cdir[600];
		MDB_env *env;
		MDB_txn *txn;
		MDB_dbi dbi;

		snprintf(cdir, sizeof(cdir), "%s/%s", path, LB_DIR_CATALOG);
		assert_ok(lb_mkdirs(cdir));
		assert_ok(mdb_env_create(&env));
		assert_ok(mdb_env_set_maxdbs(env, 4));
		assert_ok(mdb_env_open(env, cdir, 0, 0640));
		assert_ok(mdb_txn_begin(env, NULL, 0, &txn));
		assert_ok(mdb_dbi_open(txn, "x", MDB_CREATE, &dbi));
		assert_ok(mdb_txn_commit(txn));
		mdb_env_close(env);
	}
	assert_int_equal(lb_catalog_open(path, LB_RDONLY, &cat), LB_EFORMAT);
	/* Not an LMDB file at all. */
	snprintf(path, sizeof(path), "%s/junk", f->dir);
	{
		char cfile[600];
		FILE *fp;

		snprintf(cfile, sizeof(cfile), "%s/%s", path, LB_DIR_CATALOG);
		assert_ok(lb_mkdirs(cfile));
		snprintf(cfile, sizeof(cfile), "%s/%s/data.mdb", path, LB_DIR_CATALOG);
		assert_non_null(fp = fopen(cfile, "w"));
		for (int i = 0; i < 8192; i++)
			fputc(i * 7, fp);
		fclose(fp);
	}
	assert_int_equal(lb_catalog_open(path, LB_RDONLY, &cat), LB_EFORMAT);
	assert_int_equal(lb_catalog_open(path, LB_RDWR, &cat), LB_EFORMAT);
	/* Nothing there: a reader does not create. */
	snprintf(path, sizeof(path), "%s/none", f->dir);
	assert_int_equal(lb_catalog_open(path, LB_RDONLY, &cat), ENOENT);
	assert_int_equal(lb_catalog_open(path, 7, &cat), EINVAL);
	assert_ok(lb_catalog_open(f->dir, LB_RDWR, &f->cat));
}

/* ---------------------------------------------------------------- concurrent readers */

/*
 * The writer publishes contiguous segments from id 1 and, every few steps, merges the first
 * two into one. A consistent snapshot is therefore always: ids 1..N, each next segment
 * starting right after the previous, count == size of the range.
 */
static int
consistent(struct lb_catalog *cat, size_t *nsegs)
{
	struct lb_segref	*s;
	size_t			 n;
	int			 rc;

	if ((rc = lb_catalog_segments(cat, "main", 0, UINT64_MAX, &s, &n)) != 0)
		return (rc);
	for (size_t i = 0; i < n; i++) {
		if ((i == 0 && s[i].first_id != 1) ||
		    (i > 0 && s[i].first_id != s[i - 1].last_id + 1) ||
		    s[i].count != s[i].last_id - s[i].first_id + 1) {
			free(s);
			return (-1);
		}
	}
	free(s);
	*nsegs = n;
	return (0);
}

static int
writer_step(struct lb_catalog *cat, int i, uint64_t *next)
{
	struct lb_segref	*s, m;
	size_t			 n;
	uint64_t		 del[2];
	int			 rc;

	if (i % 3 == 2) {
		if ((rc = lb_catalog_segments(cat, "main", 0, UINT64_MAX, &s, &n)) != 0)
			return (rc);
		if (n >= 2) {
			del[0] = s[0].first_id;
			del[1] = s[1].first_id;
			m = seg(s[0].first_id, s[1].last_id, 20260101);
			m.level = 1;
			free(s);
			return (lb_catalog_publish(cat, "main", del, 2, &m, 1));
		}
		free(s);
	}
	m = seg(*next, *next + 9 + (uint64_t)(i % 5), 20260101);
	*next = m.last_id + 1;
	return (lb_catalog_publish(cat, "main", NULL, 0, &m, 1));
}

struct reader_arg {
	struct lb_catalog	*cat;
	volatile int		 stop;
	int			 bad;
	int			 reads;
};

static void *
reader_thread(void *p)
{
	struct reader_arg	*a = p;
	size_t			 n;

	while (!a->stop) {
		if (consistent(a->cat, &n) != 0)
			a->bad++;
		a->reads++;
	}
	return (NULL);
}

/* A read-only handle and a writer in the same process; the reader runs in another thread. */
static void
t_two_handles(void **state)
{
	struct fix		*f = *state;
	struct lb_catalog	*rd;
	struct reader_arg	 a;
	struct lb_lsstate	 st;
	pthread_t		 th;
	uint64_t		 next = 1;
	size_t			 n;

	mkls(f->cat, "main");
	assert_ok(lb_catalog_open(f->dir, LB_RDONLY, &rd));
	/* The reader sees each commit as soon as it returns. */
	assert_ok(writer_step(f->cat, 0, &next));
	assert_ok(lb_catalog_state_get(rd, "main", &st));
	assert_true(st.next_id == next);
	assert_ok(consistent(rd, &n));
	assert_int_equal(n, 1);

	memset(&a, 0, sizeof(a));
	a.cat = rd;
	assert_int_equal(pthread_create(&th, NULL, reader_thread, &a), 0);
	for (int i = 1; i < 150; i++)
		assert_ok(writer_step(f->cat, i, &next));
	a.stop = 1;
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.bad, 0);
	assert_true(a.reads > 0);
	assert_ok(consistent(rd, &n));
	assert_ok(lb_catalog_state_get(rd, "main", &st));
	assert_true(st.next_id == next);
	lb_catalog_close(rd);
}

/* A reader in a forked child reads in a loop while the parent publishes. */
static void
t_fork_reader(void **state)
{
	struct fix	*f = *state;
	uint64_t	 next = 1;
	int		 ready[2], status;
	pid_t		 pid;
	char		 c;

	mkls(f->cat, "main");
	assert_ok(writer_step(f->cat, 0, &next));
	lb_catalog_close(f->cat);
	f->cat = NULL;
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct lb_catalog	*rd;
		size_t			 n, most = 0;
		int			 reads = 0;

		close(ready[0]);
		if (lb_catalog_open(f->dir, LB_RDONLY, &rd) != 0)
			_exit(2);
		(void)write(ready[1], "r", 1);
		/* Read until the parent has published and merged a while. */
		for (reads = 0; reads < 100000; reads++) {
			if (consistent(rd, &n) != 0)
				_exit(1);
			if (n > most)
				most = n;
			if (getppid() == 1)
				_exit(3);
			if (reads > 200 && access(f->dir, F_OK) == 0) {
				char done[600];

				snprintf(done, sizeof(done), "%s/done", f->dir);
				if (access(done, F_OK) == 0)
					break;
			}
		}
		lb_catalog_close(rd);
		_exit(most > 1 ? 0 : 4);
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	assert_ok(lb_catalog_open(f->dir, LB_RDWR, &f->cat));
	for (int i = 1; i < 200; i++)
		assert_ok(writer_step(f->cat, i, &next));
	{
		char done[600];
		FILE *fp;

		snprintf(done, sizeof(done), "%s/done", f->dir);
		assert_non_null(fp = fopen(done, "w"));
		fclose(fp);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static int
count_reader(const char *msg, void *ctx)
{
	int *n = ctx;

	if (strstr(msg, "pid") == NULL && strstr(msg, "no active") == NULL)
		(*n)++;
	return (0);
}

/*
 * A reader killed inside a read transaction leaves a stale slot in the lock file, which would
 * pin old pages forever; lb_catalog_open() clears it. A helper process keeps the environment
 * open throughout, as searchd would, so that no open gets to reset the lock file wholesale.
 */
static void
t_stale_reader(void **state)
{
	struct fix	*f = *state;
	char		 path[512];
	int		 pa[2], pb[2], qb[2], status, cnt;
	pid_t		 a, b;
	char		 c;

	mkls(f->cat, "main");
	lb_catalog_close(f->cat);
	f->cat = NULL;
	snprintf(path, sizeof(path), "%s/%s", f->dir, LB_DIR_CATALOG);
	assert_int_equal(pipe(pa), 0);
	assert_int_equal(pipe(pb), 0);
	assert_int_equal(pipe(qb), 0);
	if ((b = fork()) == 0) {
		MDB_env	*env;

		close(qb[1]);
		close(pb[0]);
		if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, LB_CAT_MAXDBS) ||
		    mdb_env_open(env, path, MDB_RDONLY, 0))
			_exit(2);
		cnt = 0;
		(void)write(pb[1], &cnt, sizeof(cnt));
		/* Each byte from the parent: report the number of reader slots in use. */
		while (read(qb[0], &c, 1) == 1) {
			cnt = 0;
			mdb_reader_list(env, count_reader, &cnt);
			(void)write(pb[1], &cnt, sizeof(cnt));
		}
		_exit(0);
	}
	assert_true(b > 0);
	assert_int_equal(read(pb[0], &cnt, sizeof(cnt)), sizeof(cnt));
	if ((a = fork()) == 0) {
		MDB_env	*env;
		MDB_txn	*txn;

		close(qb[1]);
		if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, LB_CAT_MAXDBS) ||
		    mdb_env_open(env, path, MDB_RDONLY, 0) ||
		    mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))
			_exit(2);
		(void)write(pa[1], "r", 1);
		pause();
		_exit(0);
	}
	assert_true(a > 0);
	assert_int_equal(read(pa[0], &c, 1), 1);
	kill(a, SIGKILL);
	assert_int_equal(waitpid(a, &status, 0), a);

	assert_int_equal(write(qb[1], "?", 1), 1);
	assert_int_equal(read(pb[0], &cnt, sizeof(cnt)), sizeof(cnt));
	assert_int_equal(cnt, 1);	/* the dead reader's slot */
	assert_ok(lb_catalog_open(f->dir, LB_RDONLY, &f->cat));
	assert_int_equal(write(qb[1], "?", 1), 1);
	assert_int_equal(read(pb[0], &cnt, sizeof(cnt)), sizeof(cnt));
	assert_int_equal(cnt, 0);

	close(qb[1]);
	assert_int_equal(waitpid(b, &status, 0), b);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pa[0]); close(pa[1]); close(pb[0]); close(pb[1]); close(qb[0]);
}

/*
 * A reader that comes while the first writer has created the LMDB files but not committed
 * its first transaction finds "no catalog yet" (ENOENT), not damage (LB_EFORMAT).
 */
static void
t_empty_env_is_no_catalog(void **state)
{
	char		 dir[256], env[300];
	MDB_env		*e;
	MDB_txn		*txn;
	MDB_dbi		 dbi;
	struct lb_catalog *cat = NULL;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	snprintf(env, sizeof(env), "%s/%s", dir, LB_DIR_CATALOG);
	assert_int_equal(mkdir(env, 0750), 0);
	assert_int_equal(mdb_env_create(&e), 0);
	assert_int_equal(mdb_env_set_maxdbs(e, 8), 0);
	assert_int_equal(mdb_env_open(e, env, 0, 0640), 0);
	assert_int_equal(lb_catalog_open(dir, LB_RDONLY, &cat), ENOENT);
	assert_null(cat);
	/* A named database that is not ours: that is something else, not "not yet". */
	assert_int_equal(mdb_txn_begin(e, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "other", MDB_CREATE, &dbi), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	assert_int_equal(lb_catalog_open(dir, LB_RDONLY, &cat), LB_EFORMAT);
	mdb_env_close(e);
	t_rmtree(dir);
}

T_MAIN(
	cmocka_unit_test_setup_teardown(t_logspace_roundtrip, setup, teardown),
	cmocka_unit_test(t_empty_env_is_no_catalog),
	cmocka_unit_test_setup_teardown(t_bad_names, setup, teardown),
	cmocka_unit_test_setup_teardown(t_state, setup, teardown),
	cmocka_unit_test_setup_teardown(t_publish, setup, teardown),
	cmocka_unit_test_setup_teardown(t_publish_atomic, setup, teardown),
	cmocka_unit_test_setup_teardown(t_segments_random, setup, teardown),
	cmocka_unit_test_setup_teardown(t_days, setup, teardown),
	cmocka_unit_test_setup_teardown(t_day_import, setup, teardown),
	cmocka_unit_test_setup_teardown(t_timemap, setup, teardown),
	cmocka_unit_test_setup_teardown(t_golden, setup, teardown),
	cmocka_unit_test_setup_teardown(t_corrupt, setup, teardown),
	cmocka_unit_test_setup_teardown(t_version, setup, teardown),
	cmocka_unit_test_setup_teardown(t_two_handles, setup, teardown),
	cmocka_unit_test_setup_teardown(t_fork_reader, setup, teardown),
	cmocka_unit_test_setup_teardown(t_stale_reader, setup, teardown))
