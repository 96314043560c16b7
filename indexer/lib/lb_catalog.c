/*
 * lb_catalog.c — the LMDB catalog in <data>/catalog/: logspaces and their settings, published
 * segments, days, the sparse time→id map and each logspace's next id / recovery checkpoint.
 * It owns the encoding of every catalog key and value (FORMAT.md §5) and nothing on the file
 * system beyond the LMDB environment: segment and message files are written by their modules
 * before the catalog points at them.
 *
 * The one idea: every call is one LMDB transaction. Readers take their own read transaction
 * per call (a consistent snapshot; MDB_NOTLS, so one handle may be shared by threads and a
 * thread may hold several), writers one write transaction per call, committed with LMDB's
 * default synchronous commit, so a call that returns 0 is durable. Every value is a fixed,
 * versioned little-endian layout ending in a CRC-32 of its other bytes and is checked on every
 * read: damage is LB_ECORRUPT, never a silently wrong answer.
 *
 * LMDB caveat: open a data directory's catalog at most once per process at a time (LMDB's
 * reader liveness locks are per process; closing a second handle drops the first one's).
 */
#include <errno.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"

/* Defaults of a new logspace (not stored constants: a logspace stores its own settings). */
#define LSCONF_FLUSH_MS		1000			/* a segment at least every second */
#define LSCONF_MEM_LIMIT	(1024ULL * 1024 * 1024)	/* 1 GiB (DESIGN.md) */
#define LSCONF_FSYNC_MS		1000			/* fsync the WAL once a second */

#define KEY_MAX		(LB_NAME_MAX + 1 + 8)	/* name 00 u64 */

struct lb_catalog {
	MDB_env		*env;
	int		 mode;		/* LB_RDONLY or LB_RDWR */
	MDB_dbi		 meta;		/* "format" -> magic, version */
	MDB_dbi		 ls;		/* name -> lb_lsconf */
	MDB_dbi		 seg;		/* name 00 first_id -> lb_segref */
	MDB_dbi		 day;		/* name 00 day -> lb_dayref */
	MDB_dbi		 tmap;		/* name 00 step time -> id */
	MDB_dbi		 state;		/* name -> lb_lsstate */
};

/* ---------------------------------------------------------------- names and keys */

/*
 * A logspace name of the right form (lb_logspace_name_ok(), reserved names let through: a
 * catalog written before they were refused stays readable). Only a new logspace must also
 * not be reserved (ls_write()).
 */
static int
name_ok_bytes(const uint8_t *p, size_t n)
{
	return (lb_logspace_name_ok(p, n, NULL) || lb_logspace_name_reserved(p, n));
}

/* Length of a well-formed logspace name (name_ok_bytes()), or 0. */
static size_t
name_len(const char *name)
{
	size_t	 n;

	if (name == NULL)
		return (0);
	n = strnlen(name, LB_NAME_MAX + 1);
	return (name_ok_bytes((const uint8_t *)name, n) ? n : 0);
}

