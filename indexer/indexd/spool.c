/*
 * spool.c — the spool input (README.md "Spool", FORMAT.md §13): the files syslog-ng writes
 * into --spool DIR, one self-delimiting record per message, are taken, read, parsed with
 * liblogbox's parser, routed, stored through store.c and deleted, exactly once across kill -9
 * at any moment. It owns the files (taking, the writer test, deletion), the record reader
 * (spool_rec_parse, spool_resync: pure functions the fuzz target calls), the batch protocol and
 * its state file <data>/indexd/spool.state, and the spool's counters; appends, commits and
 * holding are store.c's, set-aside messages quarantine.c's.
 *
 * Taking: a "*.lbs" file is renamed to "<name>.<inode>.taken" before it is read; syslog-ng only
 * ever opens "*.lbs" paths, so an open writer keeps writing into the taken inode (indexd reads it
 * like tail -f) and a later open of the same name makes a new file. A taken file is final when
 * no process has it open for writing (F_SETLEASE F_RDLCK succeeds on our O_RDONLY fd; without
 * the right to take a lease, when it has not changed for IX_SPOOL_IDLE_S seconds). A final file
 * whose every byte is stored is unlinked.
 *
 * A batch is up to IX_SPOOL_BATCH bytes of complete records of one file (or one record longer
 * than that, streamed). Its protocol is the FIFO's (fifo.c) with a position instead of a
 * consuming read:
 *   1. read and parse the batch, route each record to its logspace;
 *   2. write the state: the intent (file, offset, m bytes, their CRC, each logspace's next id
 *      before the batch and how many records go to it) and the table of partly consumed files;
 *   3. append every record, commit every touched store (to the kernel: survives kill -9);
 *   4. write the state: the file's offset + m in the table, no intent.
 * The state has two checksummed slots written in turn, each with one pwrite(2): a kill cannot
 * tear a pwrite, a power cut leaves the other slot. At start the newest valid slot is read; an
 * intent is finished by reading its m bytes again (files are deleted only when fully stored)
 * and storing them under the skip rule: a record whose id would be below its store's next id is
 * stored already. A taken file the table does not name was not read at all (offset 0): an
 * entry leaves the table only after its file is unlinked.
 */
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>
#include <zlib.h>

#include "indexd.h"
#include "lb_util.h"

#define SP_MAGIC	"LBSPOOL1"
#define SP_VERSION	1
#define SP_HDR		192		/* slot header bytes */
#define SP_FILE_ENT	(IX_SPOOL_NAME + 16)
#define SP_LS_ENT	88
#define SP_LS_NAME	72

/* A logspace one batch touches. */
struct spls {
	char		 name[LB_NAME_MAX + 1];
	struct lspace	*l;		/* NULL: could not be opened (rc) */
	int		 rc;
	uint64_t	 before;	/* its next id before the batch */
	uint64_t	 count;		/* records of the batch routed to it */
	uint64_t	 idx;		/* scratch while storing */
};

struct spool {
	struct input	*in;		/* the inotify fd: wake-ups */
	int		 dirfd;
	int		 statefd;
	unsigned	 slot;		/* the slot written last */
	uint64_t	 seq;		/* state writes */
	uint64_t	 bseq;		/* batches recorded */
	struct event	*ev_pump;	/* the next round of batches */
	struct event	*ev_rescan;	/* every IX_SPOOL_RESCAN_MS */
	int		 armed;		/* ev_pump is pending */
	int		 rescan;	/* a name appeared: scan the directory */
	int		 lease_ok;	/* -1: unknown, 0: no right (idle rule), 1: leases work */
	struct spfile	**files;	/* taken, sorted by name */
	size_t		 nfiles, capfiles;
	uint8_t		*buf;		/* IX_SPOOL_BATCH bytes */
	uint8_t		*big;		/* IX_SPOOL_KEEP bytes of a record longer than a batch */

	/* the batch in progress */
	int		 pending;	/* recorded, not yet stored */
	struct spfile	*bf;
	uint64_t	 boff;
	size_t		 bm;
	uint32_t	 bcrc;
	struct lb_msg	*msgs;
	uint8_t		*mls;		/* each record's logspace (index into bls) */
	uint8_t		*mdead;		/* quarantined */
	uint64_t	*moff;		/* its offset in the file */
	size_t		 nrec, caprec;
	struct spls	 bls[IX_STATE_LS];
	uint32_t	 nbls;

	/* counters (this process) */
	uint64_t	 records, torn, malformed, malformed_bytes, deleted, bytes;
	int64_t		 last_rtime;	/* µs, of the last record stored; LB_NOTIME: none */
	char		 saved_name[160];
};

/* ---------------------------------------------------------------- the record reader */

/*
 * The record at p[0..len): 0 with *r filled when it is whole and valid; EAGAIN when more bytes
 * are needed (r->size is then the record's size if its header parsed, else 0); LB_EPARSE with
 * *why when it is not a record.
 */
int
spool_rec_parse(const uint8_t *p, size_t len, struct spool_rec *r, const char **why)
{
	const uint8_t	*f[5], *nl;
	size_t		 fl[5], lim = len < IX_SPOOL_HDR_MAX ? len : IX_SPOOL_HDR_MAX;
	uint64_t	 sec, frac, n;
	size_t		 i, k, start;

	memset(r, 0, sizeof(*r));
	if (len < 4) {
		if (memcmp(p, "LS1 ", len) != 0)
			goto nomagic;
		return (EAGAIN);
	}
	if (memcmp(p, "LS1 ", 4) != 0)
		goto nomagic;
	if ((nl = memchr(p, '\n', lim)) == NULL) {
		if (len < IX_SPOOL_HDR_MAX)
			return (EAGAIN);
		*why = "header line too long";
		return (LB_EPARSE);
	}
	r->hdr = (size_t)(nl - p) + 1;
	/* Four fields after the magic, separated by single spaces. */
	for (i = 4, k = 0, start = 4; i <= (size_t)(nl - p); i++) {
		if (i < (size_t)(nl - p) && p[i] != ' ')
			continue;
		if (k == 4) {
			*why = "header has more than 4 fields";
			return (LB_EPARSE);
		}
		f[k] = p + start;
		fl[k++] = i - start;
		start = i + 1;
	}
	if (k != 4) {
		*why = "header has fewer than 4 fields";
		return (LB_EPARSE);
	}
	f[4] = NULL;
	/* rtime: seconds '.' 6 digits */
	if (fl[0] < 8 || f[0][fl[0] - 7] != '.' || !lb_dec_parse(f[0], fl[0] - 7, 12, &sec) ||
	    (fl[0] - 7 > 1 && f[0][0] == '0')) {
		*why = "bad receive time";
		return (LB_EPARSE);
	}
	frac = 0;
	for (i = fl[0] - 6; i < fl[0]; i++) {
		if (f[0][i] < '0' || f[0][i] > '9') {
			*why = "bad receive time";
			return (LB_EPARSE);
		}
		frac = frac * 10 + (uint64_t)(f[0][i] - '0');
	}
	r->rtime = (int64_t)(sec * 1000000 + frac);
	if (fl[1] < 1 || fl[1] > 32) {
		*why = "bad listener";
		return (LB_EPARSE);
	}
	for (i = 0; i < fl[1]; i++) {
		uint8_t c = f[1][i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
			*why = "bad listener";
			return (LB_EPARSE);
		}
	}
	if (fl[2] < 1 || fl[2] > 64) {
		*why = "bad peer";
		return (LB_EPARSE);
	}
	for (i = 0; i < fl[2]; i++)
		if (f[2][i] <= 0x20 || f[2][i] >= 0x7f) {
			*why = "bad peer";
			return (LB_EPARSE);
		}
	if (!lb_dec_parse(f[3], fl[3], 10, &n) || n > IX_SPOOL_LEN_MAX) {
		*why = "bad length";
		return (LB_EPARSE);
	}
	r->listener.p = f[1];
	r->listener.len = fl[1];
	r->peer.p = f[2];
	r->peer.len = fl[2];
	r->len = (size_t)n;
	r->size = r->hdr + r->len + 1;
	if (len < r->size)
		return (EAGAIN);
	if (p[r->size - 1] != '\n') {
		*why = "no LF after the message";
		return (LB_EPARSE);
	}
	return (0);
 nomagic:
	*why = "no record magic";
	return (LB_EPARSE);
}

