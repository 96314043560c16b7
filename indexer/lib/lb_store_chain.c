/*
 * lb_store_chain.c — what a store puts in its days' hash chains (FORMAT.md §14), and when:
 * - message blocks once they are durable (every synced commit of a flush, a day's end, close);
 * - a published segment once the catalog names it, with the segments it replaced (flush,
 *   merges in the merge thread, reindex);
 * - when the writer opens after a crash, what became durable or published but was not chained
 *   yet (flagged "recovered");
 * - a tombstone for a day retention removes, in the next day's chain.
 * And the check of a day against its chain, for lb_store_verify.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "logbox.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"

/*
 * The genesis of day's chain: the logspace's day before it (from the catalog: any thread may
 * ask) and that day's chain head now (zeros when it has none).
 */
static int
genesis_of(const char *data, struct lb_catalog *cat, const char *ls, uint32_t day,
    struct lb_chgen *g)
{
	struct lb_dayref	*days = NULL;
	size_t			 n = 0;
	char			 dir[PATH_MAX];
	int			 rc;

	memset(g, 0, sizeof(*g));
	g->ls = ls;
	g->day = day;
	if ((rc = lb_catalog_days(cat, ls, &days, &n)) != 0)
		return (rc);
	for (size_t i = 0; i < n; i++)
		if (days[i].day < day && days[i].day > g->prev_day)
			g->prev_day = days[i].day;
	free(days);
	if (g->prev_day == 0)
		return (0);
	if ((rc = lb_day_dir(dir, sizeof(dir), data, ls, g->prev_day)) != 0)
		return (rc);
	rc = lb_chain_head(dir, &g->prev_seq, g->prev);
	return (rc == ENOENT ? 0 : rc);
}

static int
append(struct lb_store *st, uint32_t day, struct lb_chrec *recs, size_t n)
{
	struct lb_chgen	g;
	char		dir[PATH_MAX];
	int		rc;

	if ((rc = lb_store_day_dir(st, day, dir, sizeof(dir))) != 0)
		return (rc);
	/* The day before's head only for a chain that begins (ENOENT: none yet). */
	if ((rc = lb_chain_append(dir, NULL, recs, n, 1)) != ENOENT)
		return (rc);
	if ((rc = genesis_of(st->data, st->cat, st->ls, day, &g)) != 0)
		return (rc);
	return (lb_chain_append(dir, &g, recs, n, 1));
}

/* Block records of mf's blocks at or after offset from (none when they are damaged). */
static int
block_recs(struct lb_msgfile *mf, uint64_t from, uint8_t flags, struct lb_chrec **out,
    size_t *n)
{
	struct lb_chrec	*recs = NULL;
	struct lb_blkref b;
	size_t		 cap = 0, k = 0, nb = lb_msgfile_nblocks(mf);
	int		 rc = 0;

	for (size_t i = 0; i < nb; i++) {
		lb_msgfile_block(mf, i, &b);
		if (b.off < from || b.bad)
			continue;
		if ((rc = lb_grow(&recs, &cap, k + 1, sizeof(*recs))) != 0)
			break;
		memset(&recs[k], 0, sizeof(recs[k]));
		recs[k].kind = LB_CH_BLOCK;
		recs[k].flags = flags;
		recs[k].first_id = b.first;
		recs[k].count = b.count;
		recs[k].off = b.off;
		recs[k].len = b.len;
		if ((rc = lb_msgfile_block_hash(mf, &b, recs[k].sha)) != 0)
			break;
		k++;
	}
	if (rc != 0) {
		free(recs);
		return (rc);
	}
	*out = recs;
	*n = k;
	return (0);
}

/* Where the blocks a chain names end (LB_FHDR_SIZE when it names none). */
static uint64_t
blocks_end(const struct lb_chrec *recs, size_t n)
{
	for (size_t i = n; i-- > 0;)
		if (recs[i].kind == LB_CH_BLOCK)
			return (recs[i].off + recs[i].len);
	return (LB_FHDR_SIZE);
}

int
lb_store_chain_err(struct lb_store *st)
{
	return (atomic_exchange(&st->ch_err, 0));
}

