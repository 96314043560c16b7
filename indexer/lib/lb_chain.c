/*
 * lb_chain.c — a day's hash chain file (FORMAT.md §14): encoding, appending under a lock,
 * reading back with every link checked, and SHA-256 of files (OpenSSL's EVP).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "logbox.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

#define HASH_CHUNK	(256 * 1024)

const char *
lb_chain_kind_name(unsigned kind)
{
	switch (kind) {
	case LB_CH_GENESIS:
		return ("genesis");
	case LB_CH_BLOCK:
		return ("block");
	case LB_CH_SEGMENT:
		return ("segment");
	case LB_CH_TOMB:
		return ("tombstone");
	case LB_CH_SEAL:
		return ("seal");
	case LB_CH_DAYROOT:
		return ("day root");
	default:
		return ("unknown");
	}
}

/* ---------------------------------------------------------------- SHA-256 */

int
lb_sha256(const void *p, size_t len, uint8_t out[LB_SHA256_LEN])
{
	unsigned int n = 0;

	if (EVP_Digest(p, len, out, &n, EVP_sha256(), NULL) != 1 || n != LB_SHA256_LEN)
		return (ENOMEM);
	return (0);
}

int
lb_sha256_fd(int fd, uint64_t off, uint64_t len, uint8_t out[LB_SHA256_LEN])
{
	EVP_MD_CTX	*ctx;
	uint8_t		*buf;
	unsigned int	 n = 0;
	int		 rc = 0;

	if ((buf = malloc(HASH_CHUNK)) == NULL)
		return (errno);
	if ((ctx = EVP_MD_CTX_new()) == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		rc = ENOMEM;
		goto done;
	}
	while (len > 0) {
		size_t k = len < HASH_CHUNK ? (size_t)len : HASH_CHUNK;

		if ((rc = lb_pread_all(fd, buf, k, off)) != 0)
			goto done;
		if (EVP_DigestUpdate(ctx, buf, k) != 1) {
			rc = ENOMEM;
			goto done;
		}
		off += k;
		len -= k;
	}
	if (EVP_DigestFinal_ex(ctx, out, &n) != 1 || n != LB_SHA256_LEN)
		rc = ENOMEM;
 done:
	EVP_MD_CTX_free(ctx);
	free(buf);
	return (rc);
}

int
lb_sha256_file(const char *path, uint8_t out[LB_SHA256_LEN], uint64_t *size)
{
	struct stat	sb;
	int		fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (errno);
	if (fstat(fd, &sb) == -1)
		rc = errno;
	else
		rc = lb_sha256_fd(fd, 0, (uint64_t)sb.st_size, out);
	close(fd);
	if (rc == 0 && size != NULL)
		*size = (uint64_t)sb.st_size;
	return (rc);
}

/* ---------------------------------------------------------------- encoding */

static void
put_name(uint8_t *p, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	memset(p, 0, max);
	memcpy(p, s, n);
}

static void
get_name(char *s, const uint8_t *p, size_t max)
{
	size_t n = strnlen((const char *)p, max);

	memcpy(s, p, n);
	s[n] = '\0';
}

static size_t
body_len(const struct lb_chrec *r)
{
	switch (r->kind) {
	case LB_CH_GENESIS:
		return (LB_CH_GENESIS_BODY);
	case LB_CH_BLOCK:
		return (LB_CH_BLOCK_BODY);
	case LB_CH_SEGMENT:
		return (LB_CH_SEGMENT_BODY + (size_t)r->nrepl * 64);
	case LB_CH_TOMB:
		return (LB_CH_TOMB_BODY);
	case LB_CH_SEAL:
		return (LB_CH_SEAL_BODY);
	case LB_CH_DAYROOT:
		return (LB_CH_DAYROOT_BODY);
	default:
		return (SIZE_MAX);
	}
}