/*
 * Bytes to skip from p[0..len) (p is not a valid record) to the next "LS1 " whose header
 * parses and whose terminator is LF (or lies beyond len). len when there is none; a possible
 * beginning of one at the very end is kept.
 */
size_t
spool_resync(const uint8_t *p, size_t len)
{
	struct spool_rec r;
	const char	*why;
	const uint8_t	*q;
	size_t		 pos = 1;

	while (pos < len) {
		/* A record may follow a torn one directly: "LS1 " anywhere, not only after LF. */
		if ((q = memchr(p + pos, 'L', len - pos)) == NULL)
			return (len);
		pos = (size_t)(q - p);
		switch (spool_rec_parse(p + pos, len - pos, &r, &why)) {
		case 0:
		case EAGAIN:
			return (pos);	/* (EAGAIN: a beginning, decided when more is there) */
		default:
			break;
		}
		pos++;
	}
	return (len);
}

/* ---------------------------------------------------------------- the state file */

/* Writes the state (the table, and the batch's intent when intent) into the other slot. */
static int
sp_state_write(struct spool *s, int intent)
{
	uint8_t		 b[IX_SPOOL_SLOT];
	size_t		 len, nf = 0;
	uint8_t		*e;

	memset(b, 0, SP_HDR);
	memcpy(b, SP_MAGIC, 8);
	lb_put32(b + 8, SP_VERSION);
	lb_put64(b + 16, ++s->seq);
	e = b + SP_HDR;
	for (size_t i = 0; i < s->nfiles; i++) {
		struct spfile *f = s->files[i];

		if (!f->intable)
			continue;
		memset(e, 0, SP_FILE_ENT);
		memcpy(e, f->name, strlen(f->name));
		lb_put64(e + IX_SPOOL_NAME, f->ino);
		lb_put64(e + IX_SPOOL_NAME + 8, f->off);
		e += SP_FILE_ENT;
		nf++;
	}
	lb_put32(b + 24, (uint32_t)nf);
	lb_put64(b + 64, s->bseq);
	if (intent) {
		lb_put32(b + 28, s->nbls);
		lb_put32(b + 32, 1);
		lb_put64(b + 40, s->boff);
		lb_put64(b + 48, s->bm);
		lb_put32(b + 56, s->bcrc);
		lb_put32(b + 60, (uint32_t)s->nrec);
		memcpy(b + 72, s->bf->name, strlen(s->bf->name));
		lb_put64(b + 72 + IX_SPOOL_NAME, s->bf->ino);
		for (uint32_t i = 0; i < s->nbls; i++) {
			memset(e, 0, SP_LS_ENT);
			memcpy(e, s->bls[i].name, strlen(s->bls[i].name));
			lb_put64(e + SP_LS_NAME, s->bls[i].before);
			lb_put64(e + SP_LS_NAME + 8, s->bls[i].count);
			e += SP_LS_ENT;
		}
	}
	len = (size_t)(e - b);
	lb_put32(b + 12, lb_crc32(b + 16, len - 16));
	s->slot ^= 1;
	return (pwrite_all(s->statefd, b, len, (off_t)s->slot * IX_SPOOL_SLOT));
}

/* What a slot says. */
struct sp_saved {
	uint64_t	 seq;
	uint32_t	 nfiles;
	struct {
		char	 name[IX_SPOOL_NAME];
		uint64_t ino, off;
	}		 files[IX_SPOOL_FILES];
	int		 intent;
	char		 iname[IX_SPOOL_NAME];
	uint64_t	 iino, ioff, im, ibseq;
	uint32_t	 icrc, irec, nls;
	struct {
		char	 name[LB_NAME_MAX + 1];
		uint64_t before, count;
	}		 ls[IX_STATE_LS];
};

static int
sp_slot_read(int fd, unsigned slot, struct sp_saved *sv)
{
	uint8_t		 b[IX_SPOOL_SLOT];
	ssize_t		 n;
	size_t		 len;
	const uint8_t	*e;

	memset(sv, 0, sizeof(*sv));
	if ((n = pread(fd, b, sizeof(b), (off_t)slot * IX_SPOOL_SLOT)) < SP_HDR)
		return (LB_ENOTFOUND);
	if (memcmp(b, SP_MAGIC, 8) != 0 || lb_get32(b + 8) != SP_VERSION)
		return (LB_EFORMAT);
	sv->nfiles = lb_get32(b + 24);
	sv->nls = lb_get32(b + 28);
	if (sv->nfiles > IX_SPOOL_FILES || sv->nls > IX_STATE_LS)
		return (LB_ECORRUPT);
	len = SP_HDR + sv->nfiles * SP_FILE_ENT + sv->nls * SP_LS_ENT;
	if ((size_t)n < len || lb_crc32(b + 16, len - 16) != lb_get32(b + 12))
		return (LB_ECORRUPT);
	sv->seq = lb_get64(b + 16);
	sv->intent = lb_get32(b + 32) == 1;
	sv->ioff = lb_get64(b + 40);
	sv->im = lb_get64(b + 48);
	sv->icrc = lb_get32(b + 56);
	sv->irec = lb_get32(b + 60);
	sv->ibseq = lb_get64(b + 64);
	memcpy(sv->iname, b + 72, IX_SPOOL_NAME - 1);
	sv->iino = lb_get64(b + 72 + IX_SPOOL_NAME);
	e = b + SP_HDR;
	for (uint32_t i = 0; i < sv->nfiles; i++, e += SP_FILE_ENT) {
		memcpy(sv->files[i].name, e, IX_SPOOL_NAME - 1);
		sv->files[i].ino = lb_get64(e + IX_SPOOL_NAME);
		sv->files[i].off = lb_get64(e + IX_SPOOL_NAME + 8);
	}
	for (uint32_t i = 0; i < sv->nls; i++, e += SP_LS_ENT) {
		memcpy(sv->ls[i].name, e, LB_NAME_MAX);
		sv->ls[i].before = lb_get64(e + SP_LS_NAME);
		sv->ls[i].count = lb_get64(e + SP_LS_NAME + 8);
	}
	return (0);
}