static void
put32be(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static uint32_t
get32be(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* k = name 00 (the prefix of every per-logspace key); returns its length. */
static size_t
key_prefix(uint8_t *k, const char *name, size_t nlen)
{
	memcpy(k, name, nlen);
	k[nlen] = 0;
	return (nlen + 1);
}

/* k = name 00 v(BE u64). */
static size_t
key_u64(uint8_t *k, const char *name, size_t nlen, uint64_t v)
{
	size_t	 n = key_prefix(k, name, nlen);

	lb_put64be(k + n, v);
	return (n + 8);
}

/* k = name 00 v(BE u32). */
static size_t
key_u32(uint8_t *k, const char *name, size_t nlen, uint32_t v)
{
	size_t	 n = key_prefix(k, name, nlen);

	put32be(k + n, v);
	return (n + 4);
}

/*
 * The time-map key time of t: the start of its LB_TIMEMAP_STEP (floor, also for negative
 * times), biased by 2^63 so that the unsigned big-endian key sorts like the signed time. Times
 * within a step of INT64_MIN clamp to INT64_MIN (biased 0).
 */
static uint64_t
tm_keytime(int64_t t)
{
	int64_t	 q = t / LB_TIMEMAP_STEP;

	if (t % LB_TIMEMAP_STEP < 0)
		q--;
	if (q < INT64_MIN / LB_TIMEMAP_STEP)
		return (0);
	return ((uint64_t)(q * LB_TIMEMAP_STEP) ^ LB_CAT_TIME_BIAS);
}

/* Does key k start with the logspace prefix p[0..plen)? */
static int
key_is(const MDB_val *k, const uint8_t *p, size_t plen)
{
	return (k->mv_size >= plen && memcmp(k->mv_data, p, plen) == 0);
}

int
lb_day_ok(uint32_t d)
{
	uint32_t y = d / 10000, m = d / 100 % 100, dd = d % 100;

	return (y >= 1970 && y <= 9999 && m >= 1 && m <= 12 && dd >= 1 && dd <= 31);
}

/* A segment file name: non-empty, NUL-terminated in 64 bytes, no '/', not "." or "..". */
static int
file_ok(const char *f)
{
	size_t	 n = strnlen(f, sizeof(((struct lb_segref *)0)->file));

	if (n == 0 || n >= sizeof(((struct lb_segref *)0)->file))
		return (0);
	if (memchr(f, '/', n) != NULL || strcmp(f, ".") == 0 || strcmp(f, "..") == 0)
		return (0);
	return (1);
}

/* ---------------------------------------------------------------- values */

/* Stores the CRC of v[0..len-4) in the last four bytes. */
static void
seal(uint8_t *v, size_t len)
{
	lb_put32(v + len - 4, lb_crc32(v, len - 4));
}

/*
 * Checks a value's CRC, version byte and size. A value whose CRC matches but whose version is
 * not one this code knows is LB_EFORMAT; any other mismatch is LB_ECORRUPT.
 */
static int
check(const MDB_val *v, size_t want)
{
	const uint8_t	*p = v->mv_data;

	if (v->mv_size < 5 || lb_get32(p + v->mv_size - 4) != lb_crc32(p, v->mv_size - 4))
		return (LB_ECORRUPT);
	if (p[0] != LB_CAT_VALUE_V1)
		return (LB_EFORMAT);
	if (v->mv_size != want)
		return (LB_ECORRUPT);
	return (0);
}

static void
lsconf_enc(uint8_t *v, const struct lb_lsconf *c)
{
	memset(v, 0, LB_CAT_LSCONF_SIZE);
	v[0] = LB_CAT_VALUE_V1;
	memcpy(v + 1, c->delims, strnlen(c->delims, sizeof(c->delims)));
	lb_put32(v + 65, c->retention_days);
	lb_put32(v + 69, c->flush_ms);
	lb_put64(v + 73, c->mem_limit);
	lb_put32(v + 81, c->fsync_ms);
	seal(v, LB_CAT_LSCONF_SIZE);
}

static int
lsconf_dec(const MDB_val *val, struct lb_lsconf *c)
{
	const uint8_t	*v = val->mv_data;
	size_t		 n;
	int		 rc;

	if ((rc = check(val, LB_CAT_LSCONF_SIZE)) != 0)
		return (rc);
	if ((n = strnlen((const char *)v + 1, 64)) == 64)
		return (LB_ECORRUPT);
	memset(c, 0, sizeof(*c));
	memcpy(c->delims, v + 1, n);
	c->retention_days = lb_get32(v + 65);
	c->flush_ms = lb_get32(v + 69);
	c->mem_limit = lb_get64(v + 73);
	c->fsync_ms = lb_get32(v + 81);
	return (0);
}

static void
segref_enc(uint8_t *v, const struct lb_segref *s)
{
	memset(v, 0, LB_CAT_SEGREF_SIZE);
	v[0] = LB_CAT_VALUE_V1;
	lb_put64(v + 1, s->first_id);
	lb_put64(v + 9, s->last_id);
	lb_put64(v + 17, s->count);
	lb_put64(v + 25, (uint64_t)s->tmin);
	lb_put64(v + 33, (uint64_t)s->tmax);
	lb_put64(v + 41, s->size);
	lb_put32(v + 49, s->day);
	lb_put32(v + 53, s->level);
	memcpy(v + 57, s->file, strnlen(s->file, sizeof(s->file)));
	seal(v, LB_CAT_SEGREF_SIZE);
}

/* Decodes a segments entry; plen is the length of its key's name 00 prefix. */
static int
segref_dec(const MDB_val *key, size_t plen, const MDB_val *val, struct lb_segref *s)
{
	const uint8_t	*v = val->mv_data;
	size_t		 n;
	int		 rc;

	if (key->mv_size != plen + 8)
		return (LB_ECORRUPT);
	if ((rc = check(val, LB_CAT_SEGREF_SIZE)) != 0)
		return (rc);
	memset(s, 0, sizeof(*s));
	s->first_id = lb_get64(v + 1);
	s->last_id = lb_get64(v + 9);
	s->count = lb_get64(v + 17);
	s->tmin = (int64_t)lb_get64(v + 25);
	s->tmax = (int64_t)lb_get64(v + 33);
	s->size = lb_get64(v + 41);
	s->day = lb_get32(v + 49);
	s->level = lb_get32(v + 53);
	if ((n = strnlen((const char *)v + 57, 64)) == 64 || n == 0)
		return (LB_ECORRUPT);
	memcpy(s->file, v + 57, n);
	if (s->first_id != lb_get64be((const uint8_t *)key->mv_data + plen) ||
	    s->last_id < s->first_id)
		return (LB_ECORRUPT);
	return (0);
}

static void
dayref_enc(uint8_t *v, const struct lb_dayref *d)
{
	v[0] = LB_CAT_VALUE_V1;
	lb_put32(v + 1, d->day);
	lb_put64(v + 5, d->first_id);
	lb_put64(v + 13, d->next_id);
	lb_put64(v + 21, (uint64_t)d->tmin);
	lb_put64(v + 29, (uint64_t)d->tmax);
	seal(v, LB_CAT_DAYREF_SIZE);
}

static int
dayref_dec(const MDB_val *key, size_t plen, const MDB_val *val, struct lb_dayref *d)
{
	const uint8_t	*v = val->mv_data;
	int		 rc;

	if (key->mv_size != plen + 4)
		return (LB_ECORRUPT);
	if ((rc = check(val, LB_CAT_DAYREF_SIZE)) != 0)
		return (rc);
	d->day = lb_get32(v + 1);
	d->first_id = lb_get64(v + 5);
	d->next_id = lb_get64(v + 13);
	d->tmin = (int64_t)lb_get64(v + 21);
	d->tmax = (int64_t)lb_get64(v + 29);
	if (d->day != get32be((const uint8_t *)key->mv_data + plen) ||
	    d->next_id < d->first_id)
		return (LB_ECORRUPT);
	return (0);
}

static void
tmap_enc(uint8_t *v, uint64_t id)
{
	v[0] = LB_CAT_VALUE_V1;
	lb_put64(v + 1, id);
	seal(v, LB_CAT_TIMEMAP_SIZE);
}

static int
tmap_dec(const MDB_val *key, size_t plen, const MDB_val *val, uint64_t *id)
{
	int	 rc;

	if (key->mv_size != plen + 8)
		return (LB_ECORRUPT);
	if ((rc = check(val, LB_CAT_TIMEMAP_SIZE)) != 0)
		return (rc);
	*id = lb_get64((const uint8_t *)val->mv_data + 1);
	return (0);
}

static void
state_enc(uint8_t *v, const struct lb_lsstate *st)
{
	v[0] = LB_CAT_VALUE_V1;
	lb_put64(v + 1, st->next_id);
	lb_put64(v + 9, st->indexed_id);
	lb_put64(v + 17, (uint64_t)st->last_received);
	seal(v, LB_CAT_STATE_SIZE);
}

static int
state_dec(const MDB_val *val, struct lb_lsstate *st)
{
	const uint8_t	*v = val->mv_data;
	int		 rc;

	if ((rc = check(val, LB_CAT_STATE_SIZE)) != 0)
		return (rc);
	st->next_id = lb_get64(v + 1);
	st->indexed_id = lb_get64(v + 9);
	st->last_received = (int64_t)lb_get64(v + 17);
	if (st->indexed_id > st->next_id)
		return (LB_ECORRUPT);
	return (0);
}

static void
meta_enc(uint8_t *v)
{
	lb_put32(v, LB_CAT_MAGIC);
	lb_put32(v + 4, LB_CAT_VERSION);
	seal(v, LB_CAT_META_SIZE);
}

/*
 * The meta record's layout never changes: only its version field does. Versions
 * LB_CAT_VERSION_MIN..LB_CAT_VERSION open; *version is the one found.
 */
static int
meta_check(const MDB_val *val, uint32_t *version)
{
	const uint8_t	*v = val->mv_data;

	if (val->mv_size != LB_CAT_META_SIZE || lb_get32(v + 8) != lb_crc32(v, 8))
		return (LB_ECORRUPT);
	*version = lb_get32(v + 4);
	if (lb_get32(v) != LB_CAT_MAGIC || *version < LB_CAT_VERSION_MIN ||
	    *version > LB_CAT_VERSION)
		return (LB_EFORMAT);
	return (0);
}

/* ---------------------------------------------------------------- transactions */

static int
rtxn(struct lb_catalog *cat, MDB_txn **txn)
{
	return (mdb_txn_begin(cat->env, NULL, MDB_RDONLY, txn));
}

static int
wtxn(struct lb_catalog *cat, MDB_txn **txn)
{
	if (cat->mode != LB_RDWR)
		return (EROFS);
	return (mdb_txn_begin(cat->env, NULL, 0, txn));
}

static int
get(MDB_txn *txn, MDB_dbi dbi, const void *k, size_t klen, MDB_val *val)
{
	MDB_val	 key = { klen, (void *)(uintptr_t)k };
	int	 rc;

	rc = mdb_get(txn, dbi, &key, val);
	return (rc == MDB_NOTFOUND ? LB_ENOTFOUND : rc);
}

static int
put(MDB_txn *txn, MDB_dbi dbi, const void *k, size_t klen, const void *v, size_t vlen,
    unsigned flags)
{
	MDB_val	 key = { klen, (void *)(uintptr_t)k };
	MDB_val	 val = { vlen, (void *)(uintptr_t)v };

	return (mdb_put(txn, dbi, &key, &val, flags));
}

/* 0 when the logspace exists, LB_ENOTFOUND when not. */
static int
ls_exists(struct lb_catalog *cat, MDB_txn *txn, const char *name, size_t nlen)
{
	MDB_val	 val;

	return (get(txn, cat->ls, name, nlen, &val));
}

/*
 * Positions c at the last entry with key <= k[0..klen) that starts with the logspace prefix
 * k[0..plen) and fills key/val. LB_ENOTFOUND when there is none.
 */
static int
cur_floor(MDB_cursor *c, const uint8_t *k, size_t klen, size_t plen, MDB_val *key,
    MDB_val *val)
{
	int	 rc;

	key->mv_data = (void *)(uintptr_t)k;
	key->mv_size = klen;
	rc = mdb_cursor_get(c, key, val, MDB_SET_RANGE);
	if (rc == 0 && key->mv_size == klen && memcmp(key->mv_data, k, klen) == 0)
		return (0);
	if (rc == 0)
		rc = mdb_cursor_get(c, key, val, MDB_PREV);
	else if (rc == MDB_NOTFOUND)
		rc = mdb_cursor_get(c, key, val, MDB_LAST);
	if (rc == MDB_NOTFOUND)
		return (LB_ENOTFOUND);
	if (rc != 0)
		return (rc);
	return (key_is(key, k, plen) ? 0 : LB_ENOTFOUND);
}

/* Positions c at the first entry with key >= k that starts with the prefix k[0..plen). */
static int
cur_ceil(MDB_cursor *c, const uint8_t *k, size_t klen, size_t plen, MDB_val *key,
    MDB_val *val)
{
	int	 rc;

	key->mv_data = (void *)(uintptr_t)k;
	key->mv_size = klen;
	rc = mdb_cursor_get(c, key, val, MDB_SET_RANGE);
	if (rc == MDB_NOTFOUND)
		return (LB_ENOTFOUND);
	if (rc != 0)
		return (rc);
	return (key_is(key, k, plen) ? 0 : LB_ENOTFOUND);
}

static void
cur_close(MDB_cursor *c)
{
	if (c != NULL)
		mdb_cursor_close(c);
}

/* Steps c to the next entry of the prefix; LB_ENOTFOUND past its end. */
static int
cur_next(MDB_cursor *c, const uint8_t *p, size_t plen, MDB_val *key, MDB_val *val)
{
	int	 rc;

	rc = mdb_cursor_get(c, key, val, MDB_NEXT);
	if (rc == MDB_NOTFOUND)
		return (LB_ENOTFOUND);
	if (rc != 0)
		return (rc);
	return (key_is(key, p, plen) ? 0 : LB_ENOTFOUND);
}

/* ---------------------------------------------------------------- open and close */

static int
open_dbs(struct lb_catalog *cat, MDB_txn *txn)
{
	static const char *names[] = { LB_CAT_DB_META, LB_CAT_DB_LOGSPACES,
	    LB_CAT_DB_SEGMENTS, LB_CAT_DB_DAYS, LB_CAT_DB_TIMEMAP, LB_CAT_DB_STATE };
	MDB_dbi		*dbis[] = { &cat->meta, &cat->ls, &cat->seg, &cat->day, &cat->tmap,
	    &cat->state };
	unsigned	 flags = cat->mode == LB_RDWR ? MDB_CREATE : 0;
	int		 rc;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		rc = mdb_dbi_open(txn, names[i], flags, dbis[i]);
		if (rc == MDB_NOTFOUND && i == 0 && cat->mode != LB_RDWR) {
			MDB_dbi		 main;
			MDB_stat	 ms;

			/*
			 * An environment with nothing in it: a writer has created the files but
			 * not committed its first transaction yet. No catalog so far, not damage.
			 */
			if (mdb_dbi_open(txn, NULL, 0, &main) == 0 &&
			    mdb_stat(txn, main, &ms) == 0 && ms.ms_entries == 0)
				return (ENOENT);
		}
		if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE)
			return (LB_EFORMAT);
		if (rc != 0)
			return (rc);
	}
	return (0);
}

