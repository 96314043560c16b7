/*
 * lb_store_verify.c — checking a whole store (every message file, every segment, and that the
 * catalog, the days and the segments agree) and its statistics. It reports what it finds and
 * changes nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"

struct vctx {
	void	(*report)(void *, const char *, const char *);
	void	*arg;
	int	 bad;
	uint64_t n;		/* problems reported */
};

static void
vreport(struct vctx *v, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
vreport(struct vctx *v, const char *path, const char *fmt, ...)
{
	char	buf[512];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	v->bad = 1;
	v->n++;
	if (v->report != NULL)
		v->report(v->arg, path, buf);
}

/* Problems found in one try of a day's chain check, kept until the last try. */
struct held {
	char	(*path)[PATH_MAX];
	char	(*what)[512];
	size_t	  n, cap;
};

static void
hold(void *arg, const char *path, const char *what)
{
	struct held *h = arg;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 8;
		void *p = realloc(h->path, cap * sizeof(*h->path));

		if (p == NULL)
			return;
		h->path = p;
		if ((p = realloc(h->what, cap * sizeof(*h->what))) == NULL)
			return;
		h->what = p;
		h->cap = cap;
	}
	snprintf(h->path[h->n], sizeof(h->path[h->n]), "%s", path);
	snprintf(h->what[h->n], sizeof(h->what[h->n]), "%s", what);
	h->n++;
}

#define CHAIN_TRIES	4	/* a day the writer may be changing is checked again */
#define CHAIN_WAIT_US	250000

/*
 * Day i against its chain (FORMAT.md §14). The writer may chain, publish and merge the
 * newest two days while this reads them: a problem there is looked at again, with the chain
 * and the catalog read anew, and reported only when it stays. *recs gets the day's chain (for
 * the next day's link).
 */
static int
verify_chain(struct lb_store *st, struct vctx *v, size_t i, struct lb_chrec **recs,
    size_t *nrecs, const struct lb_chrec *prev, size_t nprev)
{
	const struct lb_dayref	*d = &st->days[i].ref;
	struct held		 h = { NULL, NULL, 0, 0 };
	struct lb_segref	*refs = NULL;
	struct lb_msgfile	*mf;
	size_t			 nrefs = 0;
	char			 dir[PATH_MAX], why[512];
	int			 rc = 0, live = i + 2 >= st->ndays, tries = live ? CHAIN_TRIES : 1;
	/*
	 * The day's segments: those overlapping its ids (days' ids do not overlap), so a day
	 * costs its own segments, not the logspace's. The newest two may grow while this reads
	 * them: every segment from the day's first id on.
	 */
	uint64_t		 lo = d->first_id, hi = live ? UINT64_MAX :
			    d->next_id > d->first_id ? d->next_id - 1 : d->first_id;

	if ((rc = lb_store_day_dir(st, d->day, dir, sizeof(dir))) != 0)
		return (rc);
	for (int t = 0; t < tries; t++) {
		if (t > 0)
			usleep(CHAIN_WAIT_US);
		h.n = 0;
		lb_chain_free(*recs, *nrecs);
		free(refs);
		refs = NULL;
		why[0] = '\0';
		/* The chain first, then what it names: the writer adds to both in that order. */
		rc = lb_chain_load(dir, recs, nrecs, why, sizeof(why));
		if (rc == LB_ECORRUPT)
			hold(&h, dir, why);
		else if (rc != 0 && rc != ENOENT)
			break;
		if ((rc = lb_catalog_segments(st->cat, st->ls, lo, hi, &refs, &nrefs)) != 0)
			break;
		/* A message file that does not open is the day loop's to report. */
		if (lb_store_days_file(st, i, &mf) != 0)
			mf = NULL;
		if (*nrecs == 0) {
			int has = mf != NULL && lb_msgfile_nblocks(mf) > 0;

			for (size_t q = 0; q < nrefs && !has; q++)
				has = refs[q].day == d->day;
			/* (The newest day's first blocks are chained by the writer's first flush.) */
			if (has && why[0] == '\0' && i + 1 < st->ndays)
				hold(&h, dir, "no chain: the day's blocks and segments are not "
				    "tamper-evident (written before chains, or the chain removed)");
		} else
			(void)lb_store_chain_check(st, i, mf, *recs, *nrecs, why[0] != '\0', prev,
			    nprev, refs, nrefs, hold, &h);
		if (h.n == 0)
			break;
		/* Read the newest day's blocks anew on the next try. */
		if (live)
			lb_store_days_forget(st, i);
	}
	for (size_t k = 0; k < h.n; k++)
		vreport(v, h.path[k], "%s", h.what[k]);
	free(h.path);
	free(h.what);
	free(refs);
	return (rc);
}