/* ---------------------------------------------------------------- files */

/* "YYYYMMDDTHHMMSS..." -> Unix seconds; 0 when the name does not start so. */
static int64_t
name_time(const char *name)
{
	struct tm	tm;
	int		v[6], w[6] = { 4, 2, 2, 2, 2, 2 };
	const char	*p = name;

	for (int i = 0; i < 6; i++) {
		v[i] = 0;
		if (i == 3) {
			if (*p != 'T')
				return (0);
			p++;
		}
		for (int k = 0; k < w[i]; k++, p++) {
			if (*p < '0' || *p > '9')
				return (0);
			v[i] = v[i] * 10 + (*p - '0');
		}
	}
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = v[0] - 1900;
	tm.tm_mon = v[1] - 1;
	tm.tm_mday = v[2];
	tm.tm_hour = v[3];
	tm.tm_min = v[4];
	tm.tm_sec = v[5];
	return ((int64_t)timegm(&tm));
}

static int
suffix(const char *name, const char *suf)
{
	size_t n = strlen(name), k = strlen(suf);

	return (n > k && strcmp(name + n - k, suf) == 0);
}

static int
file_cmp(const void *a, const void *b)
{
	return (strcmp((*(struct spfile *const *)a)->name, (*(struct spfile *const *)b)->name));
}

static struct spfile *
file_find(struct spool *s, const char *name)
{
	for (size_t i = 0; i < s->nfiles; i++)
		if (strcmp(s->files[i]->name, name) == 0)
			return (s->files[i]);
	return (NULL);
}

/* Opens the taken file name (inode ino) and adds it at offset off. */
static int
file_add(struct indexd *env, const char *name, uint64_t ino, uint64_t off, int intable)
{
	struct spool	*s = env->spool;
	struct spfile	*f;
	struct stat	 sb;
	int		 fd;

	if (s->nfiles == s->capfiles) {
		size_t		 cap = s->capfiles ? s->capfiles * 2 : 64;
		struct spfile	**n;

		if ((n = reallocarray(s->files, cap, sizeof(*n))) == NULL)
			return (ENOMEM);
		s->files = n;
		s->capfiles = cap;
	}
	if ((fd = openat(s->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) == -1)
		return (errno);
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_ino != ino) {
		int rc = errno ? errno : EINVAL;

		close(fd);
		return (S_ISREG(sb.st_mode) ? ESTALE : rc);
	}
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		close(fd);
		return (ENOMEM);
	}
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->ino = ino;
	f->fd = fd;
	f->off = off;
	f->size = (uint64_t)sb.st_size;
	f->t = name_time(name);
	f->intable = intable;
	s->files[s->nfiles++] = f;
	qsort(s->files, s->nfiles, sizeof(*s->files), file_cmp);
	return (0);
}

static void
file_drop(struct spool *s, struct spfile *f)
{
	for (size_t i = 0; i < s->nfiles; i++)
		if (s->files[i] == f) {
			memmove(s->files + i, s->files + i + 1,
			    (s->nfiles - i - 1) * sizeof(*s->files));
			s->nfiles--;
			break;
		}
	close(f->fd);
	free(f);
}

/* Takes "*.lbs" files (renamed to "<name>.<inode>.taken") and adds taken files not known yet. */
static void
spool_scan(struct indexd *env)
{
	struct spool	*s = env->spool;
	struct dirent	*de;
	struct stat	 sb;
	char		 taken[IX_SPOOL_NAME];
	DIR		*d;
	int		 fd, rc;

	s->rescan = 0;
	if ((fd = dup(s->dirfd)) == -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		log_warn("spool: %s: reading the directory", env->spool_dir);
		return;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;

		if (n[0] == '.')
			continue;
		if (suffix(n, ".lbs")) {
			if (strlen(n) > IX_SPOOL_NAME - 32) {
				log_warnx("spool: %s/%s: name too long: left alone", env->spool_dir,
				    n);
				continue;
			}
			if (fstatat(s->dirfd, n, &sb, AT_SYMLINK_NOFOLLOW) == -1 ||
			    !S_ISREG(sb.st_mode))
				continue;
			snprintf(taken, sizeof(taken), "%s.%llu.taken", n,
			    (unsigned long long)sb.st_ino);
			if (renameat(s->dirfd, n, s->dirfd, taken) == -1) {
				if (errno != ENOENT)
					log_warn("spool: taking %s/%s", env->spool_dir, n);
				continue;
			}
			n = taken;
		} else if (!suffix(n, ".taken") || file_find(s, n) != NULL)
			continue;
		if (fstatat(s->dirfd, n, &sb, AT_SYMLINK_NOFOLLOW) == -1 || !S_ISREG(sb.st_mode))
			continue;
		if (file_find(s, n) != NULL)
			continue;
		if ((rc = file_add(env, n, (uint64_t)sb.st_ino, 0, 0)) != 0)
			log_warnx("spool: %s/%s: %s", env->spool_dir, n, strerror(rc));
		else
			log_debug("spool: took %s", n);
	}
	closedir(d);
}

/*
 * Is f final (nobody can write to it any more)? A read lease on our O_RDONLY fd is granted only
 * while no process has the file open for writing; without the right to take one (not the
 * owner, no CAP_LEASE) the file is final once unchanged for IX_SPOOL_IDLE_S seconds.
 */
