/*
 * t_chain.c — the days' hash chains (FORMAT.md §14). The file: every single byte changed,
 * a record removed or two swapped is damage lb_chain_load names; an append cut short at any
 * byte is cut by the next append, which links the record before. The store: a three-day store
 * with tiered and whole-day merges, a reopen after a writer that never closed, reindex and
 * retention verifies clean; then each kind of tampering, done to a fresh copy of that store,
 * is reported with its place and kind, and the untampered days stay clean.
 */
#include "t_helper.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DAY_US	(86400LL * 1000000)
#define T0	(1735689600LL * 1000000)	/* 2025-01-01T00:00:00Z */
#define NMSG	15000				/* over three days */

/* ---------------------------------------------------------------- the file */

static void
blockrec(struct lb_chrec *r, uint64_t i)
{
	memset(r, 0, sizeof(*r));
	r->kind = LB_CH_BLOCK;
	r->first_id = 1 + i * 10;
	r->count = 10;
	r->off = LB_FHDR_SIZE + i * 100;
	r->len = 100;
	memset(r->sha, (int)(i & 0xff), sizeof(r->sha));
}

static void
chain_path(char *buf, size_t len, const char *dir)
{
	snprintf(buf, len, "%s/%s", dir, LB_FILE_CHAIN);
}

/* A chain of a genesis, 6 blocks and a segment replacing two names. */
static void
make_chain(const char *dir)
{
	struct lb_chgen	g = { "main", 20250102, 20250101, 7, { 0 } };
	struct lb_chrec	r[6], s;
	char		names[2][64] = { "a.seg", "b.seg" };

	memset(g.prev, 0xab, sizeof(g.prev));
	for (int i = 0; i < 6; i++)
		blockrec(&r[i], (uint64_t)i);
	assert_ok(lb_chain_append(dir, &g, r, 4, 1));
	assert_ok(lb_chain_append(dir, NULL, r + 4, 2, 1));	/* (a chain exists: no genesis) */
	memset(&s, 0, sizeof(s));
	s.kind = LB_CH_SEGMENT;
	snprintf(s.name, sizeof(s.name), "c.seg");
	s.first_id = 1;
	s.last_id = 60;
	s.count = 60;
	s.len = 4096;
	s.repl = names;
	s.nrepl = 2;
	assert_ok(lb_chain_append(dir, NULL, &s, 1, 0));
}

static int
load(const char *dir, size_t *n, char *why, size_t whylen)
{
	struct lb_chrec	*recs = NULL;
	int		 rc;

	why[0] = '\0';
	rc = lb_chain_load(dir, &recs, n, why, whylen);
	lb_chain_free(recs, *n);
	return (rc);
}

static void
t_chain_roundtrip(void **state)
{
	char		 dir[256];
	struct lb_chrec	*recs = NULL;
	size_t		 n = 0;
	uint64_t	 seq;
	uint8_t		 head[LB_SHA256_LEN];

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_int_equal(lb_chain_head(dir, &seq, head), ENOENT);
	assert_int_equal(lb_chain_append(dir, NULL, NULL, 0, 0), ENOENT);
	make_chain(dir);
	assert_ok(lb_chain_load(dir, &recs, &n, NULL, 0));
	assert_int_equal(n, 8);
	assert_int_equal(recs[0].kind, LB_CH_GENESIS);
	assert_string_equal(recs[0].ls, "main");
	assert_int_equal(recs[0].day, 20250102);
	assert_int_equal(recs[0].prev_day, 20250101);
	assert_int_equal(recs[0].prev_seq, 7);
	assert_int_equal(recs[0].prev[5], 0xab);
	for (size_t i = 1; i < 7; i++) {
		assert_int_equal(recs[i].kind, LB_CH_BLOCK);
		assert_int_equal(recs[i].seq, i);
		assert_int_equal(recs[i].first_id, 1 + (i - 1) * 10);
		assert_int_equal(recs[i].off, LB_FHDR_SIZE + (i - 1) * 100);
		assert_int_equal(recs[i].sha[0], (i - 1) & 0xff);
		assert_memory_equal(recs[i].prev, recs[i - 1].hash, LB_SHA256_LEN);
	}
	assert_int_equal(recs[7].kind, LB_CH_SEGMENT);
	assert_string_equal(recs[7].name, "c.seg");
	assert_int_equal(recs[7].nrepl, 2);
	assert_string_equal(recs[7].repl[1], "b.seg");
	assert_int_equal(recs[7].len, 4096);
	assert_ok(lb_chain_head(dir, &seq, head));
	assert_int_equal(seq, 7);
	assert_memory_equal(head, recs[7].hash, LB_SHA256_LEN);
	lb_chain_free(recs, n);
	t_rmtree(dir);
}

