/*
 * fz_catalog.c — the catalog's value and key decoders against arbitrary bytes. Each input
 * stores one value (under a real key of a small catalog, or under a key taken from the input)
 * with the LMDB API, then runs every read call of the catalog on it, then puts the catalog
 * back as it was. Reads must return 0, LB_ENOTFOUND, LB_ECORRUPT or LB_EFORMAT, and what they
 * return must be sane (segments ordered, disjoint and overlapping the range asked for).
 *
 * Input: byte 0 picks the database, byte 1 the mode (bit 0: key from the input, whose length
 * is byte 2 and bytes follow; bit 1: the harness fixes the value's trailing CRC so the checks
 * past it are reached), the rest is the value.
 */
#include <errno.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char	 dir[256];
static char	 envdir[300];

#define CHECK(x)	do { if (!(x)) __builtin_trap(); } while (0)

static const char *dbs[] = { LB_CAT_DB_META, LB_CAT_DB_LOGSPACES, LB_CAT_DB_STATE,
    LB_CAT_DB_SEGMENTS, LB_CAT_DB_DAYS, LB_CAT_DB_TIMEMAP };

static int
allowed(int rc)
{
	return (rc == 0 || rc == LB_ENOTFOUND || rc == LB_ECORRUPT || rc == LB_EFORMAT);
}

static void
cleanup(void)
{
	char p[400];

	snprintf(p, sizeof(p), "%s/data.mdb", envdir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lock.mdb", envdir);
	unlink(p);
	rmdir(envdir);
	rmdir(dir);
}

static void
init(void)
{
	struct lb_catalog	*cat;
	struct lb_lsconf	 c;
	struct lb_segref	 s[2];
	const char		*t = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/fzcat.XXXXXX", t != NULL ? t : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	atexit(cleanup);
	snprintf(envdir, sizeof(envdir), "%s/%s", dir, LB_DIR_CATALOG);
	CHECK(lb_catalog_open(dir, LB_RDWR, &cat) == 0);
	lb_lsconf_default(&c);
	CHECK(lb_catalog_logspace_create(cat, "main", &c) == 0);
	memset(s, 0, sizeof(s));
	s[0].first_id = 10;
	s[0].last_id = 20;
	s[1].first_id = 30;
	s[1].last_id = 40;
	for (int i = 0; i < 2; i++) {
		s[i].count = 11;
		s[i].day = 20260101;
		snprintf(s[i].file, sizeof(s[i].file), "s%d.seg", i);
	}
	CHECK(lb_catalog_publish(cat, "main", NULL, 0, s, 2) == 0);
	CHECK(lb_catalog_timemap_put(cat, "main", 0, 10) == 0);
	CHECK(lb_catalog_timemap_put(cat, "main", 5000000, 30) == 0);
	lb_catalog_close(cat);
}

/* The canonical key of database i ("main" and its first record). */
static size_t
canon_key(int i, uint8_t *k)
{
	switch (i) {
	case 0:
		memcpy(k, LB_CAT_META_KEY, strlen(LB_CAT_META_KEY));
		return (strlen(LB_CAT_META_KEY));
	case 1:
	case 2:
		memcpy(k, "main", 4);
		return (4);
	case 4:
		memcpy(k, "main\0\x01\x35\x23\x85", 9);	/* 20260101 */
		return (9);
	case 3:
		memcpy(k, "main\0\0\0\0\0\0\0\0\x0a", 13);
		return (13);
	default:
		memcpy(k, "main\0\x80\0\0\0\0\0\0\0", 13);
		return (13);
	}
}

static void
check_reads(void)
{
	struct lb_catalog	*cat;
	struct lb_lsconf	 c;
	struct lb_lsstate	 st;
	struct lb_segref	*s;
	struct lb_dayref	*d;
	size_t			 n;
	uint64_t		 id;
	int			 rc;
	static const uint64_t	 ranges[][2] = { { 0, UINT64_MAX }, { 15, 15 }, { 21, 29 },
	    { 25, 35 }, { 41, 50 } };
	static const int64_t	 times[] = { INT64_MIN, -1, 0, 4999999, 5000000, INT64_MAX };

	rc = lb_catalog_open(dir, LB_RDONLY, &cat);
	CHECK(rc == 0 || rc == LB_ECORRUPT || rc == LB_EFORMAT);
	if (rc != 0)
		return;
	CHECK(allowed(lb_catalog_logspace_get(cat, "main", &c)));
	CHECK(allowed(lb_catalog_state_get(cat, "main", &st)));
	for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
		uint64_t lo = ranges[r][0], hi = ranges[r][1];

		rc = lb_catalog_segments(cat, "main", lo, hi, &s, &n);
		CHECK(allowed(rc));
		if (rc != 0)
			continue;
		for (size_t i = 0; i < n; i++) {
			CHECK(s[i].first_id <= s[i].last_id);
			CHECK(s[i].last_id >= lo && s[i].first_id <= hi);
			CHECK(s[i].file[0] != '\0' && memchr(s[i].file, 0, sizeof(s[i].file)));
			CHECK(i == 0 || s[i].first_id > s[i - 1].first_id);
		}
		free(s);
	}
	rc = lb_catalog_days(cat, "main", &d, &n);
	CHECK(allowed(rc));
	if (rc == 0) {
		for (size_t i = 0; i < n; i++)
			CHECK(d[i].first_id <= d[i].next_id && (i == 0 || d[i].day > d[i - 1].day));
		free(d);
	}
	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++)
		CHECK(allowed(lb_catalog_time_to_id(cat, "main", times[i], &id)));
	lb_catalog_close(cat);
}