static int
file_final(struct indexd *env, struct spfile *f)
{
	struct spool	*s = env->spool;
	struct stat	 sb;
	int		 rc;

	if (f->final)
		return (1);
	if (s->lease_ok != 0) {
		if (fcntl(f->fd, F_SETLEASE, F_RDLCK) == 0) {
			(void)fcntl(f->fd, F_SETLEASE, F_UNLCK);
			s->lease_ok = 1;
			f->final = 1;
			goto done;
		}
		rc = errno;
		if (rc == EAGAIN || rc == EBUSY)
			return (0);
		log_warnx("spool: no lease on %s/%s (%s): a taken file counts as closed by its "
		    "writer once unchanged for %d s", env->spool_dir, f->name, strerror(rc),
		    IX_SPOOL_IDLE_S);
		s->lease_ok = 0;
	}
	if (fstat(f->fd, &sb) == -1)
		return (0);
	if (time(NULL) - sb.st_mtime < IX_SPOOL_IDLE_S)
		return (0);
	f->final = 1;
 done:
	if (fstat(f->fd, &sb) == 0)
		f->size = (uint64_t)sb.st_size;
	return (1);
}

/* ---------------------------------------------------------------- batches */

static int
rec_grow(struct spool *s)
{
	size_t		 cap = s->caprec ? s->caprec * 2 : 8192;
	struct lb_msg	*m;
	uint8_t		*a, *b;
	uint64_t	*o;

	if ((m = reallocarray(s->msgs, cap, sizeof(*m))) == NULL)
		return (ENOMEM);
	s->msgs = m;
	if ((a = reallocarray(s->mls, cap, 1)) == NULL)
		return (ENOMEM);
	s->mls = a;
	if ((b = reallocarray(s->mdead, cap, 1)) == NULL)
		return (ENOMEM);
	s->mdead = b;
	if ((o = reallocarray(s->moff, cap, sizeof(*o))) == NULL)
		return (ENOMEM);
	s->moff = o;
	s->caprec = cap;
	return (0);
}

/* The logspace a message goes to: the [[logspace]] rules of --routes (routes.c). */
static const char *
route(struct indexd *env, const struct lb_msg *m, const struct spool_rec *r)
{
	char	lis[40];

	memcpy(lis, r->listener.p, r->listener.len);	/* (1..32 bytes: spool_rec_parse) */
	lis[r->listener.len] = '\0';
	return (routes_pick(env->routes, m, lis));
}

/* While a file is being worked on, the spool input's name says which (logs, dead letters). */
static void
name_file(struct indexd *env, struct spfile *f, uint64_t off)
{
	struct spool *s = env->spool;

	if (f == NULL) {
		snprintf(s->in->in_name, sizeof(s->in->in_name), "%s", s->saved_name);
		return;
	}
	if (off == UINT64_MAX)
		snprintf(s->in->in_name, sizeof(s->in->in_name), "spool file %s", f->name);
	else
		snprintf(s->in->in_name, sizeof(s->in->in_name), "spool file %s at byte %llu",
		    f->name, (unsigned long long)off);
}

/*
 * Adds record r (raw message raw[0..r->len), at file offset off) to the batch: parsed, the
 * peer as host when it has none, routed. replay: the logspaces and their next ids before come
 * from the intent. 0, EAGAIN (a logspace cannot be opened now: end the batch before it), or
 * an error.
 */
static int
batch_add(struct indexd *env, const struct spool_rec *r, const uint8_t *raw, size_t rawlen,
    uint64_t off, const struct sp_saved *replay, int cut)
{
	struct spool	*s = env->spool;
	struct lb_msg	*m;
	const char	*ls;
	uint32_t	 k;
	int		 rc;

	if (s->nrec == s->caprec && (rc = rec_grow(s)) != 0)
		return (rc);
	m = &s->msgs[s->nrec];
	lb_syslog_parse(raw, rawlen, r->rtime, m);
	if (cut)
		m->flags |= LB_MSG_TRUNCATED;
	if (!(r->peer.len == 1 && r->peer.p[0] == '-')) {
		m->peer = r->peer;
		if (m->host.len == 0)
			m->host = r->peer;
	}
	ls = route(env, m, r);
	for (k = 0; k < s->nbls; k++)
		if (strcmp(s->bls[k].name, ls) == 0)
			break;
	if (k == s->nbls) {
		struct spls *b = &s->bls[k];

		if (k == IX_STATE_LS)
			return (EAGAIN);
		memset(b, 0, sizeof(*b));
		snprintf(b->name, sizeof(b->name), "%s", ls);
		if ((rc = ls_get(env, (const uint8_t *)ls, strlen(ls), &b->l)) != 0) {
			if (lb_errclass(rc) != LB_ERRC_MESSAGE) {
				if (s->nrec > 0)
					return (EAGAIN);
				hold(env, "logspace %s: %s", ls, lb_strerror(rc));
				return (rc);
			}
			b->l = NULL;
			b->rc = rc;
		}
		b->before = b->l != NULL ? b->l->next_id : 0;
		if (replay != NULL) {
			uint32_t j;

			for (j = 0; j < replay->nls; j++)
				if (strcmp(replay->ls[j].name, ls) == 0)
					break;
			if (j < replay->nls)
				b->before = replay->ls[j].before;
			else
				log_warnx("spool: the batch in progress now routes to logspace %s, "
				    "which it did not before the stop (the rules changed?)", ls);
		}
		s->nbls++;
	}
	s->bls[k].count++;
	s->mls[s->nrec] = (uint8_t)k;
	s->mdead[s->nrec] = 0;
	s->moff[s->nrec] = off;
	s->nrec++;
	return (0);
}

static void
batch_reset(struct spool *s)
{
	s->nrec = 0;
	s->nbls = 0;
	s->bm = 0;
	s->bf = NULL;
	s->pending = 0;
}

/*
 * Step 1 for file f: reads up to a batch of it at f->off and builds the batch. limit != 0
 * (replay): exactly limit bytes, their end taken as final. Sets s->bm to the bytes the batch
 * covers (records, malformed and torn stretches); 0: nothing complete to take now.
 */