/* Opens the named databases and checks (a writer: creates) the meta record. */
static int
cat_init(struct lb_catalog *cat)
{
	MDB_txn		*txn = NULL;
	MDB_val		 val;
	MDB_stat	 st;
	uint8_t		 v[LB_CAT_META_SIZE];
	const char	*mk = LB_CAT_META_KEY;
	uint32_t	 version;
	int		 rc;

	if (cat->mode == LB_RDWR)
		rc = wtxn(cat, &txn);
	else
		rc = rtxn(cat, &txn);
	if (rc != 0)
		return (rc);
	if ((rc = open_dbs(cat, txn)) != 0)
		goto fail;
	rc = get(txn, cat->meta, mk, strlen(mk), &val);
	if (rc == 0 && (rc = meta_check(&val, &version)) == 0 &&
	    version < LB_CAT_VERSION && cat->mode == LB_RDWR) {
		/*
		 * A writer raises an older catalog to this version, so that the
		 * logbox which wrote it refuses the store from now on instead of
		 * taking the new message blocks for damage (FORMAT.md §9).
		 */
		meta_enc(v);
		rc = put(txn, cat->meta, mk, strlen(mk), v, sizeof(v), 0);
	} else if (rc == LB_ENOTFOUND && cat->mode == LB_RDWR) {
		/* A new catalog, unless something else already lives here. */
		if ((rc = mdb_stat(txn, cat->ls, &st)) != 0)
			goto fail;
		if (st.ms_entries != 0) {
			rc = LB_EFORMAT;
			goto fail;
		}
		meta_enc(v);
		rc = put(txn, cat->meta, mk, strlen(mk), v, sizeof(v), 0);
	} else if (rc == LB_ENOTFOUND)
		rc = LB_EFORMAT;
	if (rc != 0)
		goto fail;
	/* Committing also keeps the database handles (for a read transaction too). */
	return (mdb_txn_commit(txn));
 fail:
	mdb_txn_abort(txn);
	return (rc);
}