/* Stores v under k in database db (v NULL: deletes k); returns the old value in old. */
static void
raw_swap(const char *db, const uint8_t *k, size_t klen, const uint8_t *v, size_t vlen,
    uint8_t **old, size_t *oldlen)
{
	MDB_env	*env;
	MDB_txn	*txn;
	MDB_dbi	 dbi;
	MDB_val	 key = { klen, (void *)(uintptr_t)k }, val;

	CHECK(mdb_env_create(&env) == 0);
	CHECK(mdb_env_set_maxdbs(env, LB_CAT_MAXDBS) == 0);
	CHECK(mdb_env_open(env, envdir, MDB_NOSYNC, 0640) == 0);
	CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
	CHECK(mdb_dbi_open(txn, db, 0, &dbi) == 0);
	if (old != NULL) {
		*old = NULL;
		*oldlen = 0;
		if (mdb_get(txn, dbi, &key, &val) == 0) {
			CHECK((*old = malloc(val.mv_size + 1)) != NULL);
			memcpy(*old, val.mv_data, val.mv_size);
			*oldlen = val.mv_size;
		}
	}
	if (v != NULL) {
		val.mv_data = (void *)(uintptr_t)v;
		val.mv_size = vlen;
		CHECK(mdb_put(txn, dbi, &key, &val, 0) == 0);
	} else {
		int rc = mdb_del(txn, dbi, &key, NULL);

		CHECK(rc == 0 || rc == MDB_NOTFOUND);
	}
	CHECK(mdb_txn_commit(txn) == 0);
	mdb_env_close(env);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t		 k[512], v[70000], *old;
	size_t		 klen, vlen, oldlen;
	int		 db, mode;

	if (dir[0] == '\0')
		init();
	if (size < 2)
		return (0);
	db = data[0] % 6;
	mode = data[1];
	data += 2;
	size -= 2;
	if (mode & 1) {
		if (size < 1)
			return (0);
		klen = data[0] % 100;
		if (klen == 0 || klen + 1 > size)
			return (0);
		memcpy(k, data + 1, klen);
		data += 1 + klen;
		size -= 1 + klen;
	} else
		klen = canon_key(db, k);
	vlen = size < sizeof(v) ? size : sizeof(v);
	memcpy(v, data, vlen);
	if ((mode & 2) && vlen >= 4)
		lb_put32(v + vlen - 4, lb_crc32(v, vlen - 4));
	/* LMDB rejects empty keys and keys past its limit itself. */
	if (klen > 511)
		return (0);
	raw_swap(dbs[db], k, klen, v, vlen, &old, &oldlen);
	check_reads();
	raw_swap(dbs[db], k, klen, old, oldlen, NULL, NULL);
	free(old);
	return (0);
}