static int
batch_build(struct indexd *env, struct spfile *f, size_t limit, const struct sp_saved *replay)
{
	struct spool	*s = env->spool;
	struct spool_rec r;
	const char	*why;
	size_t		 want, n, pos = 0, skip;
	ssize_t		 got;
	int		 rc, final, atend, log = replay == NULL;

	batch_reset(s);
	s->bf = f;
	s->boff = f->off;
	final = limit != 0 ? 1 : f->final;
	want = limit != 0 ? limit : IX_SPOOL_BATCH;
	if (want > IX_SPOOL_BATCH)
		want = IX_SPOOL_BATCH;
	for (n = 0; n < want; n += (size_t)got) {
		got = pread(f->fd, s->buf + n, want - n, (off_t)(f->off + n));
		if (got == -1) {
			if (errno == EINTR) {
				got = 0;
				continue;
			}
			rc = errno;
			hold(env, "spool: %s: read: %s", f->name, strerror(rc));
			return (rc);
		}
		if (got == 0)
			break;
	}
	if (limit != 0 && n < limit && n < IX_SPOOL_BATCH)
		return (LB_ECORRUPT);
	atend = limit != 0 ? 1 : n < want;	/* the buffer ends where the file ends */
	if (f->off + n > f->size)
		f->size = f->off + n;
	while (pos < n) {
		rc = spool_rec_parse(s->buf + pos, n - pos, &r, &why);
		if (rc == 0) {
			if ((rc = batch_add(env, &r, s->buf + pos + r.hdr, r.len, f->off + pos,
			    replay, 0)) == EAGAIN)
				break;
			if (rc != 0)
				return (rc);
			pos += r.size;
			continue;
		}
		if (rc == EAGAIN) {
			if (pos == 0 && r.size > IX_SPOOL_BATCH) {
				s->bm = 0;
				return (EFBIG);	/* the caller streams it */
			}
			if (!atend || !final)
				break;
			/* The file's last bytes, and nobody will add to them. */
			skip = spool_resync(s->buf + pos, n - pos);
			if (skip < n - pos) {
				why = r.size ? "record longer than what follows it" : "malformed";
				goto bad;
			}
			if (log) {
				s->torn++;
				log_warnx("spool: %s/%s: a torn record of %zu bytes at byte %llu "
				    "(its writer stopped in the middle of it): skipped",
				    env->spool_dir, f->name, n - pos,
				    (unsigned long long)(f->off + pos));
			}
			pos = n;
			break;
		}
		/* Not a record here: nothing before the next candidate can be one. */
		skip = spool_resync(s->buf + pos, n - pos);
 bad:
		if (log) {
			name_file(env, f, UINT64_MAX);
			s->malformed++;
			s->malformed_bytes += skip;
			malformed(env, s->in, f->off + pos, why, s->buf + pos, n - pos);
			name_file(env, NULL, 0);
		}
		pos += skip;
	}
	s->bm = pos;
	return (0);
}

/*
 * A record longer than a batch at f->off, of size bytes (header hdr): streamed through the
 * buffer, its first IX_SPOOL_KEEP raw bytes kept, the CRC taken over all of it. 0 with the
 * batch built (one record, cut and flagged truncated; or none: malformed); EAGAIN while the
 * file does not hold all of it yet.
 */
static int
batch_big(struct indexd *env, struct spfile *f, const struct sp_saved *replay)
{
	struct spool	*s = env->spool;
	struct spool_rec r;
	const char	*why;
	uint64_t	 size, done = 0, keep;
	uint32_t	 crc = 0;
	uint8_t		 last = 0;
	ssize_t		 got;
	int		 rc;

	batch_reset(s);
	s->bf = f;
	s->boff = f->off;
	if ((got = pread(f->fd, s->buf, IX_SPOOL_HDR_MAX, (off_t)f->off)) <= 0)
		return (EAGAIN);
	rc = spool_rec_parse(s->buf, (size_t)got, &r, &why);
	if (rc != EAGAIN || r.size <= IX_SPOOL_BATCH)
		return (EAGAIN);	/* (cannot happen: batch_build said so) */
	size = r.size;
	if (f->size < f->off + size) {
		struct stat sb;

		if (fstat(f->fd, &sb) == 0)
			f->size = (uint64_t)sb.st_size;
		if (f->size < f->off + size && !f->final && replay == NULL)
			return (EAGAIN);
		if (f->size < f->off + size) {
			last = 0;	/* cut short for good: not a record */
			goto notrec;
		}
	}
	keep = r.len < IX_SPOOL_KEEP ? r.len : IX_SPOOL_KEEP;
	while (done < size) {
		size_t want = size - done < IX_SPOOL_BATCH ? (size_t)(size - done) : IX_SPOOL_BATCH;

		if ((got = pread(f->fd, s->buf, want, (off_t)(f->off + done))) == -1) {
			if (errno == EINTR)
				continue;
			rc = errno;
			hold(env, "spool: %s: read: %s", f->name, strerror(rc));
			return (rc);
		}
		if (got == 0)
			return (EAGAIN);
		crc = (uint32_t)crc32(crc, s->buf, (uInt)got);
		/* Raw message bytes [r.hdr, r.hdr + keep) of the record land in s->big. */
		for (uint64_t a = done; a < done + (uint64_t)got; ) {
			uint64_t lo = r.hdr, hi = r.hdr + keep;

			if (a < lo)
				a = lo;
			if (a >= hi || a >= done + (uint64_t)got)
				break;
			uint64_t e = hi < done + (uint64_t)got ? hi : done + (uint64_t)got;

			memcpy(s->big + (a - lo), s->buf + (a - done), (size_t)(e - a));
			a = e;
		}
		done += (uint64_t)got;
		last = s->buf[got - 1];
	}
	s->bm = (size_t)size;
	s->bcrc = crc;
 notrec:
	if (last != '\n') {
		/* Not a record: skip its first byte and let batch_build resync from there. */
		if (replay == NULL) {
			name_file(env, f, UINT64_MAX);
			s->malformed++;
			s->malformed_bytes++;
			malformed(env, s->in, f->off, "no LF after the message", (const uint8_t *)"LS1 ",
			    4);
			name_file(env, NULL, 0);
		}
		if (lb_pread_all(f->fd, s->buf, 1, f->off) != 0)
			return (EAGAIN);
		s->bm = 1;
		s->bcrc = lb_crc32(s->buf, 1);
		return (0);
	}
	/* (the record's header fields point into s->buf, overwritten: take them again) */
	{
		uint8_t	 hdr[IX_SPOOL_HDR_MAX];
		struct spool_rec r2;

		if (lb_pread_all(f->fd, hdr, r.hdr, f->off) != 0)
			return (EAGAIN);
		memcpy(s->buf, hdr, r.hdr);
		(void)spool_rec_parse(s->buf, r.hdr + 1, &r2, &why);
		r2.len = r.len;
		r2.size = r.size;
		r2.hdr = r.hdr;
		if ((rc = batch_add(env, &r2, s->big, (size_t)keep, f->off, replay, 1)) != 0)
			return (rc == EAGAIN ? EAGAIN : rc);
	}
	log_info("spool: %s/%s: a record of %llu bytes at byte %llu: message cut at %d bytes",
	    env->spool_dir, f->name, (unsigned long long)size, (unsigned long long)f->off,
	    LB_MSG_MAX);
	return (0);
}