/* Encodes r (its prev set) into p, which has room for its length; sets r->hash. */
static int
encode(struct lb_chrec *r, uint8_t *p, size_t len)
{
	uint8_t *b = p + LB_CHR_HDR_SIZE;

	memset(p, 0, len);
	lb_put32(p + LB_CHR_MAGIC, LB_CHAIN_MAGIC);
	lb_put32(p + LB_CHR_LEN, (uint32_t)len);
	p[LB_CHR_KIND] = r->kind;
	p[LB_CHR_FLAGS] = r->flags;
	lb_put64(p + LB_CHR_SEQ, r->seq);
	lb_put64(p + LB_CHR_TIME, (uint64_t)r->time);
	switch (r->kind) {
	case LB_CH_GENESIS:
		put_name(b, r->ls, 64);
		lb_put32(b + 64, r->day);
		lb_put32(b + 68, r->prev_day);
		lb_put64(b + 72, r->prev_seq);
		break;
	case LB_CH_BLOCK:
		lb_put64(b, r->first_id);
		lb_put64(b + 8, r->off);
		lb_put32(b + 16, (uint32_t)r->count);
		lb_put32(b + 20, (uint32_t)r->len);
		memcpy(b + 24, r->sha, LB_SHA256_LEN);
		break;
	case LB_CH_SEGMENT:
		put_name(b, r->name, 64);
		lb_put64(b + 64, r->first_id);
		lb_put64(b + 72, r->last_id);
		lb_put64(b + 80, r->count);
		lb_put64(b + 88, r->len);
		lb_put32(b + 96, r->level);
		lb_put32(b + 100, r->nrepl);
		memcpy(b + 104, r->sha, LB_SHA256_LEN);
		for (uint32_t i = 0; i < r->nrepl; i++)
			put_name(b + LB_CH_SEGMENT_BODY + (size_t)i * 64, r->repl[i], 64);
		break;
	case LB_CH_TOMB:
		lb_put32(b, r->day);
		lb_put32(b + 4, r->level);	/* LB_CHT_SIGNED */
		lb_put64(b + 8, r->first_id);
		lb_put64(b + 16, r->count);
		lb_put64(b + 24, r->prev_seq);
		memcpy(b + 32, r->sha, LB_SHA256_LEN);
		memcpy(b + 64, r->sig, sizeof(r->sig));
		break;
	case LB_CH_SEAL:
		lb_put64(b, r->epoch);
		lb_put64(b + 8, (uint64_t)r->started);
		memcpy(b + 16, r->sha, LB_SHA256_LEN);
		break;
	case LB_CH_DAYROOT:
		lb_put64(b, r->first_id);
		lb_put64(b + 8, r->count);
		memcpy(b + 16, r->sig, sizeof(r->sig));
		break;
	default:
		return (EINVAL);
	}
	memcpy(p + len - LB_CHR_TRAILER_SIZE, r->prev, LB_SHA256_LEN);
	if (lb_sha256(p, len - LB_SHA256_LEN - 4, r->hash) != 0)
		return (ENOMEM);
	memcpy(p + len - LB_SHA256_LEN - 4, r->hash, LB_SHA256_LEN);
	lb_put32(p + len - 4, (uint32_t)len);
	return (0);
}

/*
 * Decodes the record at p (len bytes available). 0 with *used its length; LB_ECORRUPT with
 * why naming the damage. The link to the record before is the caller's to check.
 */