int
lb_catalog_open(const char *datadir, int mode, struct lb_catalog **out)
{
	struct lb_catalog	*cat;
	char			 dir[4096], lockpath[4096 + 16];
	unsigned		 flags = MDB_NOTLS;
	int			 rc, dead;

	if (datadir == NULL || (mode != LB_RDONLY && mode != LB_RDWR))
		return (EINVAL);
	if ((rc = lb_path(dir, sizeof(dir), "%s/%s", datadir, LB_DIR_CATALOG)) != 0)
		return (rc);
	if ((cat = calloc(1, sizeof(*cat))) == NULL)
		return (errno);
	cat->mode = mode;
	if (mode == LB_RDWR && (rc = lb_mkdirs(dir)) != 0)
		goto fail;
	if ((rc = mdb_env_create(&cat->env)) != 0)
		goto fail;
	if ((rc = mdb_env_set_maxdbs(cat->env, LB_CAT_MAXDBS)) != 0)
		goto fail;
	/*
	 * The writer fixes the map size; a reader takes it from the file. The map is address
	 * space, not memory or disk: data.mdb grows only as pages are used.
	 */
	if (mode == LB_RDWR &&
	    (rc = mdb_env_set_mapsize(cat->env, (size_t)LB_CAT_MAPSIZE)) != 0)
		goto fail;
	if (mode == LB_RDONLY)
		flags |= MDB_RDONLY;
	if ((rc = mdb_env_open(cat->env, dir, flags, 0640)) != 0) {
		if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH)
			rc = LB_EFORMAT;
		goto fail;
	}
	/*
	 * Readers (searchd, the CLI) may run as other users of the group: an LMDB reader needs
	 * to write its slot in lock.mdb, never data.mdb. Best effort: only the owner may chmod.
	 */
	if (mode == LB_RDWR &&
	    lb_path(lockpath, sizeof(lockpath), "%s/lock.mdb", dir) == 0)
		(void)chmod(lockpath, 0660);
	/* Clear reader slots left by dead processes, which would pin old pages forever. */
	if ((rc = mdb_reader_check(cat->env, &dead)) != 0)
		goto fail;
	if ((rc = cat_init(cat)) != 0)
		goto fail;
	*out = cat;
	return (0);
 fail:
	lb_catalog_close(cat);
	return (rc);
}

void
lb_catalog_close(struct lb_catalog *cat)
{
	if (cat == NULL)
		return;
	if (cat->env != NULL)
		mdb_env_close(cat->env);
	free(cat);
}

/* ---------------------------------------------------------------- logspaces */

void
lb_lsconf_default(struct lb_lsconf *c)
{
	memset(c, 0, sizeof(*c));
	memcpy(c->delims, LB_DEFAULT_DELIMS, sizeof(LB_DEFAULT_DELIMS));
	c->retention_days = 0;
	c->flush_ms = LSCONF_FLUSH_MS;
	c->mem_limit = LSCONF_MEM_LIMIT;
	c->fsync_ms = LSCONF_FSYNC_MS;
}

/* Settings a logspace may hold: delimiters the tokenizer accepts, a flush and memory limit. */
static int
lsconf_ok(const struct lb_lsconf *c)
{
	struct lb_tokconf	 tc;
	size_t			 n;

	if (c == NULL)
		return (EINVAL);
	if ((n = strnlen(c->delims, sizeof(c->delims))) == sizeof(c->delims))
		return (LB_EBADCONF);
	if (lb_tokconf_set(&tc, c->delims, n) != 0)
		return (LB_EBADCONF);
	if (c->flush_ms == 0 || c->mem_limit == 0)
		return (LB_EBADCONF);
	return (0);
}

static int
ls_write(struct lb_catalog *cat, const char *name, const struct lb_lsconf *conf, int create)
{
	MDB_txn			*txn;
	struct lb_lsstate	 st = { 1, 1, LB_NOTIME };
	uint8_t			 v[LB_CAT_LSCONF_SIZE], sv[LB_CAT_STATE_SIZE];
	size_t			 nlen;
	int			 rc;

	if ((nlen = name_len(name)) == 0 || (create && lb_logspace_name_reserved(name, nlen)))
		return (LB_EBADCONF);
	if ((rc = lsconf_ok(conf)) != 0)
		return (rc);
	lsconf_enc(v, conf);
	if ((rc = wtxn(cat, &txn)) != 0)
		return (rc);
	if (create) {
		rc = put(txn, cat->ls, name, nlen, v, sizeof(v), MDB_NOOVERWRITE);
		if (rc == MDB_KEYEXIST)
			rc = EEXIST;
		if (rc != 0)
			goto fail;
		/* Ids start at 1: 0 means "not stored yet" in struct lb_msg. */
		state_enc(sv, &st);
		if ((rc = put(txn, cat->state, name, nlen, sv, sizeof(sv), 0)) != 0)
			goto fail;
	} else {
		if ((rc = ls_exists(cat, txn, name, nlen)) != 0)
			goto fail;
		if ((rc = put(txn, cat->ls, name, nlen, v, sizeof(v), 0)) != 0)
			goto fail;
	}
	return (mdb_txn_commit(txn));
 fail:
	mdb_txn_abort(txn);
	return (rc);
}

int
lb_catalog_logspace_create(struct lb_catalog *cat, const char *name,
    const struct lb_lsconf *conf)
{
	return (ls_write(cat, name, conf, 1));
}

int
lb_catalog_logspace_set(struct lb_catalog *cat, const char *name,
    const struct lb_lsconf *conf)
{
	return (ls_write(cat, name, conf, 0));
}

int
lb_catalog_logspace_get(struct lb_catalog *cat, const char *name, struct lb_lsconf *conf)
{
	MDB_txn			*txn;
	MDB_val			 val;
	struct lb_lsconf	 c;
	size_t			 nlen;
	int			 rc;

	if ((nlen = name_len(name)) == 0)
		return (LB_EBADCONF);
	if ((rc = rtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = get(txn, cat->ls, name, nlen, &val)) == 0)
		rc = lsconf_dec(&val, &c);
	mdb_txn_abort(txn);
	if (rc == 0)
		*conf = c;
	return (rc);
}