/* ---------------------------------------------------------------- seals */

struct sealrec {
	uint64_t	epoch;
	int64_t		started, time;
	uint32_t	day;
	uint64_t	seq;
	uint8_t		prev[LB_SHA256_LEN], mac[LB_SHA256_LEN];
};

struct seals {
	struct sealrec	*v;
	size_t		 n, cap;
	int64_t		 oldest;	/* µs: the logspace's oldest chain record */
	int		 err;
};

static void
seals_add(struct seals *s, const struct lb_chrec *recs, size_t n, uint32_t day)
{
	for (size_t i = 0; i < n; i++) {
		const struct lb_chrec *r = &recs[i];

		if (s->oldest == 0 || r->time < s->oldest)
			s->oldest = r->time;
		if (r->kind != LB_CH_SEAL)
			continue;
		if (lb_grow(&s->v, &s->cap, s->n + 1, sizeof(*s->v)) != 0) {
			s->err = ENOMEM;
			return;
		}
		s->v[s->n].epoch = r->epoch;
		s->v[s->n].started = r->started;
		s->v[s->n].time = r->time;
		s->v[s->n].day = day;
		s->v[s->n].seq = r->seq;
		memcpy(s->v[s->n].prev, r->prev, LB_SHA256_LEN);
		memcpy(s->v[s->n].mac, r->sha, LB_SHA256_LEN);
		s->n++;
	}
}

static int
epoch_cmp(const void *a, const void *b)
{
	const struct sealrec *x = a, *y = b;

	if (x->epoch != y->epoch)
		return (x->epoch < y->epoch ? -1 : 1);
	if (x->day != y->day)
		return (x->day < y->day ? -1 : 1);
	return (x->seq < y->seq ? -1 : x->seq > y->seq);
}

static void
day_str(char *buf, size_t len, uint32_t day)
{
	snprintf(buf, len, "%04u-%02u-%02u", day / 10000, day / 100 % 100, day % 100);
}

/*
 * The logspace's seals (FORMAT.md §14.5): no epoch missing between the first and the last,
 * the last one the key's epoch before now (else the newest records and their seals were
 * removed), none from the key's epoch or after (the key file was replaced); with the
 * verification key, each seal's MAC with its own epoch's key.
 */