/* Steps 3-4: append (skipping what is stored), commit, the new position. 0 or holding. */
static int
batch_store(struct indexd *env, uint64_t *skipped)
{
	struct spool	*s = env->spool;
	struct spfile	*f = s->bf;
	uint64_t	 id, skip = 0;
	int		 stored, rc, qrc;

	for (uint32_t k = 0; k < s->nbls; k++)
		s->bls[k].idx = 0;
	for (size_t i = 0; i < s->nrec; i++) {
		struct spls	*b = &s->bls[s->mls[i]];
		struct lb_msg	*m = &s->msgs[i];

		if (s->mdead[i])
			continue;
		if (b->l == NULL) {
			rc = b->rc;
			goto aside;
		}
		id = b->before + b->idx;
		if (id < b->l->next_id) {
			b->idx++;
			skip++;
			continue;
		}
		rc = ls_append(env, b->l, m, &stored);
		if (stored) {
			b->idx++;
			s->records++;
			s->last_rtime = m->received;
		}
		if (rc == 0)
			continue;
		if (stored || lb_errclass(rc) != LB_ERRC_MESSAGE) {
			hold(env, "logspace %s: %s", b->l->name, lb_strerror(rc));
			return (rc);
		}
 aside:
		{
			struct lb_frame	 fr;
			struct spool_rec r;
			const char	*why;
			const uint8_t	*raw = m->message.p;
			size_t		 rawlen = m->message.len;

			memset(&fr, 0, sizeof(fr));
			fr.msg = *m;
			if (s->bm <= IX_SPOOL_BATCH && spool_rec_parse(s->buf + (s->moff[i] - s->boff),
			    s->bm - (size_t)(s->moff[i] - s->boff), &r, &why) == 0) {
				raw = s->buf + (s->moff[i] - s->boff);
				rawlen = r.size;
			}
			name_file(env, f, s->moff[i]);
			qrc = quarantine(env, s->in, (const uint8_t *)b->name, strlen(b->name), &fr,
			    raw, rawlen, rc, s->bseq | IX_SPOOL_SEQ_BIT, s->bcrc, (uint32_t)i);
			name_file(env, NULL, 0);
			if (qrc != 0) {
				hold(env, "%s/%s: %s", env->data, LB_DL_FILE, lb_strerror(qrc));
				return (qrc);
			}
		}
		s->mdead[i] = 1;
	}
	if ((rc = ls_commit_dirty(env, 0)) != 0)
		return (rc);
	for (size_t i = 0; i < s->nrec; i++)
		if (s->msgs[i].flags & LB_MSG_TRUNCATED)
			s->in->in_truncated++;
	s->in->in_received += s->nrec;
	s->in->in_bytes += s->bm;
	env->received += s->nrec;
	s->bytes += s->bm;
	f->off += s->bm;
	f->intable = 1;
	if ((rc = sp_state_write(s, 0)) != 0)
		log_warnx("spool: writing %s/indexd/spool.state: %s", env->data, strerror(rc));
	if (skipped != NULL)
		*skipped = skip;
	batch_reset(s);
	return (0);
}

/* Step 2. */
static int
batch_record(struct indexd *env)
{
	struct spool	*s = env->spool;
	int		 rc;

	s->bseq++;
	if (s->bm <= IX_SPOOL_BATCH)
		s->bcrc = lb_crc32(s->buf, s->bm);
	if ((rc = sp_state_write(s, 1)) != 0) {
		hold(env, "writing %s/indexd/spool.state: %s", env->data, strerror(rc));
		return (rc);
	}
	s->pending = 1;
	return (0);
}

/* Unlinks final files whose every byte is stored. Returns how many. */
static int
spool_reap(struct indexd *env)
{
	struct spool	*s = env->spool;
	int64_t		 now = now_mono_us();
	int		 n = 0, synced = 0, rc;

	for (size_t i = 0; i < s->nfiles; ) {
		struct spfile *f = s->files[i];

		if (f->off < f->size || (!f->final &&
		    now - f->asked < IX_SPOOL_LEASE_MS * 1000)) {
			i++;
			continue;
		}
		f->asked = now;
		if (!file_final(env, f) || f->off < f->size) {
			i++;
			continue;
		}
		/* Stored and synced before the file goes (a power cut then loses nothing). */
		if (!synced) {
			if ((rc = ls_commit_dirty(env, 1)) != 0)
				return (n);
			(void)fdatasync(s->statefd);
			synced = 1;
		}
		if (unlinkat(s->dirfd, f->name, 0) == -1 && errno != ENOENT) {
			log_warn("spool: deleting %s/%s", env->spool_dir, f->name);
			i++;
			continue;
		}
		log_debug("spool: deleted %s (%llu bytes)", f->name, (unsigned long long)f->size);
		s->deleted++;
		n++;
		file_drop(s, f);
	}
	if (n > 0) {
		(void)fsync(s->dirfd);
		if ((rc = sp_state_write(s, 0)) != 0)
			log_warnx("spool: writing %s/indexd/spool.state: %s", env->data,
			    strerror(rc));
	}
	return (n);
}

static void
arm(struct indexd *env, int64_t us)
{
	struct spool	*s = env->spool;
	struct timeval	 tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };

	if (s->armed)
		return;
	s->armed = 1;
	evtimer_add(s->ev_pump, &tv);
}

/* How many files the state's table names (partly consumed, not deleted). */
static size_t
table_len(struct spool *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nfiles; i++)
		n += s->files[i]->intable;
	return (n);
}

/*
 * One round: up to IX_BATCHES_PER_CB batches, oldest file first. Returns 1 when more is
 * waiting (a full batch was read), 0 when caught up, else holding.
 */
static int
spool_round(struct indexd *env)
{
	struct spool	*s = env->spool;
	struct stat	 sb;
	int		 rc, more = 0;

	if (s->rescan)
		spool_scan(env);
	(void)disk_check(env);	/* (the reserve: given up when the disk is full, disk.c) */
	for (int k = 0; k < IX_BATCHES_PER_CB; k++) {
		struct spfile *f = NULL;

		if (env->holding[0] != '\0' || env->stopping)
			return (0);
		more = 0;
		for (size_t i = 0; i < s->nfiles; i++) {
			struct spfile *c = s->files[i];

			if (c->off >= c->size && !c->final && fstat(c->fd, &sb) == 0)
				c->size = (uint64_t)sb.st_size;
			if (c->off >= c->size)
				continue;
			if (!c->intable && table_len(s) >= IX_SPOOL_FILES)
				continue;	/* (the table is full: later) */
			rc = batch_build(env, c, 0, NULL);
			if (rc == EFBIG)
				rc = batch_big(env, c, NULL);
			if (rc == EAGAIN)
				s->bm = 0;	/* (a long record, not all there yet) */
			else if (rc != 0)
				return (rc);
			if (s->bm == 0) {
				/* Only part of a record: is its writer gone (torn)? */
				if (c->final || now_mono_us() - c->asked < IX_SPOOL_LEASE_MS * 1000)
					continue;
				c->asked = now_mono_us();
				if (!file_final(env, c))
					continue;
				if ((rc = batch_build(env, c, 0, NULL)) == EFBIG)
					rc = batch_big(env, c, NULL);
				if (rc == EAGAIN)
					continue;
				if (rc != 0)
					return (rc);
				if (s->bm == 0)
					continue;
			}
			f = c;
			break;
		}
		if (f == NULL)
			break;
		if ((rc = batch_record(env)) != 0 || (rc = batch_store(env, NULL)) != 0)
			return (rc);
		more = 1;
	}
	spool_reap(env);
	ls_memory(env);
	return (more);
}