int
lb_catalog_logspaces(struct lb_catalog *cat, int (*fn)(void *arg, const char *name),
    void *arg)
{
	MDB_txn		*txn;
	MDB_cursor	*c = NULL;
	MDB_val		 key, val;
	char		 name[LB_NAME_MAX + 1];
	int		 rc;

	if (fn == NULL)
		return (EINVAL);
	if ((rc = rtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = mdb_cursor_open(txn, cat->ls, &c)) != 0)
		goto done;
	for (rc = mdb_cursor_get(c, &key, &val, MDB_FIRST); rc == 0;
	    rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
		if (!name_ok_bytes(key.mv_data, key.mv_size)) {
			rc = LB_ECORRUPT;
			goto done;
		}
		memcpy(name, key.mv_data, key.mv_size);
		name[key.mv_size] = '\0';
		if ((rc = fn(arg, name)) != 0)
			goto done;
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
 done:
	cur_close(c);
	mdb_txn_abort(txn);
	return (rc);
}

/* The names being copied out by lb_catalog_logspace_names. */
struct lsnames {
	char	(*v)[LB_NAME_MAX + 1];
	size_t	  n, cap;
};

static int
lsnames_add(void *arg, const char *name)
{
	struct lsnames	*a = arg;
	void		*p;

	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;

		if ((p = reallocarray(a->v, cap, sizeof(*a->v))) == NULL)
			return (ENOMEM);
		a->v = p;
		a->cap = cap;
	}
	snprintf(a->v[a->n++], sizeof(a->v[0]), "%s", name);
	return (0);
}

int
lb_catalog_logspace_names(struct lb_catalog *cat, char (**names)[LB_NAME_MAX + 1], size_t *n)
{
	struct lsnames	 a = { NULL, 0, 0 };
	int		 rc;

	if ((rc = lb_catalog_logspaces(cat, lsnames_add, &a)) != 0) {
		free(a.v);
		return (rc);
	}
	*names = a.v;
	*n = a.n;
	return (0);
}

/* ---------------------------------------------------------------- segments */

/* Smallest / largest of two times where LB_NOTIME means "none". */
static int64_t
tmin2(int64_t a, int64_t b)
{
	if (a == LB_NOTIME)
		return (b);
	if (b == LB_NOTIME)
		return (a);
	return (a < b ? a : b);
}

static int64_t
tmax2(int64_t a, int64_t b)
{
	if (a == LB_NOTIME)
		return (b);
	if (b == LB_NOTIME)
		return (a);
	return (a > b ? a : b);
}

/* Adds one segment inside txn: refuses an overlap with any segment already there. */
static int
publish_add(struct lb_catalog *cat, MDB_txn *txn, MDB_cursor *c, const char *ls,
    size_t nlen, const struct lb_segref *s)
{
	uint8_t			 k[KEY_MAX], v[LB_CAT_SEGREF_SIZE];
	MDB_val			 key, val;
	struct lb_segref	 prev;
	size_t			 klen, plen = nlen + 1;
	int			 rc;

	klen = key_u64(k, ls, nlen, s->first_id);
	/* The segment before must end before s starts... */
	rc = cur_floor(c, k, klen, plen, &key, &val);
	if (rc == 0) {
		if ((rc = segref_dec(&key, plen, &val, &prev)) != 0)
			return (rc);
		if (prev.last_id >= s->first_id)
			return (EEXIST);
	} else if (rc != LB_ENOTFOUND)
		return (rc);
	/* ...and the one after must start after s ends. */
	rc = cur_ceil(c, k, klen, plen, &key, &val);
	if (rc == 0) {
		if (key.mv_size != plen + 8)
			return (LB_ECORRUPT);
		if (lb_get64be((const uint8_t *)key.mv_data + plen) <= s->last_id)
			return (EEXIST);
	} else if (rc != LB_ENOTFOUND)
		return (rc);
	segref_enc(v, s);
	return (put(txn, cat->seg, k, klen, v, sizeof(v), MDB_NOOVERWRITE));
}

/* Grows the day record of s (creating it) to cover s's ids and times. */
static int
publish_day(struct lb_catalog *cat, MDB_txn *txn, const char *ls, size_t nlen,
    const struct lb_segref *s)
{
	uint8_t			 k[KEY_MAX], v[LB_CAT_DAYREF_SIZE];
	MDB_val			 key, val;
	struct lb_dayref	 d, o;
	size_t			 klen;
	int			 rc;

	klen = key_u32(k, ls, nlen, s->day);
	rc = get(txn, cat->day, k, klen, &val);
	if (rc == LB_ENOTFOUND) {
		d.day = s->day;
		d.first_id = s->first_id;
		d.next_id = s->last_id + 1;
		d.tmin = s->tmin;
		d.tmax = s->tmax;
	} else if (rc == 0) {
		key.mv_data = k;
		key.mv_size = klen;
		if ((rc = dayref_dec(&key, nlen + 1, &val, &o)) != 0)
			return (rc);
		d = o;
		if (s->first_id < d.first_id)
			d.first_id = s->first_id;
		if (s->last_id + 1 > d.next_id)
			d.next_id = s->last_id + 1;
		d.tmin = tmin2(d.tmin, s->tmin);
		d.tmax = tmax2(d.tmax, s->tmax);
		if (d.first_id == o.first_id && d.next_id == o.next_id &&
		    d.tmin == o.tmin && d.tmax == o.tmax)
			return (0);
	} else
		return (rc);
	dayref_enc(v, &d);
	return (put(txn, cat->day, k, klen, v, sizeof(v), 0));
}

/* The logspace's state inside txn; a logspace without one yet starts at id 1. */
static int
state_load(struct lb_catalog *cat, MDB_txn *txn, const char *ls, size_t nlen,
    struct lb_lsstate *st)
{
	MDB_val	val;
	int	rc;

	rc = get(txn, cat->state, ls, nlen, &val);
	if (rc == 0)
		return (state_dec(&val, st));
	if (rc != LB_ENOTFOUND)
		return (rc);
	memset(st, 0, sizeof(*st));
	st->next_id = st->indexed_id = 1;
	st->last_received = LB_NOTIME;
	return (0);
}