static int
decode(const uint8_t *p, size_t avail, struct lb_chrec *r, size_t *used, char *why,
    size_t whylen)
{
	const uint8_t	*b = p + LB_CHR_HDR_SIZE;
	uint8_t		 h[LB_SHA256_LEN];
	size_t		 len, blen;

	memset(r, 0, sizeof(*r));
	if (avail < LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE) {
		lb_setwhy(why, whylen, "a record cut short (%zu bytes at the end)", avail);
		return (LB_ECORRUPT);
	}
	len = lb_get32(p + LB_CHR_LEN);
	if (lb_get32(p + LB_CHR_MAGIC) != LB_CHAIN_MAGIC || len > LB_CHR_MAX ||
	    len < LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE) {
		lb_setwhy(why, whylen, "not a chain record (bad magic or length)");
		return (LB_ECORRUPT);
	}
	if (len > avail) {
		lb_setwhy(why, whylen, "a record cut short (%zu of its %zu bytes)", avail, len);
		return (LB_ECORRUPT);
	}
	if (lb_sha256(p, len - LB_SHA256_LEN - 4, h) != 0)
		return (ENOMEM);
	if (memcmp(h, p + len - LB_SHA256_LEN - 4, LB_SHA256_LEN) != 0 ||
	    lb_get32(p + len - 4) != len) {
		lb_setwhy(why, whylen, "the record's hash does not match its bytes (edited)");
		return (LB_ECORRUPT);
	}
	r->kind = p[LB_CHR_KIND];
	r->flags = p[LB_CHR_FLAGS];
	r->seq = lb_get64(p + LB_CHR_SEQ);
	r->time = (int64_t)lb_get64(p + LB_CHR_TIME);
	memcpy(r->prev, p + len - LB_CHR_TRAILER_SIZE, LB_SHA256_LEN);
	memcpy(r->hash, h, LB_SHA256_LEN);
	blen = len - LB_CHR_HDR_SIZE - LB_CHR_TRAILER_SIZE;
	switch (r->kind) {
	case LB_CH_GENESIS:
		if (blen != LB_CH_GENESIS_BODY)
			goto badlen;
		get_name(r->ls, b, 64);
		r->day = lb_get32(b + 64);
		r->prev_day = lb_get32(b + 68);
		r->prev_seq = lb_get64(b + 72);
		break;
	case LB_CH_BLOCK:
		if (blen != LB_CH_BLOCK_BODY)
			goto badlen;
		r->first_id = lb_get64(b);
		r->off = lb_get64(b + 8);
		r->count = lb_get32(b + 16);
		r->len = lb_get32(b + 20);
		memcpy(r->sha, b + 24, LB_SHA256_LEN);
		break;
	case LB_CH_SEGMENT:
		if (blen < LB_CH_SEGMENT_BODY)
			goto badlen;
		get_name(r->name, b, 63);
		r->first_id = lb_get64(b + 64);
		r->last_id = lb_get64(b + 72);
		r->count = lb_get64(b + 80);
		r->len = lb_get64(b + 88);
		r->level = lb_get32(b + 96);
		r->nrepl = lb_get32(b + 100);
		memcpy(r->sha, b + 104, LB_SHA256_LEN);
		if (blen != LB_CH_SEGMENT_BODY + (size_t)r->nrepl * 64)
			goto badlen;
		if (r->nrepl > 0) {
			if ((r->repl = calloc(r->nrepl, sizeof(*r->repl))) == NULL)
				return (errno);
			for (uint32_t i = 0; i < r->nrepl; i++)
				get_name(r->repl[i], b + LB_CH_SEGMENT_BODY + (size_t)i * 64, 63);
		}
		break;
	case LB_CH_TOMB:
		if (blen != LB_CH_TOMB_BODY)
			goto badlen;
		r->day = lb_get32(b);
		r->level = lb_get32(b + 4);
		r->first_id = lb_get64(b + 8);
		r->count = lb_get64(b + 16);
		r->prev_seq = lb_get64(b + 24);
		memcpy(r->sha, b + 32, LB_SHA256_LEN);
		memcpy(r->sig, b + 64, sizeof(r->sig));
		break;
	case LB_CH_SEAL:
		if (blen != LB_CH_SEAL_BODY)
			goto badlen;
		r->epoch = lb_get64(b);
		r->started = (int64_t)lb_get64(b + 8);
		memcpy(r->sha, b + 16, LB_SHA256_LEN);
		break;
	case LB_CH_DAYROOT:
		if (blen != LB_CH_DAYROOT_BODY)
			goto badlen;
		r->first_id = lb_get64(b);
		r->count = lb_get64(b + 8);
		memcpy(r->sig, b + 16, sizeof(r->sig));
		break;
	default:
		lb_setwhy(why, whylen, "unknown record kind %u", r->kind);
		return (LB_ECORRUPT);
	}
	*used = len;
	return (0);
 badlen:
	lb_setwhy(why, whylen, "a %s record of the wrong length", lb_chain_kind_name(r->kind));
	return (LB_ECORRUPT);
}