static void
check_seals(struct lb_store *st, struct vctx *v, struct seals *s, int rc0,
    const struct lb_sealstate *ss0)
{
	struct lb_sealstate	 ss;
	struct lb_sealinfo	*si = &st->sinfo;
	uint8_t			 k[LB_SEAL_KEYLEN], t[LB_SEAL_KEYLEN], mac[LB_SHA256_LEN];
	uint64_t		 ke = 0;
	char			 path[PATH_MAX], lspath[PATH_MAX], ds[16];
	int			 rc;

	uint64_t signed_days = si->days_signed, stamped = si->days_stamped;

	memset(si, 0, sizeof(*si));
	si->days_signed = signed_days;
	si->days_stamped = stamped;
	if (lb_path(path, sizeof(path), "%s/%s", st->data, LB_SEAL_FILE) != 0 ||
	    lb_path(lspath, sizeof(lspath), "%s/%s", st->data, st->ls) != 0)
		return;
	rc = lb_seal_state(st->data, &ss);
	if (rc == ENOENT) {
		if (s->n > 0)
			vreport(v, path, "missing, and the logspace has %zu seals: the sealing key "
			    "file was removed", s->n);
		return;
	}
	if (rc != 0) {
		vreport(v, path, "cannot read the sealing key: %s", lb_strerror(rc));
		return;
	}
	si->setup = 1;
	si->key_epoch = ss.epoch;
	qsort(s->v, s->n, sizeof(*s->v), epoch_cmp);
	si->seals = s->n;
	if (s->n > 0) {
		si->first = s->v[0].epoch;
		si->last = s->v[s->n - 1].epoch;
		si->last_time = s->v[s->n - 1].time;
	}
	for (size_t i = 1; i < s->n; i++)
		if (s->v[i].epoch > s->v[i - 1].epoch + 1) {
			day_str(ds, sizeof(ds), s->v[i].day);
			vreport(v, lspath, "seals of epochs %llu-%llu are missing (the seal after "
			    "them is record %llu of %s): seals removed",
			    (unsigned long long)s->v[i - 1].epoch + 1,
			    (unsigned long long)s->v[i].epoch - 1, (unsigned long long)s->v[i].seq,
			    ds);
		}
	/*
	 * The key's epoch before the chains were read (ss0) bounds what they must hold; the
	 * one after (ss), what they may: a seal run may have come in between.
	 */
	if (rc0 == 0 && ss0->epoch <= ss.epoch)
		ss.started = ss0->started;
	if (s->n > 0 && si->last >= ss.epoch)
		vreport(v, path, "the logspace has a seal of epoch %llu, the key is at epoch %llu: "
		    "the key file was replaced by an older one", (unsigned long long)si->last,
		    (unsigned long long)ss.epoch);
	else if (s->oldest != 0 && rc0 == 0 && s->oldest < ss0->started &&
	    si->last + 1 < ss0->epoch) {
		if (s->n == 0)
			vreport(v, lspath, "no seal, though the key is at epoch %llu and the "
			    "logspace's records are older than that epoch: its seals were removed",
			    (unsigned long long)ss0->epoch);
		else
			vreport(v, lspath, "truncated: the last seal is of epoch %llu, the key is "
			    "at %llu: the seals of epochs %llu-%llu, and the records they sealed, "
			    "were removed", (unsigned long long)si->last,
			    (unsigned long long)ss0->epoch, (unsigned long long)si->last + 1,
			    (unsigned long long)ss0->epoch - 1);
	}
	if (!st->has_vkey)
		return;
	if ((rc = lb_seal_key_check(st->data, st->vkey)) != 0)
		vreport(v, path, "its key is not the one the verification key gives at epoch %llu%s",
		    (unsigned long long)ss.epoch, rc == LB_ECORRUPT ? ": replaced, or the wrong "
		    "verification key" : "");
	memcpy(k, st->vkey, sizeof(k));
	for (size_t i = 0; i < s->n; i++) {
		const struct sealrec *r = &s->v[i];

		for (; ke < r->epoch; ke++) {
			(void)lb_seal_ratchet(k, ke + 1, t);
			memcpy(k, t, sizeof(k));
		}
		(void)lb_seal_mac(k, st->ls, r->day, r->epoch, r->started, r->prev, mac);
		day_str(ds, sizeof(ds), r->day);
		if (memcmp(mac, r->mac, sizeof(mac)) != 0)
			vreport(v, lspath, "the seal of epoch %llu (record %llu of %s) does not "
			    "verify: made with another epoch's key (resealed), or the records before "
			    "it changed", (unsigned long long)r->epoch, (unsigned long long)r->seq,
			    ds);
		else
			si->checked++;
	}
	memset(k, 0, sizeof(k));
	memset(t, 0, sizeof(t));
}

/*
 * The day's RFC 3161 time stamp, <day>/root.tsr (FORMAT.md §14.7): a granted time stamp of its
 * last day root's hash, signed by a TSA the given CAs vouch for (lb_store_set_verify_tsa_ca;
 * without them, the hash and the status only).
 */
static void
check_stamp(struct lb_store *st, struct vctx *v, const char *dir, const char *ds,
    const struct lb_chrec *root)
{
	char		 path[PATH_MAX], why[256];
	uint8_t		*b = NULL;
	size_t		 len = 0;
	int64_t		 when;
	int		 fd, rc;

	if (lb_tsa_path(path, sizeof(path), dir) != 0)
		return;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno != ENOENT)
			vreport(v, path, "cannot read: %s", strerror(errno));
		return;
	}
	{
		struct stat sb;

		if (fstat(fd, &sb) == -1 || sb.st_size > LB_TSR_MAX ||
		    (b = malloc((size_t)sb.st_size + 1)) == NULL ||
		    lb_pread_all(fd, b, (size_t)sb.st_size, 0) != 0) {
			vreport(v, path, "cannot read (or over %d bytes)", LB_TSR_MAX);
			close(fd);
			free(b);
			return;
		}
		len = (size_t)sb.st_size;
	}
	close(fd);
	if (st->vcur != NULL)
		st->vcur->stamped = -1;
	if (root == NULL)
		vreport(v, path, "a time stamp, but %s has no day root", ds);
	else if ((rc = lb_tsa_check(b, len, root->hash, st->tsa_ca[0] != '\0' ? st->tsa_ca :
	    NULL, &when, why, sizeof(why))) != 0)
		vreport(v, path, "bad timestamp of the day root (record %llu): %s",
		    (unsigned long long)root->seq, why);
	else {
		st->sinfo.days_stamped++;
		if (st->vcur != NULL)
			st->vcur->stamped = 1;
	}
	free(b);
}