int
lb_catalog_publish(struct lb_catalog *cat, const char *ls, const uint64_t *del, int ndel,
    const struct lb_segref *add, int nadd)
{
	MDB_txn			*txn;
	MDB_cursor		*c = NULL;
	struct lb_lsstate	 st;
	uint8_t			 k[KEY_MAX], sv[LB_CAT_STATE_SIZE];
	uint64_t		 next = 0;
	size_t			 nlen, klen;
	int			 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	if (ndel < 0 || nadd < 0 || (ndel > 0 && del == NULL) || (nadd > 0 && add == NULL))
		return (EINVAL);
	for (int i = 0; i < nadd; i++) {
		const struct lb_segref *s = &add[i];

		/* last_id == UINT64_MAX would leave no next id. */
		if (s->first_id == 0 || s->last_id < s->first_id || s->last_id == UINT64_MAX ||
		    !lb_day_ok(s->day) || !file_ok(s->file))
			return (EINVAL);
		if (s->last_id + 1 > next)
			next = s->last_id + 1;
	}
	if ((rc = wtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = ls_exists(cat, txn, ls, nlen)) != 0)
		goto fail;
	for (int i = 0; i < ndel; i++) {
		MDB_val key;

		klen = key_u64(k, ls, nlen, del[i]);
		key.mv_data = k;
		key.mv_size = klen;
		if ((rc = mdb_del(txn, cat->seg, &key, NULL)) != 0) {
			if (rc == MDB_NOTFOUND)
				rc = LB_ENOTFOUND;
			goto fail;
		}
	}
	if (nadd > 0) {
		if ((rc = mdb_cursor_open(txn, cat->seg, &c)) != 0)
			goto fail;
		for (int i = 0; i < nadd; i++) {
			if ((rc = publish_add(cat, txn, c, ls, nlen, &add[i])) != 0)
				goto fail;
			if ((rc = publish_day(cat, txn, ls, nlen, &add[i])) != 0)
				goto fail;
		}
		cur_close(c);
		c = NULL;
		if ((rc = state_load(cat, txn, ls, nlen, &st)) != 0)
			goto fail;
		if (next > st.next_id) {
			st.next_id = next;
			state_enc(sv, &st);
			if ((rc = put(txn, cat->state, ls, nlen, sv, sizeof(sv), 0)) != 0)
				goto fail;
		}
	}
	return (mdb_txn_commit(txn));
 fail:
	cur_close(c);
	mdb_txn_abort(txn);
	return (rc);
}

/* Appends s to the growing array *a (n entries, cap slots). */
static int
segs_push(struct lb_segref **a, size_t *n, size_t *cap, const struct lb_segref *s)
{
	struct lb_segref	*na;
	size_t			 ncap;

	if (*n == *cap) {
		ncap = *cap ? *cap * 2 : 16;
		if ((na = reallocarray(*a, ncap, sizeof(**a))) == NULL)
			return (errno);
		*a = na;
		*cap = ncap;
	}
	(*a)[(*n)++] = *s;
	return (0);
}

int
lb_catalog_segments(struct lb_catalog *cat, const char *ls, uint64_t lo, uint64_t hi,
    struct lb_segref **out, size_t *n)
{
	MDB_txn			*txn;
	MDB_cursor		*c = NULL;
	MDB_val			 key, val;
	struct lb_segref	*a = NULL, s;
	uint8_t			 k[KEY_MAX];
	size_t			 nlen, klen, plen, cnt = 0, cap = 0;
	int			 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	if (lo > hi)
		return (EINVAL);
	plen = nlen + 1;
	klen = key_u64(k, ls, nlen, lo);
	if ((rc = rtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = ls_exists(cat, txn, ls, nlen)) != 0)
		goto fail;
	if ((rc = mdb_cursor_open(txn, cat->seg, &c)) != 0)
		goto fail;
	/* Segments do not overlap: only the last one starting at or before lo can hold lo. */
	rc = cur_floor(c, k, klen, plen, &key, &val);
	if (rc == 0) {
		if ((rc = segref_dec(&key, plen, &val, &s)) != 0)
			goto fail;
		if (s.last_id >= lo && (rc = segs_push(&a, &cnt, &cap, &s)) != 0)
			goto fail;
	} else if (rc != LB_ENOTFOUND)
		goto fail;
	/* Then every segment starting in (lo, hi]. */
	rc = cur_ceil(c, k, klen, plen, &key, &val);
	if (rc == 0 && key.mv_size == klen && memcmp(key.mv_data, k, klen) == 0)
		rc = cur_next(c, k, plen, &key, &val);
	for (; rc == 0; rc = cur_next(c, k, plen, &key, &val)) {
		if ((rc = segref_dec(&key, plen, &val, &s)) != 0)
			goto fail;
		if (s.first_id > hi)
			break;
		if ((rc = segs_push(&a, &cnt, &cap, &s)) != 0)
			goto fail;
	}
	if (rc != 0 && rc != LB_ENOTFOUND)
		goto fail;
	cur_close(c);
	mdb_txn_abort(txn);
	*out = a;
	*n = cnt;
	return (0);
 fail:
	cur_close(c);
	mdb_txn_abort(txn);
	free(a);
	return (rc);
}

/* ---------------------------------------------------------------- days */

int
lb_catalog_day_put(struct lb_catalog *cat, const char *ls, const struct lb_dayref *d)
{
	MDB_txn		*txn;
	uint8_t		 k[KEY_MAX], v[LB_CAT_DAYREF_SIZE];
	size_t		 nlen, klen;
	int		 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	if (!lb_day_ok(d->day) || d->next_id < d->first_id)
		return (EINVAL);
	klen = key_u32(k, ls, nlen, d->day);
	dayref_enc(v, d);
	if ((rc = wtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = ls_exists(cat, txn, ls, nlen)) != 0)
		goto fail;
	if ((rc = put(txn, cat->day, k, klen, v, sizeof(v), 0)) != 0)
		goto fail;
	return (mdb_txn_commit(txn));
 fail:
	mdb_txn_abort(txn);
	return (rc);
}

int
lb_catalog_days(struct lb_catalog *cat, const char *ls, struct lb_dayref **out, size_t *n)
{
	MDB_txn			*txn;
	MDB_cursor		*c = NULL;
	MDB_val			 key, val;
	struct lb_dayref	*a = NULL, *na, d;
	uint8_t			 k[KEY_MAX];
	size_t			 nlen, plen, cnt = 0, cap = 0;
	int			 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	plen = key_prefix(k, ls, nlen);
	if ((rc = rtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = ls_exists(cat, txn, ls, nlen)) != 0)
		goto fail;
	if ((rc = mdb_cursor_open(txn, cat->day, &c)) != 0)
		goto fail;
	for (rc = cur_ceil(c, k, plen, plen, &key, &val); rc == 0;
	    rc = cur_next(c, k, plen, &key, &val)) {
		if ((rc = dayref_dec(&key, plen, &val, &d)) != 0)
			goto fail;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			if ((na = reallocarray(a, cap, sizeof(*a))) == NULL) {
				rc = errno;
				goto fail;
			}
			a = na;
		}
		a[cnt++] = d;
	}
	if (rc != LB_ENOTFOUND)
		goto fail;
	cur_close(c);
	mdb_txn_abort(txn);
	*out = a;
	*n = cnt;
	return (0);
 fail:
	cur_close(c);
	mdb_txn_abort(txn);
	free(a);
	return (rc);
}