/* Every byte of the file, changed, is damage; so is a record removed or two swapped. */
static void
t_chain_every_byte(void **state)
{
	char	 dir[256], path[300], why[256];
	uint8_t	*orig, *b;
	size_t	 len, n, r1, r2, r3;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	make_chain(dir);
	chain_path(path, sizeof(path), dir);
	orig = t_read_file(path, &len);
	assert_non_null(b = malloc(len));
	for (size_t i = 0; i < len; i++) {
		memcpy(b, orig, len);
		b[i] ^= (uint8_t)(1u << (i % 8));
		t_write_file(path, b, len);
		if (load(dir, &n, why, sizeof(why)) != LB_ECORRUPT)
			fail_msg("byte %zu changed: not damage", i);
		assert_true(strstr(why, "record ") == why);
	}
	/* Record boundaries: genesis 180 bytes, blocks 156 each. */
	r1 = 180 + 156;		/* block 2 */
	r2 = r1 + 156;
	r3 = r2 + 156;
	memcpy(b, orig, r1);
	memcpy(b + r1, orig + r2, len - r2);
	t_write_file(path, b, len - 156);
	assert_int_equal(load(dir, &n, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(n, 2);
	assert_non_null(strstr(why, "removed, added or reordered"));
	memcpy(b, orig, len);
	memcpy(b + r1, orig + r2, 156);
	memcpy(b + r2, orig + r1, 156);
	(void)r3;
	t_write_file(path, b, len);
	assert_int_equal(load(dir, &n, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(n, 2);
	/* A copy of a record of another chain in the middle: its link is wrong. */
	free(b);
	free(orig);
	t_rmtree(dir);
}

/* An append cut short at any byte: the next append cuts the torn record and links on. */
static void
t_chain_torn_tail(void **state)
{
	char		 dir[256], path[300], why[256];
	struct lb_chgen	 g = { "main", 20250102, 0, 0, { 0 } };
	struct lb_chrec	 r, *recs;
	uint8_t		*orig;
	size_t		 len, n;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	make_chain(dir);
	chain_path(path, sizeof(path), dir);
	orig = t_read_file(path, &len);
	for (size_t cut = len - 1; cut > 0; cut--) {
		t_write_file(path, orig, cut);
		blockrec(&r, 40);
		if (lb_chain_append(dir, &g, &r, 1, 0) != 0)
			fail_msg("cut at %zu of %zu: the append fails", cut, len);
		if (lb_chain_load(dir, &recs, &n, why, sizeof(why)) != 0)
			fail_msg("cut at %zu of %zu: %s", cut, len, why);
		assert_int_equal(recs[n - 1].first_id, r.first_id);
		if (cut < 180)	/* the genesis cut short: a new chain */
			assert_int_equal(n, 2);
		else
			assert_true(n >= 2 && n <= 8);
		assert_int_equal(recs[n - 1].seq, n - 1);
		lb_chain_free(recs, n);
		if (cut > 600)
			cut -= 7;	/* (every byte of the last record; a sample of the rest) */
	}
	/*
	 * Damage before the end stays where it is, named by load, whatever is appended after;
	 * a last record edited (whole, not cut short) is not a torn tail: no append.
	 */
	orig[200] ^= 1;
	t_write_file(path, orig, len);
	blockrec(&r, 41);
	assert_ok(lb_chain_append(dir, &g, &r, 1, 0));
	assert_int_equal(load(dir, &n, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(n, 1);
	assert_non_null(strstr(why, "record 1 at byte 180"));
	orig[200] ^= 1;
	orig[len - 70] ^= 1;
	t_write_file(path, orig, len);
	assert_int_equal(lb_chain_append(dir, &g, &r, 1, 0), LB_ECORRUPT);
	free(orig);
	t_rmtree(dir);
}

/* ---------------------------------------------------------------- the store */

static void
mkmsg(struct lb_msg *m, char *buf, size_t len, uint64_t i, int64_t t)
{
	memset(m, 0, sizeof(*m));
	snprintf(buf, len, "seq=%llu word%llu unique%llu and some more text to fill blocks %llx",
	    (unsigned long long)i, (unsigned long long)(i % 7), (unsigned long long)i,
	    (unsigned long long)(i * 2654435761u));
	m->message.p = (const uint8_t *)buf;
	m->message.len = strlen(buf);
	m->host.p = (const uint8_t *)"web-01";
	m->host.len = 6;
	m->severity = (uint8_t)(i % 8);
	m->timestamp = LB_NOTIME;
	m->received = t;
}

static int64_t
when(uint64_t i)
{
	return (T0 + (int64_t)((i - 1) / (NMSG / 3)) * DAY_US + (int64_t)i * 1000);
}

/*
 * The store every tampering starts from: three days, flushes every millisecond (tiered
 * merges; each ended day merged whole), a writer killed with messages committed, the next
 * writer's recovery, reindex.
 */
static void
build_store(const char *dir)
{
	struct lb_catalog	*cat;
	struct lb_store		*st;
	struct lb_lsconf	 conf;
	struct lb_msg		 m;
	char			 buf[160];
	pid_t			 pid;
	int			 status;

	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	lb_lsconf_default(&conf);
	conf.flush_ms = 1;
	assert_ok(lb_catalog_logspace_create(cat, "main", &conf));
	lb_catalog_close(cat);
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	for (uint64_t i = 1; i <= NMSG - 1000; i++) {
		mkmsg(&m, buf, sizeof(buf), i, when(i));
		assert_ok(lb_store_append(st, &m));
	}
	assert_ok(lb_store_close(st));
	if ((pid = fork()) == 0) {
		if (lb_store_open(dir, "main", LB_RDWR, &st) != 0)
			_exit(1);
		for (uint64_t i = NMSG - 999; i <= NMSG - 500; i++) {
			mkmsg(&m, buf, sizeof(buf), i, when(i));
			if (lb_store_append(st, &m) != 0)
				_exit(1);
		}
		if (lb_store_commit(st, 1) != 0)
			_exit(1);
		_exit(0);	/* killed, in effect: no close */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	assert_ok(lb_store_reindex(st, NULL, NULL));
	for (uint64_t i = NMSG - 499; i <= NMSG; i++) {
		mkmsg(&m, buf, sizeof(buf), i, when(i));
		assert_ok(lb_store_append(st, &m));
	}
	assert_ok(lb_store_close(st));
}

static void
day_dir(char *buf, size_t len, const char *dir, int d)
{
	snprintf(buf, len, "%s/main/2025/01-%02d", dir, d);
}

/* The block index of a day's messages file. */
static size_t
blocks(const char *dir, int d, struct lb_blkref *out, size_t max)
{
	struct lb_msgfile	*mf;
	char			 dd[300];
	size_t			 n;

	day_dir(dd, sizeof(dd), dir, d);
	assert_ok(lb_msgfile_open(dd, LB_RDONLY, 0, &mf));
	n = lb_msgfile_nblocks(mf);
	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++)
		lb_msgfile_block(mf, i, &out[i]);
	lb_msgfile_close(mf);
	return (n);
}

static void
expect(const char *dir, const char *what, const char *needle, const char *where)
{
	struct t_reports r;

	if (t_verify(dir, NULL, &r, NULL) != LB_ECORRUPT)
		fail_msg("%s: verify found nothing", what);
	if (strstr(r.text, needle) == NULL || strstr(r.text, where) == NULL)
		fail_msg("%s: no \"%s\" at %s in:\n%s", what, needle, where, r.text);
	/* The days not touched stay clean. */
	if (strstr(what, "day") == NULL && strstr(r.text, "01-03") != NULL &&
	    strstr(where, "01-03") == NULL)
		fail_msg("%s: day 3 reported too:\n%s", what, r.text);
}

static void
cut_bytes(const char *path, size_t at, size_t cut, const uint8_t *ins, size_t inslen)
{
	uint8_t	*b, *o;
	size_t	 len;

	b = t_read_file(path, &len);
	assert_true(at + cut <= len);
	assert_non_null(o = malloc(len - cut + inslen + 1));
	memcpy(o, b, at);
	if (inslen > 0)
		memcpy(o + at, ins, inslen);
	memcpy(o + at + inslen, b + at + cut, len - at - cut);
	t_write_file(path, o, len - cut + inslen);
	free(o);
	free(b);
}

static void
flip(const char *path, size_t at)
{
	uint8_t	c;
	int	fd;

	assert_true((fd = open(path, O_RDWR)) != -1);
	assert_int_equal(pread(fd, &c, 1, (off_t)at), 1);
	c ^= 0x20;
	assert_int_equal(pwrite(fd, &c, 1, (off_t)at), 1);
	close(fd);
}

static void
t_store_clean_and_tampered(void **state)
{
	char			 base[256], dir[256], dd[300], path[400], cmd[1024], seg[400];
	char			 where[64];
	struct lb_blkref	 b[64];
	struct t_reports		 r;
	struct lb_catalog	*cat;
	struct lb_dayref	*days = NULL;
	uint8_t			*bytes;
	size_t			 nb, ndays = 0, len;
	struct stat		 sb;

	(void)state;
	t_mkdtemp(base, sizeof(base));
	build_store(base);
	if (t_verify(base, NULL, &r, NULL) != 0)
		fail_msg("a store nobody touched:\n%s", r.text);
	/* Each day has a chain; the recovery's records are flagged. */
	for (int d = 1; d <= 3; d++) {
		day_dir(dd, sizeof(dd), base, d);
		snprintf(path, sizeof(path), "%s/%s", dd, LB_FILE_CHAIN);
		assert_int_equal(stat(path, &sb), 0);
	}
	t_mkdtemp(dir, sizeof(dir));
#define FRESH() do {							\
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s' '%s'", dir, base, dir);	\
	assert_int_equal(system(cmd), 0);				\
} while (0)

	/* A byte of a block's payload. */
	FRESH();
	nb = blocks(dir, 1, b, 64);
	assert_true(nb >= 4);
	day_dir(dd, sizeof(dd), dir, 1);
	snprintf(path, sizeof(path), "%s/%s", dd, LB_FILE_MESSAGES);
	flip(path, b[2].off + b[2].len - 5);
	snprintf(where, sizeof(where), "block at byte %llu", (unsigned long long)b[2].off);
	expect(dir, "payload byte", "edited", where);

	/* A block removed. */
	FRESH();
	cut_bytes(path, b[1].off, b[1].len, NULL, 0);
	snprintf(where, sizeof(where), "block at byte %llu", (unsigned long long)b[1].off);
	expect(dir, "block removed", "removed", where);

	/* Two blocks swapped. */
	FRESH();
	bytes = t_read_file(path, &len);
	{
		uint8_t *o = malloc(len + 1);

		assert_non_null(o);
		memcpy(o, bytes, len);
		memcpy(o + b[1].off, bytes + b[2].off, b[2].len);
		memcpy(o + b[1].off + b[2].len, bytes + b[1].off, b[1].len);
		t_write_file(path, o, len);
		free(o);
	}
	free(bytes);
	expect(dir, "blocks swapped", "reordered", where);

	/* The messages file cut at a block boundary (no torn block: only the chain knows). */
	FRESH();
	assert_int_equal(truncate(path, (off_t)b[nb - 2].off), 0);
	expect(dir, "tail cut", "truncated tail", "01-01/messages");

	/* A byte of a segment. */
	FRESH();
	day_dir(dd, sizeof(dd), dir, 2);
	snprintf(cmd, sizeof(cmd), "ls '%s/index/'*.seg | head -1", dd);
	{
		FILE *f = popen(cmd, "r");

		assert_non_null(f);
		assert_non_null(fgets(seg, sizeof(seg), f));
		seg[strcspn(seg, "\n")] = '\0';
		pclose(f);
	}
	assert_int_equal(stat(seg, &sb), 0);
	flip(seg, (size_t)sb.st_size / 2);
	expect(dir, "segment byte", "segment edited", seg);

	/* A segment file replaced by another of the same ids (a forged index). */
	FRESH();
	unlink(seg);
	expect(dir, "segment removed", "segment missing", seg);

	/* A chain record removed from the middle. */
	FRESH();
	day_dir(dd, sizeof(dd), dir, 1);
	snprintf(path, sizeof(path), "%s/%s", dd, LB_FILE_CHAIN);
	{
		struct lb_chrec *recs;
		size_t n;

		assert_ok(lb_chain_load(dd, &recs, &n, NULL, 0));
		assert_true(n > 4);
		cut_bytes(path, recs[2].foff, recs[3].foff - recs[2].foff, NULL, 0);
		lb_chain_free(recs, n);
	}
	expect(dir, "chain record removed", "removed, added or reordered", "01-01");

	/* Day 2 removed whole, catalog and files: day 3's chain names it. */
	FRESH();
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	assert_ok(lb_catalog_day_delete(cat, "main", 20250102));
	lb_catalog_close(cat);
	day_dir(dd, sizeof(dd), dir, 2);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dd);
	assert_int_equal(system(cmd), 0);
	expect(dir, "a day removed", "2025-01-02, is missing and left no tombstone", "01-03");

	/* Day 2's chain replaced by day 1's: the chain is not the day's. */
	FRESH();
	{
		char d1[300], d2[300];

		day_dir(d1, sizeof(d1), dir, 1);
		day_dir(d2, sizeof(d2), dir, 2);
		snprintf(cmd, sizeof(cmd), "cp '%s/chain' '%s/chain'", d1, d2);
		assert_int_equal(system(cmd), 0);
	}
	expect(dir, "a chain copied from another day", "of day 20250101", "01-02");

	/* Retention: a tombstone, then the day goes: clean. */
	FRESH();
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	assert_ok(lb_catalog_days(cat, "main", &days, &ndays));
	assert_int_equal(ndays, 3);
	assert_ok(lb_chain_tomb(dir, cat, "main", &days[0], days[1].day));
	assert_ok(lb_catalog_day_delete(cat, "main", days[0].day));
	lb_catalog_close(cat);
	day_dir(dd, sizeof(dd), dir, 1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dd);
	assert_int_equal(system(cmd), 0);
	if (t_verify(dir, NULL, &r, NULL) != 0)
		fail_msg("retention with a tombstone:\n%s", r.text);
	/* ... and the chain of the day after still links: a writer goes on. */
	{
		struct lb_store	*st;
		struct lb_msg	 m;
		char		 buf[160];

		assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
		mkmsg(&m, buf, sizeof(buf), NMSG + 1, when(NMSG));
		assert_ok(lb_store_append(st, &m));
		assert_ok(lb_store_close(st));
	}
	if (t_verify(dir, NULL, &r, NULL) != 0)
		fail_msg("after retention and more messages:\n%s", r.text);
	/* With a signing key: retention's tombstone is signed, and clean. */
	FRESH();
	assert_ok(lb_sign_init(dir));
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	assert_ok(lb_chain_tomb(dir, cat, "main", &days[0], days[1].day));
	assert_ok(lb_catalog_day_delete(cat, "main", days[0].day));
	lb_catalog_close(cat);
	day_dir(dd, sizeof(dd), dir, 1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dd);
	assert_int_equal(system(cmd), 0);
	if (t_verify(dir, NULL, &r, NULL) != 0)
		fail_msg("retention with a signed tombstone:\n%s", r.text);
	/* ... but an unsigned one, written by whoever removes a day, does not excuse it. */
	FRESH();
	assert_ok(lb_sign_init(dir));
	{
		struct lb_chrec	t;
		char		d3[300];

		memset(&t, 0, sizeof(t));
		t.kind = LB_CH_TOMB;
		t.day = days[0].day;
		t.first_id = days[0].first_id;
		t.count = days[0].next_id - days[0].first_id;
		day_dir(d3, sizeof(d3), dir, 2);
		assert_ok(lb_chain_append(d3, NULL, &t, 1, 0));
	}
	free(days);
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	assert_ok(lb_catalog_day_delete(cat, "main", 20250101));
	lb_catalog_close(cat);
	day_dir(dd, sizeof(dd), dir, 1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dd);
	assert_int_equal(system(cmd), 0);
	expect(dir, "a forged tombstone day", "is not signed, though the box signs (forged)", "01-02");
	expect(dir, "a forged tombstone day", "2025-01-01, is missing and left no tombstone", "01-02");
#undef FRESH
	t_rmtree(dir);
	t_rmtree(base);
}

T_MAIN(
	cmocka_unit_test(t_chain_roundtrip),
	cmocka_unit_test(t_chain_every_byte),
	cmocka_unit_test(t_chain_torn_tail),
	cmocka_unit_test(t_store_clean_and_tampered))