static void
pump_cb(int fd, short what, void *arg)
{
	struct indexd	*env = arg;
	struct spool	*s = env->spool;
	int		 rc;

	(void)fd;
	(void)what;
	s->armed = 0;
	if (env->holding[0] != '\0' || env->stopping)
		return;
	rc = spool_round(env);
	if (rc == 1)
		arm(env, 0);
	else if (rc == 0 && !env->stopping && env->holding[0] == '\0')
		event_add(s->in->in_ev, NULL);	/* caught up: wait for inotify */
}

/* inotify: something changed in the directory. Drains the events, arms a round. */
void
spool_cb(int fd, short what, void *arg)
{
	struct indexd	*env = arg;
	struct spool	*s = env->spool;
	uint8_t		 ev[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t		 n;

	(void)what;
	for (;;) {
		if ((n = read(fd, ev, sizeof(ev))) <= 0)
			break;
		for (uint8_t *p = ev; p < ev + n; ) {
			struct inotify_event *ie = (struct inotify_event *)p;

			if ((ie->mask & (IN_CREATE | IN_MOVED_TO | IN_Q_OVERFLOW)) != 0)
				s->rescan = 1;
			p += sizeof(*ie) + ie->len;
		}
	}
	/* Do not wake per write: read no more events until the round has caught up. */
	event_del(s->in->in_ev);
	arm(env, IX_GATHER_US);
}

static void
rescan_cb(int fd, short what, void *arg)
{
	struct indexd	*env = arg;
	struct timeval	 tv = { IX_SPOOL_RESCAN_MS / 1000, (IX_SPOOL_RESCAN_MS % 1000) * 1000 };

	(void)fd;
	(void)what;
	env->spool->rescan = 1;
	if (env->holding[0] == '\0' && !env->stopping)
		arm(env, 0);
	evtimer_add(env->spool->ev_rescan, &tv);
}

void
spool_kick(struct indexd *env)
{
	if (env->spool != NULL && env->holding[0] == '\0' && !env->stopping)
		arm(env, 0);
}

void
spool_pause(struct indexd *env)
{
	struct spool *s = env->spool;

	if (s == NULL)
		return;
	if (s->ev_pump != NULL)
		evtimer_del(s->ev_pump);
	s->armed = 0;
}

/* After a hold: finishes the batch that was interrupted. */
int
spool_resume(struct indexd *env)
{
	struct spool *s = env->spool;

	if (s == NULL || !s->pending)
		return (0);
	return (batch_store(env, NULL));
}

int
spool_pending(const struct indexd *env)
{
	return (env->spool != NULL && env->spool->pending);
}

/* Opens the directory (created 0770 if missing), inotify, the state file. */
int
spool_init(struct indexd *env)
{
	struct spool	*s;
	struct timeval	 tv = { IX_SPOOL_RESCAN_MS / 1000, (IX_SPOOL_RESCAN_MS % 1000) * 1000 };
	char		 path[PATH_MAX], name[160];
	off_t		 size;
	int		 ifd, rc;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return (ENOMEM);
	env->spool = s;
	s->dirfd = s->statefd = -1;
	s->lease_ok = -1;
	s->last_rtime = LB_NOTIME;
	if (mkdir(env->spool_dir, 0770) == -1 && errno != EEXIST)
		return (errno);
	if ((s->dirfd = open(env->spool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return (errno);
	if ((s->buf = malloc(IX_SPOOL_BATCH)) == NULL || (s->big = malloc(IX_SPOOL_KEEP)) == NULL)
		return (ENOMEM);
	if ((ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1)
		return (errno);
	if (inotify_add_watch(ifd, env->spool_dir, IN_CREATE | IN_MODIFY | IN_MOVED_TO |
	    IN_CLOSE_WRITE) == -1) {
		rc = errno;
		close(ifd);
		return (rc);
	}
	snprintf(name, sizeof(name), "spool %s", env->spool_dir);
	if ((s->in = input_new(env, IN_SPOOL, ifd, name)) == NULL)
		return (ENOMEM);
	snprintf(s->saved_name, sizeof(s->saved_name), "%s", name);
	if ((s->ev_pump = evtimer_new(env->base_ev, pump_cb, env)) == NULL ||
	    (s->ev_rescan = evtimer_new(env->base_ev, rescan_cb, env)) == NULL)
		return (ENOMEM);
	evtimer_add(s->ev_rescan, &tv);
	if ((rc = lb_path(path, sizeof(path), "%s/indexd/spool.state", env->data)) != 0)
		return (rc);
	if ((s->statefd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1)
		return (errno);
	if ((size = lseek(s->statefd, 0, SEEK_END)) == -1)
		return (errno);
	if (size < 2 * IX_SPOOL_SLOT && (ftruncate(s->statefd, 2 * IX_SPOOL_SLOT) == -1 ||
	    fsync(s->statefd) == -1))
		return (errno);
	return (0);
}

/*
 * Start-up: the table and the batch in progress from the state, the files in the directory
 * (taking new ones), and the batch finished under the skip rule.
 */
int
spool_recover(struct indexd *env)
{
	struct spool	*s = env->spool;
	struct sp_saved	*a, *b, *sv;
	struct spfile	*f;
	uint64_t	 skipped = 0;
	size_t		 n;
	int		 ra, rb, rc;

	if ((a = malloc(sizeof(*a))) == NULL || (b = malloc(sizeof(*b))) == NULL) {
		free(a);
		return (ENOMEM);
	}
	ra = sp_slot_read(s->statefd, 0, a);
	rb = sp_slot_read(s->statefd, 1, b);
	sv = NULL;
	if (ra == 0 && (rb != 0 || a->seq > b->seq)) {
		sv = a;
		s->slot = 0;
	} else if (rb == 0) {
		sv = b;
		s->slot = 1;
	}
	if (sv == NULL && (ra == LB_ECORRUPT || rb == LB_ECORRUPT))
		log_warnx("spool: %s/indexd/spool.state: no valid slot: every taken file is read "
		    "from its start", env->data);
	if (sv != NULL) {
		s->seq = sv->seq;
		s->bseq = sv->ibseq;
		for (uint32_t i = 0; i < sv->nfiles; i++) {
			rc = file_add(env, sv->files[i].name, sv->files[i].ino, sv->files[i].off, 1);
			if (rc == ENOENT || rc == ESTALE)
				log_debug("spool: %s: gone (deleted before the stop)",
				    sv->files[i].name);
			else if (rc != 0)
				fatalx("spool: %s/%s: %s", env->spool_dir, sv->files[i].name,
				    strerror(rc));
		}
	}
	spool_scan(env);
	if (sv == NULL || !sv->intent)
		goto done;
	if ((f = file_find(s, sv->iname)) == NULL || f->ino != sv->iino) {
		log_warnx("spool: the batch in progress at the stop names %s, which is gone: "
		    "nothing to finish", sv->iname);
		goto done;
	}
	if (f->off != sv->ioff) {
		log_info("spool: the batch in progress at the stop was finished already");
		goto done;
	}
	if (sv->im > IX_SPOOL_BATCH)
		rc = batch_big(env, f, sv);
	else
		rc = batch_build(env, f, (size_t)sv->im, sv);
	if (rc == 0 && sv->im <= IX_SPOOL_BATCH)
		s->bcrc = lb_crc32(s->buf, s->bm);
	if (rc != 0 || s->bm != sv->im || s->bcrc != sv->icrc || s->nrec != sv->irec) {
		log_warnx("spool: the batch in progress at the stop (%s at byte %llu, %llu bytes) "
		    "does not read as it did (%s): read again as new", f->name,
		    (unsigned long long)sv->ioff, (unsigned long long)sv->im,
		    rc ? lb_strerror(rc) : "content");
		batch_reset(s);
		goto done;
	}
	for (uint32_t k = 0; k < s->nbls; k++)
		for (uint32_t j = 0; j < sv->nls; j++)
			if (strcmp(sv->ls[j].name, s->bls[k].name) == 0 &&
			    sv->ls[j].count != s->bls[k].count)
				log_warnx("spool: the batch in progress routes %llu records to "
				    "logspace %s, %llu before the stop (the rules changed?)",
				    (unsigned long long)s->bls[k].count, s->bls[k].name,
				    (unsigned long long)sv->ls[j].count);
	s->bseq = sv->ibseq;
	if ((rc = quarantine_marks(env, s->bseq | IX_SPOOL_SEQ_BIT, s->bcrc, s->mdead,
	    s->nrec)) != 0)
		fatalx("spool: %s/%s: %s", env->data, LB_DL_FILE, lb_strerror(rc));
	s->pending = 1;
	n = s->nrec;
	if (batch_store(env, &skipped) != 0)
		goto done;	/* holding: finished by the retry */
	log_info("spool: finished the batch a previous indexd left: %s at byte %llu, %llu bytes, "
	    "%zu records, %llu of them already stored", f->name, (unsigned long long)sv->ioff,
	    (unsigned long long)sv->im, n, (unsigned long long)skipped);
 done:
	free(a);
	free(b);
	return (0);
}

void
spool_free(struct indexd *env)
{
	struct spool *s = env->spool;

	if (s == NULL)
		return;
	for (size_t i = 0; i < s->nfiles; i++) {
		close(s->files[i]->fd);
		free(s->files[i]);
	}
	free(s->files);
	if (s->ev_pump != NULL)
		event_free(s->ev_pump);
	if (s->ev_rescan != NULL)
		event_free(s->ev_rescan);
	if (s->dirfd != -1)
		close(s->dirfd);
	if (s->statefd != -1)
		close(s->statefd);
	free(s->buf);
	free(s->big);
	free(s->msgs);
	free(s->mls);
	free(s->mdead);
	free(s->moff);
	free(s);
	env->spool = NULL;
}

/* The status file's "spool" member. */
/*
 * What waits in the spool: returns its bytes; *filesp the files, *oldestp the oldest waiting
 * second (0: none). The disk status's held_back_bytes and the spool status both ask it.
 */
uint64_t
spool_backlog(struct indexd *env, uint64_t *filesp, int64_t *oldestp)
{
	struct spool	*s = env->spool;
	struct dirent	*de;
	struct stat	 sb;
	uint64_t	 files = 0, waiting = 0;
	int64_t		 oldest = 0, t;
	DIR		*d;
	int		 fd;

	if (s == NULL)
		goto out;
	/* Files not taken yet, from the directory; taken ones from what is known of them. */
	if ((fd = dup(s->dirfd)) != -1 && (d = fdopendir(fd)) != NULL) {
		rewinddir(d);
		while ((de = readdir(d)) != NULL) {
			if (!suffix(de->d_name, ".lbs") ||
			    fstatat(s->dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == -1)
				continue;
			files++;
			waiting += (uint64_t)sb.st_size;
			t = name_time(de->d_name);
			if (t != 0 && (oldest == 0 || t < oldest))
				oldest = t;
		}
		closedir(d);
	} else if (fd != -1)
		close(fd);
	for (size_t i = 0; i < s->nfiles; i++) {
		struct spfile *f = s->files[i];

		if (fstat(f->fd, &sb) == 0 && (uint64_t)sb.st_size > f->size)
			f->size = (uint64_t)sb.st_size;
		files++;
		waiting += f->size > f->off ? f->size - f->off : 0;
		if (f->size > f->off && f->t != 0 && (oldest == 0 || f->t < oldest))
			oldest = f->t;
	}
 out:
	if (filesp != NULL)
		*filesp = files;
	if (oldestp != NULL)
		*oldestp = oldest;
	return (waiting);
}

json_t *
spool_status(struct indexd *env)
{
	struct spool	*s = env->spool;
	uint64_t	 files, waiting;
	int64_t		 oldest;
	char		 buf[40];
	json_t		*o;

	if (s == NULL)
		return (json_null());
	waiting = spool_backlog(env, &files, &oldest);
	o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "dir", env->spool_dir,
	    "files", (json_int_t)files,
	    "waiting_bytes", (json_int_t)waiting,
	    "records", (json_int_t)s->records,
	    "bytes", (json_int_t)s->bytes,
	    "torn", (json_int_t)s->torn,
	    "malformed", (json_int_t)s->malformed,
	    "malformed_bytes", (json_int_t)s->malformed_bytes,
	    "deleted", (json_int_t)s->deleted);
	if (o == NULL)
		return (json_null());
	if (oldest != 0) {
		lb_time_fmt(buf, sizeof(buf), oldest * 1000000, 0);
		json_object_set_new(o, "oldest_waiting", json_string(buf));
	} else
		json_object_set_new(o, "oldest_waiting", json_null());
	if (s->last_rtime != LB_NOTIME)
		json_object_set_new(o, "lag_s",
		    json_real((double)(now_real_us() - s->last_rtime) / 1e6));
	else
		json_object_set_new(o, "lag_s", json_null());
	json_object_set_new(o, "leases", s->lease_ok < 0 ? json_null() :
	    json_boolean(s->lease_ok));
	return (o);
}