/* Deletes the logspace's segments whose day is day. */
static int
day_delete_segs(struct lb_catalog *cat, MDB_txn *txn, const uint8_t *p, size_t plen,
    uint32_t day)
{
	MDB_cursor		*c;
	MDB_val			 key, val;
	struct lb_segref	 s;
	int			 rc;

	if ((rc = mdb_cursor_open(txn, cat->seg, &c)) != 0)
		return (rc);
	for (rc = cur_ceil(c, p, plen, plen, &key, &val); rc == 0;
	    rc = cur_next(c, p, plen, &key, &val)) {
		if ((rc = segref_dec(&key, plen, &val, &s)) != 0)
			break;
		if (s.day == day && (rc = mdb_cursor_del(c, 0)) != 0)
			break;
	}
	cur_close(c);
	return (rc == LB_ENOTFOUND ? 0 : rc);
}

/* Deletes the time-map entries of the day's ids, found from the day's time range. */
static int
day_delete_tmap(struct lb_catalog *cat, MDB_txn *txn, const char *ls, size_t nlen,
    const struct lb_dayref *d)
{
	MDB_cursor	*c;
	MDB_val		 key, val;
	uint8_t		 k[KEY_MAX];
	uint64_t	 id, end;
	size_t		 plen = nlen + 1, klen;
	int		 rc;

	if (d->first_id == d->next_id)
		return (0);
	/* Without a time range, look at the whole map of the logspace. */
	if (d->tmin == LB_NOTIME || d->tmax == LB_NOTIME) {
		klen = key_prefix(k, ls, nlen);
		end = UINT64_MAX;
	} else {
		klen = key_u64(k, ls, nlen, tm_keytime(d->tmin));
		end = tm_keytime(d->tmax);
	}
	if ((rc = mdb_cursor_open(txn, cat->tmap, &c)) != 0)
		return (rc);
	for (rc = cur_ceil(c, k, klen, plen, &key, &val); rc == 0;
	    rc = cur_next(c, k, plen, &key, &val)) {
		if ((rc = tmap_dec(&key, plen, &val, &id)) != 0)
			break;
		if (lb_get64be((const uint8_t *)key.mv_data + plen) > end)
			break;
		if (id >= d->first_id && id < d->next_id && (rc = mdb_cursor_del(c, 0)) != 0)
			break;
	}
	cur_close(c);
	return (rc == LB_ENOTFOUND ? 0 : rc);
}

int
lb_catalog_day_delete(struct lb_catalog *cat, const char *ls, uint32_t day)
{
	MDB_txn			*txn;
	MDB_val			 key, val;
	struct lb_dayref	 d;
	uint8_t			 k[KEY_MAX];
	size_t			 nlen, klen;
	int			 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	klen = key_u32(k, ls, nlen, day);
	if ((rc = wtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = get(txn, cat->day, k, klen, &val)) != 0)
		goto fail;
	key.mv_data = k;
	key.mv_size = klen;
	if ((rc = dayref_dec(&key, nlen + 1, &val, &d)) != 0)
		goto fail;
	if ((rc = mdb_del(txn, cat->day, &key, NULL)) != 0)
		goto fail;
	if ((rc = day_delete_segs(cat, txn, k, nlen + 1, day)) != 0)
		goto fail;
	if ((rc = day_delete_tmap(cat, txn, ls, nlen, &d)) != 0)
		goto fail;
	return (mdb_txn_commit(txn));
 fail:
	mdb_txn_abort(txn);
	return (rc);
}

int
lb_catalog_day_timemap(struct lb_catalog *cat, const char *ls, const struct lb_dayref *d,
    int64_t **tout, uint64_t **idout, size_t *n)
{
	MDB_txn		*txn;
	MDB_cursor	*c = NULL;
	MDB_val		 key, val;
	uint8_t		 k[KEY_MAX];
	int64_t		*t = NULL, *nt;
	uint64_t	*ids = NULL, *ni, id, end;
	size_t		 nlen, plen, klen, cnt = 0, cap = 0;
	int		 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	plen = nlen + 1;
	*tout = NULL;
	*idout = NULL;
	*n = 0;
	if (d->first_id == d->next_id)
		return (0);
	if (d->tmin == LB_NOTIME || d->tmax == LB_NOTIME) {
		klen = key_prefix(k, ls, nlen);
		end = UINT64_MAX;
	} else {
		klen = key_u64(k, ls, nlen, tm_keytime(d->tmin));
		end = tm_keytime(d->tmax);
	}
	if ((rc = rtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = ls_exists(cat, txn, ls, nlen)) != 0)
		goto fail;
	if ((rc = mdb_cursor_open(txn, cat->tmap, &c)) != 0)
		goto fail;
	for (rc = cur_ceil(c, k, klen, plen, &key, &val); rc == 0;
	    rc = cur_next(c, k, plen, &key, &val)) {
		uint64_t kt;

		if ((rc = tmap_dec(&key, plen, &val, &id)) != 0)
			goto fail;
		kt = lb_get64be((const uint8_t *)key.mv_data + plen);
		if (kt > end)
			break;
		if (id < d->first_id || id >= d->next_id)
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 64;
			if ((nt = reallocarray(t, cap, sizeof(*t))) == NULL) {
				rc = errno;
				goto fail;
			}
			t = nt;
			if ((ni = reallocarray(ids, cap, sizeof(*ids))) == NULL) {
				rc = errno;
				goto fail;
			}
			ids = ni;
		}
		t[cnt] = (int64_t)(kt ^ LB_CAT_TIME_BIAS);
		ids[cnt++] = id;
	}
	if (rc != 0 && rc != LB_ENOTFOUND)
		goto fail;
	cur_close(c);
	mdb_txn_abort(txn);
	*tout = t;
	*idout = ids;
	*n = cnt;
	return (0);
 fail:
	cur_close(c);
	mdb_txn_abort(txn);
	free(t);
	free(ids);
	return (rc);
}