/*
 * The day roots of day's chain (FORMAT.md §14.6): each signature checked with the public key
 * given (lb_store_set_verify_pubkey), else the box's own sign.pub; its counts, the day's.
 */
static void
check_roots(struct lb_store *st, struct vctx *v, const struct lb_chrec *recs, size_t n,
    const struct lb_dayref *d)
{
	const struct lb_chrec	*last;
	char			 dir[PATH_MAX], pub[PATH_MAX], ds[16];
	int			 rc, roots = 0;

	if (lb_store_day_dir(st, d->day, dir, sizeof(dir)) != 0)
		return;
	if (st->pubpath[0] != '\0')
		snprintf(pub, sizeof(pub), "%s", st->pubpath);
	else if (lb_path(pub, sizeof(pub), "%s/%s", st->data, LB_SIGN_PUB_FILE) != 0)
		return;
	day_str(ds, sizeof(ds), d->day);
	last = NULL;
	for (size_t i = 1; i < n; i++) {
		const struct lb_chrec *r = &recs[i];

		if (r->kind != LB_CH_DAYROOT)
			continue;
		roots++;
		last = r;
		rc = lb_sign_check(pub, st->ls, d->day, r->seq - 1, r->prev, r->first_id,
		    r->count, r->sig);
		if (st->vcur != NULL)
			st->vcur->signed_ = rc == 0 ? 1 : -1;
		if (rc == LB_ECORRUPT)
			vreport(v, dir, "the day root (record %llu) has a bad signature: not made "
			    "by %s's key, or swapped from another day", (unsigned long long)r->seq,
			    pub);
		else if (rc != 0)
			vreport(v, pub, "cannot check the day root of %s: %s", ds, lb_strerror(rc));
		else if (r->first_id != d->first_id || r->count != d->next_id - d->first_id)
			vreport(v, dir, "the day root (record %llu) signs ids %llu-%llu, the day has "
			    "%llu-%llu", (unsigned long long)r->seq, (unsigned long long)r->first_id,
			    (unsigned long long)(r->first_id + r->count - 1),
			    (unsigned long long)d->first_id, (unsigned long long)d->next_id - 1);
		else
			st->sinfo.days_signed++;
	}
	check_stamp(st, v, dir, ds, last);
	(void)roots;
}

void
lb_store_set_verify_fast(struct lb_store *st, int fast)
{
	st->verify_fast = fast;
}

void
lb_store_set_verify_tsa_ca(struct lb_store *st, const char *path)
{
	snprintf(st->tsa_ca, sizeof(st->tsa_ca), "%s", path);
}

void
lb_store_set_verify_pubkey(struct lb_store *st, const char *path)
{
	snprintf(st->pubpath, sizeof(st->pubpath), "%s", path);
}

void
lb_store_set_verify_key(struct lb_store *st, const uint8_t key[LB_SEAL_KEYLEN])
{
	memcpy(st->vkey, key, LB_SEAL_KEYLEN);
	st->has_vkey = 1;
}

void
lb_store_seal_info(const struct lb_store *st, struct lb_sealinfo *out)
{
	*out = st->sinfo;
}

size_t
lb_store_day_count(const struct lb_store *st)
{
	return (st->nvdays);
}

void
lb_store_day_info(const struct lb_store *st, size_t i, struct lb_dayinfo *out)
{
	*out = st->vdays[i];
}