int
lb_store_chain_blocks(struct lb_store *st)
{
	struct lb_chrec	*recs = NULL;
	size_t		 n = 0;
	char		 dir[PATH_MAX];
	int		 rc;

	if (st->mf == NULL)
		return (0);
	if (st->ch_day != st->day.day) {
		/* A day the writer had not chained yet: where does its chain stop? */
		if ((rc = lb_store_day_dir(st, st->day.day, dir, sizeof(dir))) != 0)
			return (rc);
		rc = lb_chain_load(dir, &recs, &n, NULL, 0);
		if (rc != 0 && rc != ENOENT) {
			lb_chain_free(recs, n);
			return (rc);
		}
		st->ch_end = blocks_end(recs, n);
		st->ch_day = st->day.day;
		lb_chain_free(recs, n);
		recs = NULL;
		n = 0;
	}
	if (lb_msgfile_end(st->mf) <= st->ch_end)
		return (0);
	if ((rc = block_recs(st->mf, st->ch_end, 0, &recs, &n)) != 0)
		return (rc);
	if (n > 0 && (rc = append(st, st->day.day, recs, n)) == 0)
		st->ch_end = recs[n - 1].off + recs[n - 1].len;
	lb_chain_free(recs, n);
	return (rc);
}

int
lb_store_chain_segs(struct lb_store *st, uint32_t day, const struct lb_segref *old,
    size_t nold, const struct lb_segref *made, size_t nmade, uint8_t flags)
{
	struct lb_chrec	*recs;
	char		 path[PATH_MAX];
	uint64_t	 size;
	int		 rc = 0;

	if (nmade == 0)
		return (0);
	if ((recs = calloc(nmade, sizeof(*recs))) == NULL)
		return (errno);
	for (size_t i = 0; i < nmade && rc == 0; i++) {
		struct lb_chrec *r = &recs[i];

		r->kind = LB_CH_SEGMENT;
		r->flags = flags;
		snprintf(r->name, sizeof(r->name), "%s", made[i].file);
		r->first_id = made[i].first_id;
		r->last_id = made[i].last_id;
		r->count = made[i].count;
		r->level = made[i].level;
		if ((rc = lb_store_seg_path(st, day, made[i].file, path, sizeof(path))) != 0 ||
		    (rc = lb_sha256_file(path, r->sha, &size)) != 0)
			break;
		r->len = size;
		if (i == 0 && nold > 0) {
			if ((r->repl = calloc(nold, sizeof(*r->repl))) == NULL) {
				rc = errno;
				break;
			}
			for (size_t k = 0; k < nold; k++)
				snprintf(r->repl[k], sizeof(r->repl[k]), "%s", old[k].file);
			r->nrepl = (uint32_t)nold;
		}
	}
	if (rc == 0)
		rc = append(st, day, recs, nmade);
	lb_chain_free(recs, nmade);
	return (rc);
}

int
lb_store_publish(struct lb_store *st, uint32_t day, const struct lb_segref *old, size_t nold,
    const struct lb_segref *made, size_t nmade)
{
	uint64_t	*del = NULL;
	int		 rc;

	if (nold > 0 && (del = calloc(nold, sizeof(*del))) == NULL)
		return (errno);
	for (size_t i = 0; i < nold; i++)
		del[i] = old[i].first_id;
	rc = lb_catalog_publish(st->cat, st->ls, del, (int)nold, made, (int)nmade);
	free(del);
	if (rc != 0)
		return (rc);
	/*
	 * Published: the caller's work is done. Not chained if this fails: the writer's next
	 * open chains it ("recovered"), and the next flush returns the error.
	 */
	if ((rc = lb_store_chain_segs(st, day, old, nold, made, nmade, 0)) != 0)
		atomic_store(&st->ch_err, rc);
	return (0);
}

/* ---------------------------------------------------------------- after a crash */

/* The segments a chain's records leave live: live[0..*n) point into recs. */
static int
live_segs(const struct lb_chrec *recs, size_t n, const struct lb_chrec ***out, size_t *nout)
{
	const struct lb_chrec	**live = NULL;
	size_t			  k = 0;

	if (n > 0 && (live = calloc(n, sizeof(*live))) == NULL)
		return (errno);
	for (size_t i = 0; i < n; i++) {
		const struct lb_chrec *r = &recs[i];

		if (r->kind != LB_CH_SEGMENT)
			continue;
		for (size_t j = 0; j < k;) {
			int gone = strcmp(live[j]->name, r->name) == 0;

			for (uint32_t q = 0; q < r->nrepl && !gone; q++)
				gone = strcmp(live[j]->name, r->repl[q]) == 0;
			if (gone)
				live[j] = live[--k];
			else
				j++;
		}
		live[k++] = r;
	}
	*out = live;
	*nout = k;
	return (0);
}