void
lb_chain_free(struct lb_chrec *recs, size_t n)
{
	if (recs == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(recs[i].repl);
	free(recs);
}

/*
 * lb_chain_parse; *torn is set when the damage is only a record cut short at the end (an
 * append a crash interrupted).
 */
static int
parse(const uint8_t *buf, size_t len, struct lb_chrec **out, size_t *n, int *torn, char *why,
    size_t whylen)
{
	struct lb_chrec	*recs = NULL, r;
	size_t		 cap = 0, k = 0, off = 0, used;
	char		 w[256];
	int		 rc = 0;

	*torn = 0;
	while (off < len) {
		if ((rc = decode(buf + off, len - off, &r, &used, w, sizeof(w))) != 0) {
			if (rc == LB_ECORRUPT)
				lb_setwhy(why, whylen, "record %zu at byte %zu: %s", k, off, w);
			*torn = rc == LB_ECORRUPT && (len - off < 8 ||
			    (lb_get32(buf + off + LB_CHR_MAGIC) == LB_CHAIN_MAGIC &&
			    lb_get32(buf + off + LB_CHR_LEN) > len - off &&
			    lb_get32(buf + off + LB_CHR_LEN) <= LB_CHR_MAX));
			break;
		}
		r.foff = off;
		if (r.seq != k) {
			lb_setwhy(why, whylen, "record %zu at byte %zu: seq %llu where %zu belongs "
			    "(records removed, added or reordered)", k, off,
			    (unsigned long long)r.seq, k);
			rc = LB_ECORRUPT;
		} else if ((k == 0) != (r.kind == LB_CH_GENESIS)) {
			lb_setwhy(why, whylen, "record %zu at byte %zu: a %s record %s", k, off,
			    lb_chain_kind_name(r.kind), k == 0 ? "starts the chain" :
			    "after the first");
			rc = LB_ECORRUPT;
		} else if (k > 0 && memcmp(r.prev, recs[k - 1].hash, LB_SHA256_LEN) != 0) {
			lb_setwhy(why, whylen, "record %zu at byte %zu: does not link the record "
			    "before (removed, reordered or edited)", k, off);
			rc = LB_ECORRUPT;
		}
		if (rc == 0 && (rc = lb_grow(&recs, &cap, k + 1, sizeof(*recs))) != 0) {
			free(r.repl);
			break;
		}
		if (rc != 0) {
			free(r.repl);
			break;
		}
		recs[k++] = r;
		off += used;
	}
	*out = recs;
	*n = k;
	return (rc);
}

int
lb_chain_parse(const uint8_t *buf, size_t len, struct lb_chrec **out, size_t *n, char *why,
    size_t whylen)
{
	int torn;

	return (parse(buf, len, out, n, &torn, why, whylen));
}

static int
read_file(int fd, uint8_t **buf, size_t *len)
{
	struct stat	sb;
	int		rc;

	*buf = NULL;
	*len = 0;
	if (fstat(fd, &sb) == -1)
		return (errno);
	if (sb.st_size == 0)
		return (0);
	if ((*buf = malloc((size_t)sb.st_size)) == NULL)
		return (errno);
	if ((rc = lb_pread_all(fd, *buf, (size_t)sb.st_size, 0)) != 0) {
		free(*buf);
		*buf = NULL;
		return (rc);
	}
	*len = (size_t)sb.st_size;
	return (0);
}

static int
chain_path(char *buf, size_t len, const char *daydir)
{
	return (lb_path(buf, len, "%s/%s", daydir, LB_FILE_CHAIN));
}

int
lb_chain_load(const char *daydir, struct lb_chrec **out, size_t *n, char *why, size_t whylen)
{
	char	 path[PATH_MAX];
	uint8_t	*buf;
	size_t	 len;
	int	 fd, rc;

	*out = NULL;
	*n = 0;
	if ((rc = chain_path(path, sizeof(path), daydir)) != 0)
		return (rc);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (errno);
	rc = read_file(fd, &buf, &len);
	close(fd);
	if (rc != 0)
		return (rc);
	rc = lb_chain_parse(buf, len, out, n, why, whylen);
	free(buf);
	return (rc);
}

/*
 * The last complete record of the open chain fd (size bytes): its seq and hash, and where
 * complete records end (*end < size: a torn record follows). Walks back from the end by the
 * trailer's length; when that does not land on a sound record, reads the whole file.
 */
static int
tail_of(int fd, uint64_t size, uint64_t *seq, uint8_t head[LB_SHA256_LEN], uint64_t *end,
    uint8_t *kind)
{
	struct lb_chrec	*recs = NULL, r;
	uint8_t		 t[4], *buf = NULL;
	size_t		 n = 0, len, used;
	int		 rc, torn;

	if (size >= LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE &&
	    lb_pread_all(fd, t, 4, size - 4) == 0 && (len = lb_get32(t)) <= size &&
	    len <= LB_CHR_MAX && len >= LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE) {
		if ((buf = malloc(len)) == NULL)
			return (errno);
		if ((rc = lb_pread_all(fd, buf, len, size - len)) != 0) {
			free(buf);
			return (rc);
		}
		rc = decode(buf, len, &r, &used, NULL, 0);
		free(buf);
		if (rc == 0) {
			free(r.repl);
			*seq = r.seq;
			*kind = r.kind;
			memcpy(head, r.hash, LB_SHA256_LEN);
			*end = size;
			return (0);
		}
	}
	/* A torn tail, or damage: the whole file tells which. */
	if ((rc = read_file(fd, &buf, &len)) != 0)
		return (rc);
	rc = parse(buf, len, &recs, &n, &torn, NULL, 0);
	if (rc == 0 || (rc == LB_ECORRUPT && torn)) {
		if (n > 0) {
			*seq = recs[n - 1].seq;
			*kind = recs[n - 1].kind;
			memcpy(head, recs[n - 1].hash, LB_SHA256_LEN);
			*end = recs[n - 1].foff + lb_get32(buf + recs[n - 1].foff + LB_CHR_LEN);
			rc = 0;
		} else {
			*end = 0;	/* empty, or its genesis cut short: start again */
			rc = ENOENT;
		}
	}
	lb_chain_free(recs, n);
	free(buf);
	return (rc);
}

int
lb_chain_head(const char *daydir, uint64_t *seq, uint8_t head[LB_SHA256_LEN])
{
	struct stat	sb;
	uint64_t	end;
	uint8_t		kind;
	char		path[PATH_MAX];
	int		fd, rc;

	if ((rc = chain_path(path, sizeof(path), daydir)) != 0)
		return (rc);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (errno);
	if (fstat(fd, &sb) == -1)
		rc = errno;
	else if (sb.st_size == 0)
		rc = ENOENT;
	else
		rc = tail_of(fd, (uint64_t)sb.st_size, seq, head, &end, &kind);
	close(fd);
	return (rc);
}

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

int
lb_chain_append(const char *daydir, const struct lb_chgen *gen, struct lb_chrec *recs,
    size_t n, int sync)
{
	return (lb_chain_append_fill(daydir, gen, recs, n, sync, 0, NULL, NULL));
}

int
lb_chain_append_fill(const char *daydir, const struct lb_chgen *gen, struct lb_chrec *recs,
    size_t n, int sync, int unless_sealed,
    int (*fill)(struct lb_chrec *, const uint8_t *, void *), void *arg)
{
	struct lb_chrec	 g;
	struct stat	 sb;
	uint8_t		*buf = NULL, head[LB_SHA256_LEN], kind = 0;
	uint64_t	 seq = 0, end = 0;
	size_t		 total = 0, o = 0;
	char		 path[PATH_MAX];
	int		 fd, rc, created = 0, fresh;

	if ((rc = chain_path(path, sizeof(path), daydir)) != 0)
		return (rc);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1)
		return (errno);
	if (flock(fd, LOCK_EX) == -1 || fstat(fd, &sb) == -1) {
		rc = errno;
		goto done;
	}
	created = sb.st_size == 0;
	fresh = created;
	if (!fresh) {
		rc = tail_of(fd, (uint64_t)sb.st_size, &seq, head, &end, &kind);
		if (rc == ENOENT)
			fresh = 1;
		else if (rc != 0)
			goto done;
		if (end < (uint64_t)sb.st_size && ftruncate(fd, (off_t)end) == -1) {
			rc = errno;
			goto done;
		}
	}
	if (!fresh && unless_sealed && kind == LB_CH_SEAL && end == (uint64_t)sb.st_size)
		goto done;
	if (fresh) {
		if (gen == NULL) {
			rc = ENOENT;
			goto done;
		}
		memset(&g, 0, sizeof(g));
		g.kind = LB_CH_GENESIS;
		snprintf(g.ls, sizeof(g.ls), "%s", gen->ls);
		g.day = gen->day;
		g.prev_day = gen->prev_day;
		g.prev_seq = gen->prev_seq;
		memcpy(g.prev, gen->prev, LB_SHA256_LEN);
		total += body_len(&g) + LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE;
		end = 0;
	}
	for (size_t i = 0; i < n; i++) {
		size_t b = body_len(&recs[i]);

		if (b == SIZE_MAX || b + LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE > LB_CHR_MAX) {
			rc = EINVAL;
			goto done;
		}
		total += b + LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE;
	}
	if (total == 0)
		goto done;
	if ((buf = malloc(total)) == NULL) {
		rc = errno;
		goto done;
	}
	if (fresh) {
		g.seq = 0;
		g.time = now_us();
		size_t l = body_len(&g) + LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE;

		if ((rc = encode(&g, buf, l)) != 0)
			goto done;
		o = l;
		seq = 0;
		memcpy(head, g.hash, LB_SHA256_LEN);
	}
	for (size_t i = 0; i < n; i++) {
		size_t l = body_len(&recs[i]) + LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE;

		recs[i].seq = ++seq;
		recs[i].time = now_us();
		memcpy(recs[i].prev, head, LB_SHA256_LEN);
		if ((fill != NULL && (rc = fill(&recs[i], head, arg)) != 0) ||
		    (rc = encode(&recs[i], buf + o, l)) != 0)
			goto done;
		memcpy(head, recs[i].hash, LB_SHA256_LEN);
		o += l;
	}
	if ((rc = lb_pwrite_all(fd, buf, total, end)) != 0) {
		/* A partial append is a torn tail: cut now, or by the next append. */
		if (ftruncate(fd, (off_t)end) == -1)
			rc = rc != 0 ? rc : errno;
		goto done;
	}
	if (sync && fdatasync(fd) == -1) {
		rc = errno;
		goto done;
	}
	if (created && sync)
		rc = lb_fsync_dir(daydir);
 done:
	free(buf);
	close(fd);		/* (releases the lock) */
	return (rc);
}