int
lb_store_verify(struct lb_store *st,
    void (*report)(void *arg, const char *path, const char *what), void *arg)
{
	struct vctx		 v = { report, arg, 0, 0 };
	struct lb_segref	*refs = NULL;
	struct lb_segment	*sg;
	struct lb_seginfo	 si;
	struct lb_msgfile	*mf;
	struct lb_chrec		*crecs = NULL, *cprev = NULL;
	struct seals		 seals = { NULL, 0, 0, 0, 0 };
	struct lb_sealstate	 ss0;
	uint64_t		 before = 0;
	int			 src0;
	uint64_t		 first, next, expect = 0, msgs_next = 0;
	size_t			 n = 0, ncrecs = 0, ncprev = 0;
	char			 path[PATH_MAX], why[512];
	int			 rc;

	if ((rc = lb_store_days_load(st)) != 0)
		return (rc);
	free(st->vdays);
	st->nvdays = 0;
	if ((st->vdays = calloc(st->ndays + 1, sizeof(*st->vdays))) == NULL)
		return (errno);
	st->nvdays = st->ndays;
	st->sinfo.days_signed = 0;
	st->sinfo.days_stamped = 0;
	src0 = lb_seal_state(st->data, &ss0);
	for (size_t i = 0; i < st->ndays; i++) {
		const struct lb_dayref *d = &st->days[i].ref;

		struct lb_dayinfo *di = &st->vdays[i];

		if (i > 0)
			st->vdays[i - 1].problems = v.n - before;
		before = v.n;
		memset(di, 0, sizeof(*di));
		di->day = d->day;
		di->messages = d->next_id - d->first_id;
		st->vcur = di;
		if ((rc = verify_chain(st, &v, i, &crecs, &ncrecs, cprev, ncprev)) != 0)
			goto done;
		seals_add(&seals, crecs, ncrecs, d->day);
		check_roots(st, &v, crecs, ncrecs, d);
		di->records = ncrecs;
		for (size_t k = 0; k < ncrecs; k++)
			if (crecs[k].kind == LB_CH_SEAL) {
				di->seal_epoch = crecs[k].epoch;
				di->sealed_time = crecs[k].time;
			}
		lb_chain_free(cprev, ncprev);
		cprev = crecs;
		ncprev = ncrecs;
		crecs = NULL;
		ncrecs = 0;
		if ((rc = lb_store_day_dir(st, d->day, path, sizeof(path))) != 0)
			goto done;
		if ((rc = lb_store_days_file(st, i, &mf)) != 0) {
			char file[PATH_MAX];

			/*
			 * The writer names a day in the catalog before it creates the day's
			 * message file (writer_open_day): a writer killed in between leaves
			 * the newest day with no file and no message. Not damage: the next
			 * writer creates the file.
			 */
			if (rc == ENOENT && i == st->ndays - 1 && d->next_id == d->first_id) {
				rc = 0;
				continue;
			}
			if (lb_path(file, sizeof(file), "%s/%s", path, LB_FILE_MESSAGES) != 0)
				snprintf(file, sizeof(file), "%s", path);
			vreport(&v, file, "cannot open the message file: %s", lb_strerror(rc));
			continue;
		}
		why[0] = '\0';
		if (!st->verify_fast && (rc = lb_msgfile_verify(mf, why, sizeof(why))) != 0)
			vreport(&v, path, "%s", why[0] ? why : lb_strerror(rc));
		lb_msgfile_range(mf, &first, &next);
		if (next > first && first != d->first_id)
			vreport(&v, path, "messages start at id %llu, the catalog says %llu",
			    (unsigned long long)first, (unsigned long long)d->first_id);
		if (next < d->next_id) {
			char file[PATH_MAX];

			/* The newest messages of a day live in the WAL until their block is sealed. */
			if (lb_path(file, sizeof(file), "%s/%s", path, LB_FILE_WAL) != 0)
				snprintf(file, sizeof(file), "%s", path);
			vreport(&v, file, "messages end before id %llu, the catalog says %llu "
			    "(messages or their WAL records are missing)",
			    (unsigned long long)next, (unsigned long long)d->next_id);
		}
		if (i > 0 && d->first_id != msgs_next)
			vreport(&v, path, "day starts at id %llu, the previous day ends before %llu",
			    (unsigned long long)d->first_id, (unsigned long long)msgs_next);
		msgs_next = next;
	}
	if (st->ndays > 0)
		st->vdays[st->ndays - 1].problems = v.n - before;
	st->vcur = NULL;
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		goto done;
	expect = st->ndays > 0 ? st->days[0].ref.first_id : 1;
	for (size_t i = 0; i < n; i++) {
		const struct lb_segref *r = &refs[i];

		if ((rc = lb_store_seg_path(st, r->day, r->file, path, sizeof(path))) != 0)
			goto done;
		if (r->first_id != expect)
			vreport(&v, path, "segment starts at id %llu, expected %llu (gap or overlap)",
			    (unsigned long long)r->first_id, (unsigned long long)expect);
		if (r->last_id < r->first_id || r->count != r->last_id - r->first_id + 1)
			vreport(&v, path, "segment ids %llu-%llu do not match its count %llu",
			    (unsigned long long)r->first_id, (unsigned long long)r->last_id,
			    (unsigned long long)r->count);
		expect = r->last_id + 1;
		if ((rc = lb_segment_open(path, &sg)) != 0) {
			vreport(&v, path, "cannot open: %s", lb_strerror(rc));
			continue;
		}
		why[0] = '\0';
		if (!st->verify_fast && (rc = lb_segment_verify(sg, why, sizeof(why))) != 0)
			vreport(&v, path, "%s", why[0] ? why : lb_strerror(rc));
		lb_segment_info(sg, &si);
		if (si.first_id != r->first_id || si.last_id != r->last_id ||
		    si.count != r->count || si.size != r->size)
			vreport(&v, path, "file (ids %llu-%llu, %llu messages, %llu bytes) does not "
			    "match the catalog (ids %llu-%llu, %llu messages, %llu bytes)",
			    (unsigned long long)si.first_id, (unsigned long long)si.last_id,
			    (unsigned long long)si.count, (unsigned long long)si.size,
			    (unsigned long long)r->first_id, (unsigned long long)r->last_id,
			    (unsigned long long)r->count, (unsigned long long)r->size);
		lb_segment_close(sg);
	}
	if (n > 0 && refs[n - 1].last_id >= msgs_next)
		vreport(&v, st->data, "segments index id %llu but messages end before %llu",
		    (unsigned long long)refs[n - 1].last_id, (unsigned long long)msgs_next);
	if (seals.err != 0) {
		rc = seals.err;
		goto done;
	}
	check_seals(st, &v, &seals, src0, &ss0);
	rc = 0;
 done:
	lb_chain_free(crecs, ncrecs);
	lb_chain_free(cprev, ncprev);
	free(seals.v);
	free(refs);
	if (rc == 0 && v.bad)
		rc = LB_ECORRUPT;
	return (rc);
}