static int
same_seg(const struct lb_chrec *r, const struct lb_segref *s)
{
	return (strcmp(r->name, s->file) == 0 && r->len == s->size && r->count == s->count &&
	    r->first_id == s->first_id && r->last_id == s->last_id);
}

/* Chains what day i has and its chain does not name: blocks of mf, segments of the catalog. */
static int
recover_day(struct lb_store *st, uint32_t day, struct lb_msgfile *mf)
{
	struct lb_chrec		 *recs = NULL, *add = NULL;
	const struct lb_chrec	**live = NULL;
	struct lb_segref	 *refs = NULL, *old = NULL;
	size_t			  n = 0, nlive = 0, nrefs = 0, nadd = 0, nold;
	char			  dir[PATH_MAX];
	int			  rc;

	if ((rc = lb_store_day_dir(st, day, dir, sizeof(dir))) != 0)
		return (rc);
	rc = lb_chain_load(dir, &recs, &n, NULL, 0);
	if (rc == LB_ECORRUPT) {
		/* Damage is verify's to name: chaining more would hide where it is. */
		rc = 0;
		goto done;
	}
	if (rc != 0 && rc != ENOENT)
		goto done;
	if (mf != NULL) {
		if ((rc = block_recs(mf, blocks_end(recs, n), LB_CHF_RECOVERED, &add,
		    &nadd)) != 0)
			goto done;
		if (nadd > 0 && (rc = append(st, day, add, nadd)) != 0)
			goto done;
		if (mf == st->mf) {
			st->ch_day = day;
			st->ch_end = nadd > 0 ? add[nadd - 1].off + add[nadd - 1].len :
			    blocks_end(recs, n);
		}
		lb_chain_free(add, nadd);
		add = NULL;
		nadd = 0;
	}
	if ((rc = live_segs(recs, n, &live, &nlive)) != 0)
		goto done;
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &nrefs)) != 0)
		goto done;
	if ((old = calloc(nlive + 1, sizeof(*old))) == NULL) {
		rc = errno;
		goto done;
	}
	for (size_t i = 0; i < nrefs; i++) {
		const struct lb_segref *s = &refs[i];
		int known = 0;

		if (s->day != day)
			continue;
		for (size_t j = 0; j < nlive && !known; j++)
			known = same_seg(live[j], s);
		if (known)
			continue;
		/* Published, not chained: it replaced the live ones of its ids the catalog lost. */
		nold = 0;
		for (size_t j = 0; j < nlive; j++) {
			int listed = 0;

			if (live[j]->first_id < s->first_id || live[j]->last_id > s->last_id)
				continue;
			for (size_t q = 0; q < nrefs && !listed; q++)
				listed = refs[q].day == day && same_seg(live[j], &refs[q]);
			if (listed)
				continue;
			memset(&old[nold], 0, sizeof(old[nold]));
			snprintf(old[nold].file, sizeof(old[nold].file), "%s", live[j]->name);
			nold++;
		}
		if ((rc = lb_store_chain_segs(st, day, old, nold, s, 1, LB_CHF_RECOVERED)) != 0)
			goto done;
	}
 done:
	lb_chain_free(add, nadd);
	lb_chain_free(recs, n);
	free(live);
	free(refs);
	free(old);
	return (rc);
}

int
lb_store_chain_recover(struct lb_store *st)
{
	struct lb_msgfile	*mf;
	int			 rc;

	if (st->ndays == 0)
		return (0);
	/* The day before the writer's may still have had a merge in flight. */
	if (st->ndays >= 2) {
		rc = lb_store_days_file(st, st->ndays - 2, &mf);
		if (rc == ENOENT)
			mf = NULL;
		else if (rc != 0)
			return (rc);
		if ((rc = recover_day(st, st->days[st->ndays - 2].ref.day, mf)) != 0)
			return (rc);
	}
	return (recover_day(st, st->day.day, st->mf));
}