int
lb_catalog_day_import(struct lb_catalog *cat, const char *ls, const struct lb_dayref *d,
    const struct lb_segref *segs, size_t nseg, const int64_t *t, const uint64_t *id, size_t nt)
{
	MDB_txn			*txn;
	MDB_cursor		*c = NULL;
	MDB_val			 val;
	struct lb_lsstate	 st, nst;
	uint8_t			 k[KEY_MAX], v[LB_CAT_DAYREF_SIZE], sv[LB_CAT_STATE_SIZE];
	uint8_t			 tv[LB_CAT_TIMEMAP_SIZE];
	size_t			 nlen, klen;
	int			 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	if (!lb_day_ok(d->day) || d->first_id == 0 || d->next_id < d->first_id ||
	    d->next_id == UINT64_MAX || (nseg > 0 && segs == NULL) || (nt > 0 && (t == NULL ||
	    id == NULL)))
		return (EINVAL);
	for (size_t i = 0; i < nseg; i++) {
		const struct lb_segref *s = &segs[i];

		if (s->day != d->day || s->first_id < d->first_id || s->last_id < s->first_id ||
		    s->last_id >= d->next_id || !file_ok(s->file))
			return (EINVAL);
	}
	for (size_t i = 0; i < nt; i++)
		if (t[i] == LB_NOTIME || id[i] < d->first_id || id[i] >= d->next_id)
			return (EINVAL);
	if ((rc = wtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = ls_exists(cat, txn, ls, nlen)) != 0)
		goto fail;
	klen = key_u32(k, ls, nlen, d->day);
	rc = get(txn, cat->day, k, klen, &val);
	if (rc == 0) {
		rc = EEXIST;
		goto fail;
	} else if (rc != LB_ENOTFOUND)
		goto fail;
	dayref_enc(v, d);
	if ((rc = put(txn, cat->day, k, klen, v, sizeof(v), MDB_NOOVERWRITE)) != 0)
		goto fail;
	if (nseg > 0) {
		if ((rc = mdb_cursor_open(txn, cat->seg, &c)) != 0)
			goto fail;
		for (size_t i = 0; i < nseg; i++)
			if ((rc = publish_add(cat, txn, c, ls, nlen, &segs[i])) != 0) {
				if (rc == MDB_KEYEXIST)
					rc = EEXIST;
				goto fail;
			}
		cur_close(c);
		c = NULL;
	}
	for (size_t i = 0; i < nt; i++) {
		klen = key_u64(k, ls, nlen, tm_keytime(t[i]));
		tmap_enc(tv, id[i]);
		rc = put(txn, cat->tmap, k, klen, tv, sizeof(tv), MDB_NOOVERWRITE);
		if (rc != 0 && rc != MDB_KEYEXIST)
			goto fail;
	}
	if ((rc = state_load(cat, txn, ls, nlen, &st)) != 0)
		goto fail;
	nst = st;
	if (d->next_id > st.next_id) {
		/* (nothing is waiting to be indexed: the day's segments cover it) */
		if (st.indexed_id == st.next_id)
			nst.indexed_id = d->next_id;
		nst.next_id = d->next_id;
	}
	nst.last_received = tmax2(st.last_received, d->tmax);
	if (memcmp(&nst, &st, sizeof(st)) != 0) {
		state_enc(sv, &nst);
		if ((rc = put(txn, cat->state, ls, nlen, sv, sizeof(sv), 0)) != 0)
			goto fail;
	}
	return (mdb_txn_commit(txn));
 fail:
	cur_close(c);
	mdb_txn_abort(txn);
	return (rc);
}

/* ---------------------------------------------------------------- time map */

int
lb_catalog_timemap_put(struct lb_catalog *cat, const char *ls, int64_t t, uint64_t id)
{
	return (lb_catalog_timemap_putv(cat, ls, &t, &id, 1));
}

int
lb_catalog_timemap_putv(struct lb_catalog *cat, const char *ls, const int64_t *t,
    const uint64_t *id, size_t n)
{
	MDB_txn		*txn;
	uint8_t		 k[KEY_MAX], v[LB_CAT_TIMEMAP_SIZE];
	size_t		 nlen, klen;
	int		 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	for (size_t i = 0; i < n; i++)
		if (t[i] == LB_NOTIME)
			return (EINVAL);
	if ((rc = wtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = ls_exists(cat, txn, ls, nlen)) != 0)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		klen = key_u64(k, ls, nlen, tm_keytime(t[i]));
		tmap_enc(v, id[i]);
		/* The first id of a step wins: a second put for the step changes nothing. */
		rc = put(txn, cat->tmap, k, klen, v, sizeof(v), MDB_NOOVERWRITE);
		if (rc != 0 && rc != MDB_KEYEXIST)
			goto fail;
	}
	return (mdb_txn_commit(txn));
 fail:
	mdb_txn_abort(txn);
	return (rc);
}

int
lb_catalog_time_to_id(struct lb_catalog *cat, const char *ls, int64_t t, uint64_t *id)
{
	MDB_txn		*txn;
	MDB_cursor	*c = NULL;
	MDB_val		 key, val;
	uint8_t		 k[KEY_MAX];
	uint64_t	 v;
	size_t		 nlen, klen;
	int		 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	klen = key_u64(k, ls, nlen, tm_keytime(t));
	if ((rc = rtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = mdb_cursor_open(txn, cat->tmap, &c)) != 0)
		goto done;
	if ((rc = cur_ceil(c, k, klen, nlen + 1, &key, &val)) != 0)
		goto done;
	rc = tmap_dec(&key, nlen + 1, &val, &v);
 done:
	cur_close(c);
	mdb_txn_abort(txn);
	if (rc == 0)
		*id = v;
	return (rc);
}

/* ---------------------------------------------------------------- state */

int
lb_catalog_state_get(struct lb_catalog *cat, const char *ls, struct lb_lsstate *st)
{
	MDB_txn			*txn;
	MDB_val			 val;
	struct lb_lsstate	 s;
	size_t			 nlen;
	int			 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	if ((rc = rtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = get(txn, cat->state, ls, nlen, &val)) == 0)
		rc = state_dec(&val, &s);
	mdb_txn_abort(txn);
	if (rc == 0)
		*st = s;
	return (rc);
}

int
lb_catalog_state_put(struct lb_catalog *cat, const char *ls, const struct lb_lsstate *st)
{
	MDB_txn		*txn;
	uint8_t		 v[LB_CAT_STATE_SIZE];
	size_t		 nlen;
	int		 rc;

	if ((nlen = name_len(ls)) == 0)
		return (LB_EBADCONF);
	if (st->indexed_id > st->next_id)
		return (EINVAL);
	state_enc(v, st);
	if ((rc = wtxn(cat, &txn)) != 0)
		return (rc);
	if ((rc = ls_exists(cat, txn, ls, nlen)) != 0)
		goto fail;
	if ((rc = put(txn, cat->state, ls, nlen, v, sizeof(v), 0)) != 0)
		goto fail;
	return (mdb_txn_commit(txn));
 fail:
	mdb_txn_abort(txn);
	return (rc);
}