static uint64_t
disk_bytes(const char *path)
{
	struct stat sb;

	if (stat(path, &sb) == -1)
		return (0);
	return ((uint64_t)sb.st_blocks * 512 < (uint64_t)sb.st_size ?
	    (uint64_t)sb.st_blocks * 512 : (uint64_t)sb.st_size);
}

int
lb_store_stats(struct lb_store *st, struct lb_storestats *ss)
{
	struct lb_segref	*refs = NULL;
	struct lb_msgfile	*mf;
	uint64_t		 disk, raw, first, next;
	size_t			 n = 0;
	char			 path[PATH_MAX];
	int			 rc;

	memset(ss, 0, sizeof(*ss));
	if (st->mode != LB_RDWR && (rc = lb_store_days_load(st)) != 0)
		return (rc);
	for (size_t i = 0; i < st->ndays; i++) {
		if ((rc = lb_store_days_file(st, i, &mf)) != 0) {
			/* The newest day named before its file exists: empty (lb_store_verify). */
			if (rc == ENOENT && i == st->ndays - 1 &&
			    st->days[i].ref.next_id == st->days[i].ref.first_id)
				continue;
			return (rc);
		}
		lb_msgfile_sizes(mf, &disk, &raw);
		ss->messages_bytes += disk;
		ss->raw_bytes += raw;
	}
	ss->days = st->ndays;
	lb_store_range(st, &first, &next);
	ss->messages = next - first;
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		return (rc);
	ss->segments = n;
	for (size_t i = 0; i < n; i++)
		ss->index_bytes += refs[i].size;
	free(refs);
	if (lb_path(path, sizeof(path), "%s/%s/data.mdb", st->data, LB_DIR_CATALOG) == 0)
		ss->catalog_bytes = disk_bytes(path);
	return (0);
}