/* ---------------------------------------------------------------- signed days */

int
lb_store_sign_day(struct lb_store *st, uint32_t day)
{
	struct lb_dayref	*days = NULL;
	struct lb_chgen		 g;
	size_t			 n = 0;
	uint64_t		 first = 0, count = 0;
	int			 rc;

	if ((rc = lb_catalog_days(st->cat, st->ls, &days, &n)) != 0)
		return (rc);
	for (size_t i = 0; i < n; i++)
		if (days[i].day == day) {
			first = days[i].first_id;
			count = days[i].next_id - days[i].first_id;
		}
	free(days);
	if ((rc = genesis_of(st->data, st->cat, st->ls, day, &g)) != 0)
		return (rc);
	rc = lb_sign_day(st->data, st->ls, day, first, count, &g);
	return (rc == ENOENT ? 0 : rc);		/* (signing not set up) */
}

/* ---------------------------------------------------------------- retention */

int
lb_chain_tomb(const char *data, struct lb_catalog *cat, const char *ls,
    const struct lb_dayref *gone, uint32_t next)
{
	struct lb_chgen	g;
	struct lb_chrec	r;
	char		dir[PATH_MAX];
	int		rc;

	memset(&r, 0, sizeof(r));
	r.kind = LB_CH_TOMB;
	r.day = gone->day;
	r.first_id = gone->first_id;
	r.count = gone->next_id - gone->first_id;
	if ((rc = lb_day_dir(dir, sizeof(dir), data, ls, gone->day)) != 0)
		return (rc);
	if ((rc = lb_chain_head(dir, &r.prev_seq, r.sha)) != 0 && rc != ENOENT)
		return (rc);
	if ((rc = lb_day_dir(dir, sizeof(dir), data, ls, next)) != 0)
		return (rc);
	if ((rc = lb_sign_tomb_append(data, dir, NULL, ls, &r)) != ENOENT)
		return (rc);
	/*
	 * The next day has no chain. With sealed blocks it was written before chains (a store
	 * from before them): starting a chain there would leave its blocks unchained. Else its
	 * chain begins with the tombstone.
	 */
	{
		char		mpath[PATH_MAX];
		struct stat	sb;

		if (lb_path(mpath, sizeof(mpath), "%s/%s", dir, LB_FILE_MESSAGES) == 0 &&
		    stat(mpath, &sb) == 0 && (uint64_t)sb.st_size > LB_FHDR_SIZE)
			return (0);
	}
	if ((rc = genesis_of(data, cat, ls, next, &g)) != 0)
		return (rc);
	return (lb_sign_tomb_append(data, dir, &g, ls, &r));
}

/* ---------------------------------------------------------------- verify */

struct chk {
	void	(*report)(void *, const char *, const char *);
	void	*arg;
	int	 bad;
};

static void
chk_report(struct chk *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
chk_report(struct chk *c, const char *path, const char *fmt, ...)
{
	char	buf[512];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	c->bad++;
	if (c->report != NULL)
		c->report(c->arg, path, buf);
}

/* A block as the file holds it. */
struct fblk {
	uint64_t	off, first, len;
	uint8_t		sha[LB_SHA256_LEN];
	int		sound;		/* a block header was there */
};

/*
 * The blocks of the messages file, header by header. Where no sound header is, the chain's
 * record for that offset (if any) says how long the block was meant to be; else the walk
 * stops there (*stop is that offset).
 */
static int
file_blocks(int fd, uint64_t size, const struct lb_chrec **b, size_t nb, struct fblk **out,
    size_t *nout, uint64_t *stop)
{
	struct fblk	*f = NULL;
	uint8_t		 hdr[LB_BHDR_SIZE];
	uint64_t	 off = LB_FHDR_SIZE;
	size_t		 cap = 0, k = 0, j = 0;
	int		 rc = 0;

	while (off < size) {
		struct fblk x = { off, 0, 0, { 0 }, 0 };

		if (off + LB_BHDR_SIZE <= size && lb_pread_all(fd, hdr, sizeof(hdr), off) == 0 &&
		    lb_get32(hdr + LB_BHDR_MAGIC) == LB_BLK_MAGIC &&
		    lb_get32(hdr + LB_BHDR_CRC) == lb_crc32(hdr, LB_BHDR_CRC)) {
			x.first = lb_get64(hdr + LB_BHDR_FIRST_ID);
			x.len = LB_BHDR_SIZE + (uint64_t)lb_get32(hdr + LB_BHDR_COMP_LEN);
			x.sound = 1;
		} else {
			while (j < nb && b[j]->off < off)
				j++;
			if (j < nb && b[j]->off == off) {
				x.first = b[j]->first_id;
				x.len = b[j]->len;
			}
		}
		if (x.len == 0 || off + x.len > size)
			break;
		if ((rc = lb_sha256_fd(fd, off, x.len, x.sha)) != 0 ||
		    (rc = lb_grow(&f, &cap, k + 1, sizeof(*f))) != 0)
			break;
		f[k++] = x;
		off += x.len;
	}
	*out = f;
	*nout = k;
	*stop = off;
	return (rc);
}

static const char *
ids(char *buf, size_t len, uint64_t first, uint64_t count)
{
	snprintf(buf, len, "ids %llu-%llu", (unsigned long long)first,
	    (unsigned long long)(first + count - 1));
	return (buf);
}

/*
 * The blocks of mf against the chain's block records, in order, as a diff: a block the chain
 * names that is not there (removed, or the tail cut), one that is elsewhere (reordered), one
 * whose bytes changed (edited), one the chain does not name (added). The first of each run is
 * named; the count of the rest follows. cut: the chain itself is damaged, so what follows
 * its sound records is not reported as unchained.
 */
static void
check_blocks(struct chk *c, const char *mpath, struct lb_msgfile *mf,
    const struct lb_chrec *recs, size_t n, int newest, int cut)
{
	const struct lb_chrec	**b = NULL;
	struct fblk		 *f = NULL;
	uint64_t		  size = lb_msgfile_file_size(mf), stop = 0;
	size_t			  nb = 0, nf = 0, j = 0, more = 0;
	int			  fd = lb_msgfile_fd(mf);
	char			  i1[64], i2[64];

	if ((b = calloc(n + 1, sizeof(*b))) == NULL) {
		chk_report(c, mpath, "out of memory checking the chain");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (recs[i].kind == LB_CH_BLOCK)
			b[nb++] = &recs[i];
	if (file_blocks(fd, size, b, nb, &f, &nf, &stop) != 0) {
		chk_report(c, mpath, "cannot read the blocks");
		goto done;
	}
	for (size_t i = 0; i < nf; i++) {
		size_t k;

		if (j < nb && memcmp(f[i].sha, b[j]->sha, LB_SHA256_LEN) == 0) {
			j++;
			continue;
		}
		for (k = 0; k < nb; k++)
			if (memcmp(f[i].sha, b[k]->sha, LB_SHA256_LEN) == 0)
				break;
		if (c->bad > 0 && k != j) {
			more++;
			if (k > j)
				j = k + 1;
			continue;
		}
		if (k < nb && k > j) {
			int later = 0;

			for (size_t q = i + 1; q < nf && !later; q++)
				later = memcmp(f[q].sha, b[j]->sha, LB_SHA256_LEN) == 0;
			chk_report(c, mpath, "block at byte %llu: the chain has %s there (record "
			    "%llu), the file has %s (record %llu): %s", (unsigned long long)f[i].off,
			    ids(i1, sizeof(i1), b[j]->first_id, b[j]->count),
			    (unsigned long long)b[j]->seq,
			    ids(i2, sizeof(i2), b[k]->first_id, b[k]->count),
			    (unsigned long long)b[k]->seq, later ? "blocks reordered" :
			    "the blocks between were removed");
			j = k + 1;
		} else if (k < nb) {
			chk_report(c, mpath, "block at byte %llu (%s, record %llu) is a copy of one "
			    "before it: blocks reordered or copied", (unsigned long long)f[i].off,
			    ids(i1, sizeof(i1), b[k]->first_id, b[k]->count),
			    (unsigned long long)b[k]->seq);
		} else if (j < nb && b[j]->off == f[i].off) {
			chk_report(c, mpath, "block at byte %llu (%s, record %llu) edited: its "
			    "SHA-256 is not the chain's", (unsigned long long)f[i].off,
			    ids(i1, sizeof(i1), b[j]->first_id, b[j]->count),
			    (unsigned long long)b[j]->seq);
			j++;
		} else if (j < nb) {
			chk_report(c, mpath, "block at byte %llu (first id %llu) is not in the "
			    "chain: added or edited", (unsigned long long)f[i].off,
			    (unsigned long long)f[i].first);
		} else if (!newest && !cut) {
			chk_report(c, mpath, "%llu bytes from byte %llu (first id %llu) are not in "
			    "the chain: added after the day's last record",
			    (unsigned long long)(size - f[i].off), (unsigned long long)f[i].off,
			    (unsigned long long)f[i].first);
			break;
		} else
			break;
	}
	if (j < nb && b[j]->off + b[j]->len > stop)
		chk_report(c, mpath, "truncated tail: the chain names %zu more blocks from byte "
		    "%llu (%s on), the file ends at %llu", nb - j, (unsigned long long)b[j]->off,
		    ids(i1, sizeof(i1), b[j]->first_id, b[j]->count), (unsigned long long)size);
	else if (j < nb)
		chk_report(c, mpath, "%zu blocks the chain names from record %llu (%s on) are "
		    "missing", nb - j, (unsigned long long)b[j]->seq,
		    ids(i1, sizeof(i1), b[j]->first_id, b[j]->count));
	if (more > 0)
		chk_report(c, mpath, "and %zu more blocks do not match the chain", more);
	if (stop < size && (!newest || stop < (j > 0 ? b[j - 1]->off + b[j - 1]->len : 0)))
		chk_report(c, mpath, "bytes from %llu to the end (%llu) are not a block",
		    (unsigned long long)stop, (unsigned long long)size);
 done:
	free(f);
	free(b);
}

/*
 * The day's live segments, as its chain leaves them, against the catalog's. recent: one of
 * the newest two days, whose writer (or a merge) may have published a segment and been
 * killed before chaining it: the writer's next open chains it (§14.3), so a segment the
 * chain does not name is not reported there.
 */
static void
check_segs(struct chk *c, struct lb_store *st, uint32_t day, const struct lb_chrec *recs,
    size_t n, int cut, int recent, const struct lb_segref *refs, size_t nrefs)
{
	const struct lb_chrec	**live = NULL;
	size_t			  nlive = 0;
	uint8_t			  h[LB_SHA256_LEN];
	uint64_t		  size;
	char			  path[PATH_MAX];
	int			  rc;

	if (live_segs(recs, n, &live, &nlive) != 0) {
		chk_report(c, st->data, "out of memory checking the chain");
		return;
	}
	for (size_t j = 0; j < nlive; j++) {
		const struct lb_chrec *r = live[j];
		int listed = 0;

		if (lb_store_seg_path(st, day, r->name, path, sizeof(path)) != 0)
			continue;
		for (size_t q = 0; q < nrefs && !listed; q++)
			listed = refs[q].day == day && strcmp(refs[q].file, r->name) == 0;
		if ((rc = lb_sha256_file(path, h, &size)) != 0) {
			chk_report(c, path, "segment missing (chain record %llu, ids %llu-%llu): %s",
			    (unsigned long long)r->seq, (unsigned long long)r->first_id,
			    (unsigned long long)r->last_id, lb_strerror(rc));
			continue;
		}
		if (size != r->len || memcmp(h, r->sha, LB_SHA256_LEN) != 0)
			chk_report(c, path, "segment edited: %llu bytes whose SHA-256 is not the "
			    "chain's (record %llu: %llu bytes)", (unsigned long long)size,
			    (unsigned long long)r->seq, (unsigned long long)r->len);
		if (!listed)
			chk_report(c, path, "segment in the chain (record %llu) but not in the "
			    "catalog", (unsigned long long)r->seq);
	}
	for (size_t q = 0; q < nrefs; q++) {
		int known = 0;

		if (refs[q].day != day)
			continue;
		for (size_t j = 0; j < nlive && !known; j++)
			known = same_seg(live[j], &refs[q]);
		if (!known && !cut && !recent &&
		    lb_store_seg_path(st, day, refs[q].file, path, sizeof(path)) == 0)
			chk_report(c, path, "segment in the catalog (ids %llu-%llu) but not in the "
			    "chain: added or replaced", (unsigned long long)refs[q].first_id,
			    (unsigned long long)refs[q].last_id);
	}
	free(live);
}

int
lb_store_chain_check(struct lb_store *st, size_t i, struct lb_msgfile *mf,
    const struct lb_chrec *recs, size_t n, int cut, const struct lb_chrec *prev,
    size_t nprev, const struct lb_segref *refs, size_t nrefs,
    void (*report)(void *, const char *, const char *), void *arg)
{
	struct chk	 c = { report, arg, 0 };
	uint32_t	 day = st->days[i].ref.day;
	uint32_t	 want = i > 0 ? st->days[i - 1].ref.day : 0;
	char		 dir[PATH_MAX], mpath[PATH_MAX], pub[PATH_MAX];
	int		 tomb = 0, rc;

	if ((rc = lb_store_day_dir(st, day, dir, sizeof(dir))) != 0 ||
	    (rc = lb_path(mpath, sizeof(mpath), "%s/%s", dir, LB_FILE_MESSAGES)) != 0)
		return (rc);
	if (n == 0)
		return (0);
	if (st->pubpath[0] != '\0')
		snprintf(pub, sizeof(pub), "%s", st->pubpath);
	else if ((rc = lb_path(pub, sizeof(pub), "%s/%s", st->data, LB_SIGN_PUB_FILE)) != 0)
		return (rc);
	if (strcmp(recs[0].ls, st->ls) != 0 || recs[0].day != day)
		chk_report(&c, dir, "the chain is logspace %s's of day %u (moved or copied here)",
		    recs[0].ls, recs[0].day);
	for (size_t k = 0; k < n; k++) {
		if (recs[k].kind != LB_CH_TOMB)
			continue;
		/* A tombstone counts when its signature holds (or the box signs nothing). */
		rc = lb_sign_check_tomb(pub, st->ls, &recs[k]);
		if (rc == 0 || (rc == ENOENT && !(recs[k].level & LB_CHT_SIGNED))) {
			if (recs[k].day == recs[0].prev_day)
				tomb = 1;
		} else
			chk_report(&c, dir, "the tombstone of day %u (record %llu) %s", recs[k].day,
			    (unsigned long long)recs[k].seq, rc == LB_ECORRUPT ?
			    (recs[k].level & LB_CHT_SIGNED ? "has a bad signature (forged)" :
			    "is not signed, though the box signs (forged)") :
			    "cannot be checked: no public key");
	}
	if (recs[0].prev_day != want && !tomb) {
		struct stat	sb;
		char		marker[PATH_MAX];

		if (recs[0].prev_day > want && lb_path(marker, sizeof(marker), "%s/%s", dir,
		    LB_ARCHIVE_RESTORED) == 0 && stat(marker, &sb) == 0)
			/* (its chain as archived before the day before was removed) */
			chk_report(&c, dir, "restored from the archive, and the day before it, "
			    "%04u-%02u-%02u, is not on local disk and left no tombstone here: restore "
			    "it too to check the link (logbox archive verify checks the archive)",
			    recs[0].prev_day / 10000, recs[0].prev_day / 100 % 100,
			    recs[0].prev_day % 100);
		else if (recs[0].prev_day > want)
			chk_report(&c, dir, "the day before it, %04u-%02u-%02u, is missing and left "
			    "no tombstone (removed)", recs[0].prev_day / 10000,
			    recs[0].prev_day / 100 % 100, recs[0].prev_day % 100);
		else
			chk_report(&c, dir, "its chain follows day %u, the store has %u before it",
			    recs[0].prev_day, want);
	} else if (recs[0].prev_day == want && want != 0 && prev != NULL) {
		if (recs[0].prev_seq >= nprev ||
		    memcmp(prev[recs[0].prev_seq].hash, recs[0].prev, LB_SHA256_LEN) != 0)
			chk_report(&c, dir, "its chain does not link the day before's (record %llu "
			    "of %04u-%02u-%02u): that chain was rewritten",
			    (unsigned long long)recs[0].prev_seq, want / 10000, want / 100 % 100,
			    want % 100);
	}
	if (mf != NULL)
		check_blocks(&c, mpath, mf, recs, n, i + 1 == st->ndays, cut);
	check_segs(&c, st, day, recs, n, cut, i + 2 >= st->ndays, refs, nrefs);
	return (c.bad);
}
