/*
 * t_msgfile.c — the message file on real files: byte-exact round trips of random messages
 * across seals and reopens, readers following a writer, crash recovery after cutting either
 * file at every byte, and damage (a flipped byte anywhere) that verify and get must report
 * and never turn into wrong data.
 */
#include "t_helper.h"
#include "lb_block.h"
#include "lb_block_int.h"
#include "lb_format.h"
#include "lb_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <openssl/evp.h>

/* A message and the memory its slices point into. */
struct ref {
	struct lb_msg	 m;
	uint8_t		*mem;
};

static size_t
pick_len(uint64_t *s, size_t max)
{
	switch (t_rnd(s) % 6) {
	case 0:
		return (0);
	case 1:
		return (max);
	case 2:
		return (1);
	default:
		return (t_rnd(s) % (max < 24 ? max + 1 : 24));
	}
}

static void
fill(uint64_t *s, uint8_t *p, size_t len, int kind)
{
	static const char text[] = "Accepted password for root from 10.0.0.1 port 22 ssh2 ";

	for (size_t i = 0; i < len; i++) {
		switch (kind) {
		case 0:		/* text */
			p[i] = (uint8_t)text[(i + t_rnd(s) % 3) % (sizeof(text) - 1)];
			break;
		case 1:		/* multi-line */
			p[i] = t_rnd(s) % 9 == 0 ? '\n' : (uint8_t)text[i % (sizeof(text) - 1)];
			break;
		case 2:		/* binary with NULs */
			p[i] = t_rnd(s) % 4 == 0 ? 0 : (uint8_t)t_rnd(s);
			break;
		default:	/* 0x80-0xff */
			p[i] = (uint8_t)(0x80 | t_rnd(s));
			break;
		}
	}
}

/*
 * A random message with id id received at recv. big allows a message of exactly LB_MSG_MAX
 * bytes. small keeps every field short (for the byte-by-byte tests).
 */
static void
gen(uint64_t *s, struct ref *r, uint64_t id, int64_t recv, int big, int small)
{
	struct lb_slice	*f[6];
	size_t		 lens[7], max[6] = { LB_FIELD_MAX, LB_FIELD_MAX, LB_FIELD_MAX,
	    LB_FIELD_MAX, LB_SD_MAX, LB_FIELD_MAX }, total = 0, off;
	uint8_t		*p;
	int		 kind = (int)(t_rnd(s) % 4);

	memset(r, 0, sizeof(*r));
	f[0] = &r->m.host;
	f[1] = &r->m.program;
	f[2] = &r->m.pid;
	f[3] = &r->m.msgid;
	f[4] = &r->m.sd;
	f[5] = &r->m.peer;
	for (int i = 0; i < 6; i++) {
		lens[i] = small ? t_rnd(s) % 6 : pick_len(s, max[i]);
		if (i == 4 && !small && t_rnd(s) % 4 != 0)
			lens[i] = t_rnd(s) % 40;
		total += lens[i];
	}
	switch (small ? 9 : t_rnd(s) % 12) {
	case 0:
		lens[6] = 0;
		break;
	case 1:
		lens[6] = big ? LB_MSG_MAX : 3000;
		break;
	case 2:
		lens[6] = 1000 + t_rnd(s) % 4000;
		break;
	default:
		lens[6] = small ? t_rnd(s) % 30 : t_rnd(s) % 300;
		break;
	}
	total += lens[6];
	assert_non_null(r->mem = malloc(total + 1));
	p = r->mem;
	off = 0;
	for (int i = 0; i < 6; i++) {
		fill(s, p + off, lens[i], kind);
		f[i]->p = p + off;
		f[i]->len = lens[i];
		off += lens[i];
	}
	fill(s, p + off, lens[6], kind);
	r->m.message.p = p + off;
	r->m.message.len = lens[6];
	r->m.id = id;
	r->m.received = recv;
	switch (t_rnd(s) % 5) {
	case 0:
		r->m.timestamp = LB_NOTIME;
		break;
	case 1:
		r->m.timestamp = (int64_t)t_rnd(s);
		break;
	default:
		r->m.timestamp = recv - (int64_t)(t_rnd(s) % 5000000);
		break;
	}
	r->m.tzoff = (int16_t)t_rnd(s);
	r->m.facility = (uint8_t)(t_rnd(s) % 3 == 0 ? LB_NOVALUE : t_rnd(s) % 24);
	r->m.severity = (uint8_t)(t_rnd(s) % 3 == 0 ? t_rnd(s) : t_rnd(s) % 8);
	r->m.flags = (uint16_t)t_rnd(s) & (uint16_t)~LB_MSG_PEER;	/* the record's, not m's */
}

static void
assert_slice(struct lb_slice a, struct lb_slice b)
{
	assert_int_equal(a.len, b.len);
	if (a.len > 0)
		assert_memory_equal(a.p, b.p, a.len);
}

static void
assert_msg(const struct lb_msg *a, const struct lb_msg *b)
{
	assert_true(a->id == b->id);
	assert_true(a->received == b->received);
	assert_true(a->timestamp == b->timestamp);
	assert_int_equal(a->tzoff, b->tzoff);
	assert_int_equal(a->facility, b->facility);
	assert_int_equal(a->severity, b->severity);
	assert_int_equal(a->flags, b->flags);
	assert_slice(a->host, b->host);
	assert_slice(a->program, b->program);
	assert_slice(a->pid, b->pid);
	assert_slice(a->msgid, b->msgid);
	assert_slice(a->sd, b->sd);
	assert_slice(a->message, b->message);
	assert_slice(a->peer, b->peer);
}

static int
msg_eq(const struct lb_msg *a, const struct lb_msg *b)
{
	const struct lb_slice	*sa[7] = { &a->host, &a->program, &a->pid, &a->msgid, &a->sd,
	    &a->message, &a->peer };
	const struct lb_slice	*sb[7] = { &b->host, &b->program, &b->pid, &b->msgid, &b->sd,
	    &b->message, &b->peer };

	if (a->id != b->id || a->received != b->received || a->timestamp != b->timestamp ||
	    a->tzoff != b->tzoff || a->facility != b->facility || a->severity != b->severity ||
	    a->flags != b->flags)
		return (0);
	for (int i = 0; i < 7; i++)
		if (sa[i]->len != sb[i]->len ||
		    (sa[i]->len > 0 && memcmp(sa[i]->p, sb[i]->p, sa[i]->len) != 0))
			return (0);
	return (1);
}

static void
free_refs(struct ref *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].mem);
	free(r);
}

/* Writes buf[0..len) as the file name in dir. */
static void
write_file(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
	char	 path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	t_write_file(path, buf, len);
}

/* Gets nrand ids in random order, then all n in order, and the ids either side. */
static void
check_all(struct lb_msgfile *mf, const struct ref *refs, uint64_t first, size_t n,
    size_t nrand, uint64_t *s)
{
	struct lb_msg	 m;
	size_t		*order;

	assert_non_null(order = malloc(n * sizeof(*order)));
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(t_rnd(s) % i), t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < nrand && i < n; i++) {
		assert_ok(lb_msgfile_get(mf, first + order[i], &m));
		assert_msg(&m, &refs[order[i]].m);
	}
	/* And in order, which the block cache serves. */
	for (size_t i = 0; i < n; i++) {
		assert_ok(lb_msgfile_get(mf, first + i, &m));
		assert_msg(&m, &refs[i].m);
	}
	assert_int_equal(lb_msgfile_get(mf, first + n, &m), LB_ENOTFOUND);
	if (first > 0)
		assert_int_equal(lb_msgfile_get(mf, first - 1, &m), LB_ENOTFOUND);
	free(order);
}

static void
t_roundtrip(void **state)
{
	char			 dir[256], why[256];
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	struct ref		*refs;
	uint64_t		 s = 0x9e3779b97f4a7c15ULL, first, next, disk, raw;
	const size_t		 n = 6000, first_id = 1000;
	int64_t			 t = 1700000000000000LL;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	for (size_t i = 0; i < n; i++) {
		/* Receive times mostly rise, sometimes step back or jump to extremes. */
		t += (int64_t)(t_rnd(&s) % 3000) - (t_rnd(&s) % 10 == 0 ? 5000 : 0);
		gen(&s, &refs[i], first_id + i, i == 7 ? INT64_MIN : i == 8 ? INT64_MAX : t,
		    i % 1500 == 3, 0);
	}
	assert_ok(lb_msgfile_open(dir, LB_RDWR, first_id, &mf));
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == first_id && next == first_id);
	for (size_t i = 0; i < n; i++) {
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
		if (t_rnd(&s) % 50 == 0)
			assert_ok(lb_msgfile_commit(mf, (int)(t_rnd(&s) % 2)));
		if (t_rnd(&s) % 700 == 0)
			assert_ok(lb_msgfile_seal(mf));
		if (t_rnd(&s) % 20 == 0) {
			size_t	 k = (size_t)(t_rnd(&s) % (i + 1));

			assert_ok(lb_msgfile_get(mf, first_id + k, &m));
			assert_msg(&m, &refs[k].m);
		}
	}
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == first_id && next == first_id + n);
	check_all(mf, refs, first_id, n, 500, &s);
	assert_ok(lb_msgfile_commit(mf, 1));
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_sizes(mf, &disk, &raw);
	assert_true(disk > 0 && raw > disk);
	lb_msgfile_close(mf);

	/* A reader sees the same, blocks and WAL. */
	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &mf));
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == first_id && next == first_id + n);
	check_all(mf, refs, first_id, n, n, &s);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	assert_int_equal(lb_msgfile_append(mf, &refs[0].m), EINVAL);
	lb_msgfile_close(mf);

	/* The writer reopens (first_id is ignored now), recovers the WAL, seals, goes on. */
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 5, &mf));
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == first_id && next == first_id + n);
	check_all(mf, refs, first_id, n, 500, &s);
	assert_ok(lb_msgfile_seal(mf));
	check_all(mf, refs, first_id, n, 500, &s);
	lb_msgfile_close(mf);
	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &mf));
	check_all(mf, refs, first_id, n, 500, &s);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);

	free_refs(refs, n);
	t_rmtree(dir);
}

/* A closed day's messages file from memory, as an archive gives it, each block checked. */
struct msrc {
	const uint8_t	*b;
	size_t		 len;
	uint64_t	 reads;
	int		 done;
};

static int
msrc_block(void *arg, uint64_t off, uint32_t len, const uint8_t sha[32], uint8_t *dst)
{
	struct msrc	*m = arg;
	uint8_t		 got[32];
	unsigned int	 k = 32;

	if (off > m->len || len > m->len - off)
		return (LB_EARCHIVE);
	assert_true(EVP_Digest(m->b + off, len, got, &k, EVP_sha256(), NULL) == 1);
	if (memcmp(got, sha, 32) != 0)
		return (LB_EARCHIVE);
	memcpy(dst, m->b + off, len);
	m->reads++;
	return (0);
}

static void
msrc_done(void *arg)
{
	((struct msrc *)arg)->done++;
}

/*
 * A sealed file read through a source (lb_msgfile_open_src) with its block index and hashes
 * given: every message as the file has it, a block read once for the ids it holds (the
 * cache), a block whose bytes changed is the source's error, and an index with a gap or that
 * does not start at the first id is refused.
 */
static void
t_remote(void **state)
{
	char			 dir[256];
	struct lb_msgfile	*mf, *rf;
	struct lb_msgsrc	 src;
	struct msrc		 ms;
	struct lb_blkref	*bl;
	struct lb_msg		 m;
	struct ref		*refs;
	uint8_t			(*sha)[32], *b;
	uint64_t		 s = 77, first, next;
	const size_t		 n = 5000, first_id = 300;
	size_t			 nb, len;
	char			 path[300];

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	for (size_t i = 0; i < n; i++)
		gen(&s, &refs[i], first_id + i, 1700000000000000LL + (int64_t)i, 0, 0);
	assert_ok(lb_msgfile_open(dir, LB_RDWR, first_id, &mf));
	for (size_t i = 0; i < n; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	nb = lb_msgfile_nblocks(mf);
	assert_true(nb > 2);
	assert_non_null(bl = calloc(nb, sizeof(*bl)));
	assert_non_null(sha = calloc(nb, sizeof(*sha)));
	for (size_t i = 0; i < nb; i++) {
		lb_msgfile_block(mf, i, &bl[i]);
		assert_ok(lb_msgfile_block_hash(mf, &bl[i], sha[i]));
	}
	lb_msgfile_close(mf);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
	b = t_read_file(path, &len);

	memset(&ms, 0, sizeof(ms));
	ms.b = b;
	ms.len = len;
	src = (struct lb_msgsrc){ &ms, msrc_block, msrc_done };
	assert_ok(lb_msgfile_open_src(&src, first_id, bl, (const uint8_t (*)[32])sha, nb, &rf));
	lb_msgfile_range(rf, &first, &next);
	assert_true(first == first_id && next == first_id + n);
	check_all(rf, refs, first_id, n, n, &s);
	assert_true(ms.reads <= 2 * nb);
	lb_msgfile_close(rf);
	assert_int_equal(ms.done, 1);

	/* A block changed at the source: its messages are the source's error; others read. */
	b[bl[1].off + bl[1].len / 2] ^= 0x55;
	memset(&ms.reads, 0, sizeof(ms.reads));
	assert_ok(lb_msgfile_open_src(&src, first_id, bl, (const uint8_t (*)[32])sha, nb, &rf));
	assert_int_equal(lb_msgfile_get(rf, bl[1].first, &m), LB_EARCHIVE);
	assert_ok(lb_msgfile_get(rf, bl[0].first, &m));
	assert_msg(&m, &refs[0].m);
	lb_msgfile_close(rf);

	/* An index with a gap, or that does not begin at the first id: refused. */
	ms.done = 0;
	assert_int_equal(lb_msgfile_open_src(&src, first_id, bl + 1,
	    (const uint8_t (*)[32])sha + 1, nb - 1, &rf), LB_ECORRUPT);
	bl[2] = bl[1];
	assert_int_equal(lb_msgfile_open_src(&src, first_id, bl, (const uint8_t (*)[32])sha, nb,
	    &rf), LB_ECORRUPT);
	assert_int_equal(ms.done, 0);
	free(b);
	free(bl);
	free(sha);
	for (size_t i = 0; i < n; i++)
		free(refs[i].mem);
	free(refs);
	t_rmtree(dir);
}

static void
t_limits(void **state)
{
	char			 dir[256], sub[300];
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	struct ref		 r;
	uint64_t		 s = 7, first, next;
	uint8_t			 junk[100];

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	snprintf(sub, sizeof(sub), "%s/2026/11-22", dir);
	assert_int_equal(lb_msgfile_open(sub, LB_RDONLY, 0, &mf), ENOENT);
	assert_int_equal(lb_msgfile_open(sub, 7, 0, &mf), EINVAL);
	assert_ok(lb_msgfile_open(sub, LB_RDWR, 0, &mf));	/* creates the directory */
	gen(&s, &r, 0, 1, 0, 1);
	r.m.id = 1;
	assert_int_equal(lb_msgfile_append(mf, &r.m), EINVAL);
	r.m.id = 0;
	r.m.message.len = LB_MSG_MAX + 1;
	assert_int_equal(lb_msgfile_append(mf, &r.m), LB_ETOOBIG);
	r.m.message.len = 0;
	r.m.host.len = LB_FIELD_MAX + 1;
	assert_int_equal(lb_msgfile_append(mf, &r.m), LB_ETOOBIG);
	r.m.host.len = 0;
	r.m.sd.len = LB_SD_MAX + 1;
	assert_int_equal(lb_msgfile_append(mf, &r.m), LB_ETOOBIG);
	r.m.sd.len = 0;
	r.m.peer.len = LB_FIELD_MAX + 1;
	assert_int_equal(lb_msgfile_append(mf, &r.m), LB_ETOOBIG);
	r.m.peer.len = 0;
	assert_int_equal(lb_msgfile_get(mf, 0, &m), LB_ENOTFOUND);
	assert_ok(lb_msgfile_append(mf, &r.m));
	assert_ok(lb_msgfile_get(mf, 0, &m));
	assert_msg(&m, &r.m);
	assert_ok(lb_msgfile_seal(mf));
	assert_ok(lb_msgfile_seal(mf));		/* nothing open: a no-op */
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == 0 && next == 1);
	lb_msgfile_close(mf);
	lb_msgfile_close(NULL);
	free(r.mem);

	/* Not a message file. */
	memset(junk, 'x', sizeof(junk));
	write_file(sub, LB_FILE_MESSAGES, junk, sizeof(junk));
	assert_int_equal(lb_msgfile_open(sub, LB_RDONLY, 0, &mf), LB_EFORMAT);
	assert_int_equal(lb_msgfile_open(sub, LB_RDWR, 0, &mf), LB_EFORMAT);
	write_file(sub, LB_FILE_MESSAGES, junk, 3);
	assert_int_equal(lb_msgfile_open(sub, LB_RDONLY, 0, &mf), LB_EFORMAT);
	t_rmtree(dir);
}

/* A reader opened early sees what the writer adds: WAL records, sealed blocks, replaced WALs. */
static void
t_reader_follows(void **state)
{
	char			 dir[256], why[256];
	struct lb_msgfile	*w, *r;
	struct lb_msg		 m;
	struct ref		*refs;
	uint64_t		 s = 42, first, next;
	const size_t		 n = 3000;
	size_t			 done = 0;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	for (size_t i = 0; i < n; i++)
		gen(&s, &refs[i], 1 + i, 1000 + (int64_t)i, 0, 0);
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 1, &w));
	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &r));
	lb_msgfile_range(r, &first, &next);
	assert_true(first == 1 && next == 1);
	assert_int_equal(lb_msgfile_get(r, 1, &m), LB_ENOTFOUND);
	while (done < n) {
		size_t	 k = 1 + (size_t)(t_rnd(&s) % 200), op = (size_t)(t_rnd(&s) % 4);

		for (size_t i = 0; i < k && done < n; i++, done++)
			assert_ok(lb_msgfile_append(w, &refs[done].m));
		if (op == 3)
			assert_ok(lb_msgfile_seal(w));
		else
			assert_ok(lb_msgfile_commit(w, (int)op % 2));
		/* The newest first (refresh), then a few older ones. */
		assert_ok(lb_msgfile_get(r, done, &m));
		assert_msg(&m, &refs[done - 1].m);
		for (int j = 0; j < 5; j++) {
			size_t	 i = (size_t)(t_rnd(&s) % done);

			assert_ok(lb_msgfile_get(r, 1 + i, &m));
			assert_msg(&m, &refs[i].m);
		}
		lb_msgfile_range(r, &first, &next);
		assert_true(next == 1 + done);
	}
	check_all(r, refs, 1, n, n, &s);
	assert_ok(lb_msgfile_verify(r, why, sizeof(why)));
	lb_msgfile_close(r);
	lb_msgfile_close(w);
	free_refs(refs, n);
	t_rmtree(dir);
}

/*
 * A snapshot test: the day directory a writer fills, its state saved as bytes, the messages it
 * should hold, and a work directory where the cut and damaged copies go.
 */
struct snap {
	char		 dir[256];
	char		 work[300];	/* dir/w */
	uint64_t	 first_id;
	uint8_t		*msgs, *wal;
	size_t		 mlen, wlen;
	struct ref	*refs;
	size_t		 n;
};

/* The ids a writer must keep after messages is cut to mcut and the WAL to wcut. */
static uint64_t
expect_next(const struct snap *sn, size_t mcut, size_t wcut)
{
	uint64_t	 next = sn->first_id, id;
	size_t		 off = LB_FHDR_SIZE;

	if (mcut < LB_FHDR_SIZE)
		mcut = 0;
	while (mcut >= LB_FHDR_SIZE && off + LB_BHDR_SIZE <= mcut) {
		uint32_t comp = lb_get32(sn->msgs + off + LB_BHDR_COMP_LEN);

		if (off + LB_BHDR_SIZE + comp > mcut)
			break;
		next = lb_get64(sn->msgs + off + LB_BHDR_FIRST_ID) +
		    lb_get32(sn->msgs + off + LB_BHDR_COUNT);
		off += LB_BHDR_SIZE + comp;
	}
	if (wcut < LB_FHDR_SIZE)
		return (next);
	for (off = LB_FHDR_SIZE; off + LB_WREC_HDR <= wcut; ) {
		uint32_t blen = lb_get32(sn->wal + off);

		if (off + LB_WREC_HDR + blen > wcut)
			break;
		assert_int_not_equal(lb_varint_get(sn->wal + off + LB_WREC_HDR, blen, &id), 0);
		if (id > next)
			break;
		if (id == next)
			next++;
		off += LB_WREC_HDR + blen;
	}
	return (next);
}

/* Writes the snapshot cut at mcut/wcut into dir, recovers, checks, appends, verifies. */
static void
recover_one(const struct snap *sn, size_t mcut, size_t wcut)
{
	char			 why[256];
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	struct ref		 extra;
	uint64_t		 first, next, want = expect_next(sn, mcut, wcut), s = mcut;

	write_file(sn->work, LB_FILE_MESSAGES, sn->msgs, mcut);
	write_file(sn->work, LB_FILE_WAL, sn->wal, wcut);
	assert_ok(lb_msgfile_open(sn->work, LB_RDWR, sn->first_id, &mf));
	lb_msgfile_range(mf, &first, &next);
	if (first != sn->first_id || next != want)
		print_error("mcut %zu wcut %zu: range [%llu, %llu), want next %llu\n", mcut,
		    wcut, (unsigned long long)first, (unsigned long long)next,
		    (unsigned long long)want);
	assert_true(first == sn->first_id && next == want);
	for (uint64_t id = first; id < next; id++) {
		assert_ok(lb_msgfile_get(mf, id, &m));
		assert_msg(&m, &sn->refs[id - sn->first_id].m);
	}
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	gen(&s, &extra, next, 5, 0, 1);
	assert_ok(lb_msgfile_append(mf, &extra.m));
	assert_ok(lb_msgfile_commit(mf, 0));
	lb_msgfile_close(mf);
	assert_ok(lb_msgfile_open(sn->work, LB_RDONLY, 0, &mf));
	if (lb_msgfile_verify(mf, why, sizeof(why)) != 0)
		print_error("mcut %zu wcut %zu: %s\n", mcut, wcut, why);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	assert_ok(lb_msgfile_get(mf, next, &m));
	assert_msg(&m, &extra.m);
	lb_msgfile_close(mf);
	free(extra.mem);
}

/* Saves the bytes of sn's day directory. */
static void
snap_take(struct snap *sn)
{
	char	 path[512];

	snprintf(path, sizeof(path), "%s/%s", sn->dir, LB_FILE_MESSAGES);
	sn->msgs = t_read_file(path, &sn->mlen);
	snprintf(path, sizeof(path), "%s/%s", sn->dir, LB_FILE_WAL);
	sn->wal = t_read_file(path, &sn->wlen);
}

/*
 * Starts a snapshot test of n messages from first_id: fresh directories, and a writer on the
 * day directory in *mf.
 */
static void
snap_begin(struct snap *sn, size_t n, uint64_t first_id, struct lb_msgfile **mf)
{
	memset(sn, 0, sizeof(*sn));
	t_mkdtemp(sn->dir, sizeof(sn->dir));
	snprintf(sn->work, sizeof(sn->work), "%s/w", sn->dir);
	assert_int_equal(mkdir(sn->work, 0750), 0);
	sn->first_id = first_id;
	sn->n = n;
	assert_non_null(sn->refs = calloc(n, sizeof(*sn->refs)));
	assert_ok(lb_msgfile_open(sn->dir, LB_RDWR, first_id, mf));
}

/* Frees what sn holds and removes its directories. */
static void
snap_end(struct snap *sn)
{
	free(sn->msgs);
	free(sn->wal);
	free_refs(sn->refs, sn->n);
	t_rmtree(sn->dir);
}

/*
 * Small sealed blocks (explicit seals) and a WAL with the open block's records: cut each
 * file at every byte.
 */
static void
t_crash_every_byte(void **state)
{
	struct lb_msgfile	*mf;
	struct snap		 sn;
	uint64_t		 s = 3;

	(void)state;
	snap_begin(&sn, 40, 77, &mf);
	for (size_t i = 0; i < sn.n; i++) {
		gen(&s, &sn.refs[i], sn.first_id + i, 1000 + 7 * (int64_t)i, 0, 1);
		assert_ok(lb_msgfile_append(mf, &sn.refs[i].m));
		assert_ok(lb_msgfile_commit(mf, 0));
		if (i % 10 == 9 && i < 30)
			assert_ok(lb_msgfile_seal(mf));
	}
	lb_msgfile_close(mf);
	snap_take(&sn);
	assert_true(sn.wlen > LB_FHDR_SIZE);
	for (size_t cut = 0; cut <= sn.mlen; cut++)
		recover_one(&sn, cut, sn.wlen);
	for (size_t cut = 0; cut <= sn.wlen; cut++)
		recover_one(&sn, sn.mlen, cut);
	snap_end(&sn);
}

/*
 * Blocks sealed by append (no fsync) leave their records in the WAL ("stale") until a commit
 * with sync: losing such a block must bring its records back from the WAL.
 */
static void
t_crash_stale_wal(void **state)
{
	struct lb_msgfile	*mf;
	struct snap		 sn;
	uint64_t		 s = 11;

	(void)state;
	snap_begin(&sn, 30, 1, &mf);
	for (size_t i = 0; i < sn.n; i++) {
		struct ref	*r = &sn.refs[i];

		gen(&s, r, sn.first_id + i, 50 + (int64_t)i, 0, 1);
		/* 8 KiB of compressible text: a block every eight messages. */
		free(r->mem);
		assert_non_null(r->mem = malloc(8 * 1024));
		memset(r->mem, 'a' + (int)(i % 26), 8 * 1024);
		r->m.host = r->m.program = r->m.pid = r->m.msgid = r->m.sd = r->m.peer =
		    (struct lb_slice){ r->mem, 3 };
		r->m.message = (struct lb_slice){ r->mem, 8 * 1024 };
		assert_ok(lb_msgfile_append(mf, &r->m));
		assert_ok(lb_msgfile_commit(mf, 0));
	}
	lb_msgfile_close(mf);
	snap_take(&sn);
	assert_true(sn.wlen > 20 * 8 * 1024);	/* stale records are still there */
	/* A dense sample of messages cuts, and every block boundary with a byte either side. */
	for (size_t cut = 0; cut <= sn.mlen; cut += cut < LB_FHDR_SIZE + 2 ? 1 : 5)
		recover_one(&sn, cut, sn.wlen);
	for (size_t off = LB_FHDR_SIZE; off < sn.mlen; off += LB_BHDR_SIZE +
	    lb_get32(sn.msgs + off + LB_BHDR_COMP_LEN))
		for (size_t d = off - 1; d <= off + 1; d++)
			recover_one(&sn, d, sn.wlen);
	recover_one(&sn, sn.mlen - 1, sn.wlen);
	for (size_t cut = 0; cut <= sn.wlen; cut += cut < 64 ? 1 : 1021)
		recover_one(&sn, sn.mlen, cut);
	/* Every record boundary, and one byte either side. */
	for (size_t off = LB_FHDR_SIZE; off < sn.wlen; off += LB_WREC_HDR +
	    lb_get32(sn.wal + off))
		for (size_t d = off - 1; d <= off + 1 && d <= sn.wlen; d++)
			recover_one(&sn, sn.mlen, d);
	recover_one(&sn, sn.mlen, sn.wlen - 1);

	/* A sync commit replaces the WAL with the open block's records only. */
	assert_ok(lb_msgfile_open(sn.dir, LB_RDWR, sn.first_id, &mf));
	assert_ok(lb_msgfile_commit(mf, 1));
	lb_msgfile_close(mf);
	free(sn.wal);
	{
		char	 path[512];

		snprintf(path, sizeof(path), "%s/%s", sn.dir, LB_FILE_WAL);
		sn.wal = t_read_file(path, &sn.wlen);
	}
	assert_true(sn.wlen < 8 * (8 * 1024 + 64));
	snap_end(&sn);
}

/*
 * Every byte of a small sealed file (and its WAL) flipped in turn: a reader either refuses
 * to open, or verify reports damage, and get never returns a message that differs.
 */
static void
t_flip_every_byte(void **state)
{
	char			 why[256];
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	struct snap		 sn;
	uint64_t		 s = 5, first, next;

	(void)state;
	snap_begin(&sn, 30, 10, &mf);
	for (size_t i = 0; i < sn.n; i++) {
		gen(&s, &sn.refs[i], sn.first_id + i, 1000 + 7 * (int64_t)i, 0, 1);
		assert_ok(lb_msgfile_append(mf, &sn.refs[i].m));
		if (i % 8 == 7)
			assert_ok(lb_msgfile_seal(mf));
	}
	assert_ok(lb_msgfile_commit(mf, 1));
	lb_msgfile_close(mf);
	snap_take(&sn);
	for (int which = 0; which < 2; which++) {
		uint8_t	*buf = which == 0 ? sn.msgs : sn.wal;
		size_t	 len = which == 0 ? sn.mlen : sn.wlen;

		for (size_t pos = 0; pos < len; pos++) {
			uint8_t	 save = buf[pos];
			int	 rc;

			buf[pos] ^= (uint8_t)(1 + t_rnd(&s) % 255);
			write_file(sn.work, LB_FILE_MESSAGES, sn.msgs, sn.mlen);
			write_file(sn.work, LB_FILE_WAL, sn.wal, sn.wlen);
			buf[pos] = save;
			rc = lb_msgfile_open(sn.work, LB_RDONLY, 0, &mf);
			if (rc != 0) {
				assert_true(rc == LB_EFORMAT || rc == LB_ECORRUPT);
				continue;
			}
			rc = lb_msgfile_verify(mf, why, sizeof(why));
			lb_msgfile_range(mf, &first, &next);
			if (rc == 0) {
				/*
				 * A flip that makes the WAL's last record, or the last block, run
				 * past the end of the file looks exactly like the torn write a kill
				 * leaves: verify accepts it, and then either exactly that one
				 * (never acknowledged) WAL message is missing or nothing is (the
				 * WAL still holds the block's records). The gets below check every
				 * message that is served. Everything else must be reported.
				 */
				assert_true((which == 1 && next == sn.first_id + sn.n - 1) ||
				    next == sn.first_id + sn.n);
			} else {
				assert_int_equal(rc, LB_ECORRUPT);
				assert_non_null(strstr(why, "offset"));
			}
			for (uint64_t id = first; id < next + 2; id++) {
				rc = lb_msgfile_get(mf, id, &m);
				if (rc == 0) {
					assert_true(id >= sn.first_id && id < sn.first_id + sn.n);
					assert_true(msg_eq(&m, &sn.refs[id - sn.first_id].m));
				} else {
					assert_true(rc == LB_ECORRUPT || rc == LB_ENOTFOUND);
				}
			}
			lb_msgfile_close(mf);
		}
		/* The flip was undone: the copy is sound again. */
		write_file(sn.work, LB_FILE_MESSAGES, sn.msgs, sn.mlen);
		write_file(sn.work, LB_FILE_WAL, sn.wal, sn.wlen);
		assert_ok(lb_msgfile_open(sn.work, LB_RDONLY, 0, &mf));
		assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
		lb_msgfile_close(mf);
	}
	snap_end(&sn);
}

/* Gets every message of sn: those in [bad, bad_next) are LB_ECORRUPT, the rest as written. */
static void
check_but(struct lb_msgfile *mf, const struct snap *sn, uint64_t bad, uint64_t bad_next)
{
	struct lb_msg	 m;

	for (uint64_t id = sn->first_id; id < sn->first_id + sn->n; id++) {
		int rc = lb_msgfile_get(mf, id, &m);

		if (id >= bad && id < bad_next)
			assert_int_equal(rc, LB_ECORRUPT);
		else {
			assert_ok(rc);
			assert_msg(&m, &sn->refs[id - sn->first_id].m);
		}
	}
}

/*
 * Damage in the middle: a reader still reads the sound blocks and reports the damaged ones;
 * verify names the file, offset and block; a writer refuses a damaged header in the middle.
 */
static void
t_middle_damage(void **state)
{
	char			 why[256], want[64];
	struct lb_msgfile	*mf;
	struct snap		 sn;
	uint64_t		 s = 9, bfirst[8];
	size_t			 boff[8], nb = 0;

	(void)state;
	snap_begin(&sn, 40, 100, &mf);
	for (size_t i = 0; i < sn.n; i++) {
		gen(&s, &sn.refs[i], sn.first_id + i, 1000 + 7 * (int64_t)i, 0, 1);
		assert_ok(lb_msgfile_append(mf, &sn.refs[i].m));
		if (i % 10 == 9)
			assert_ok(lb_msgfile_seal(mf));
	}
	lb_msgfile_close(mf);
	snap_take(&sn);
	for (size_t off = LB_FHDR_SIZE; off < sn.mlen; nb++) {
		boff[nb] = off;
		bfirst[nb] = lb_get64(sn.msgs + off + LB_BHDR_FIRST_ID);
		off += LB_BHDR_SIZE + lb_get32(sn.msgs + off + LB_BHDR_COMP_LEN);
	}
	assert_int_equal(nb, 4);

	/* Payload of block 1 damaged. */
	sn.msgs[boff[1] + LB_BHDR_SIZE + 2] ^= 0x40;
	write_file(sn.work, LB_FILE_MESSAGES, sn.msgs, sn.mlen);
	write_file(sn.work, LB_FILE_WAL, sn.wal, sn.wlen);
	assert_ok(lb_msgfile_open(sn.work, LB_RDONLY, 0, &mf));
	check_but(mf, &sn, bfirst[1], bfirst[2]);
	assert_int_equal(lb_msgfile_verify(mf, why, sizeof(why)), LB_ECORRUPT);
	snprintf(want, sizeof(want), "offset %zu: block first id %llu", boff[1],
	    (unsigned long long)bfirst[1]);
	assert_non_null(strstr(why, want));
	assert_non_null(strstr(why, LB_FILE_MESSAGES));
	lb_msgfile_close(mf);
	sn.msgs[boff[1] + LB_BHDR_SIZE + 2] ^= 0x40;

	/* Header of block 1 damaged: the reader resynchronises on block 2. */
	sn.msgs[boff[1] + LB_BHDR_TMIN] ^= 0x01;
	write_file(sn.work, LB_FILE_MESSAGES, sn.msgs, sn.mlen);
	assert_ok(lb_msgfile_open(sn.work, LB_RDONLY, 0, &mf));
	check_but(mf, &sn, bfirst[1], bfirst[2]);
	assert_int_equal(lb_msgfile_verify(mf, why, sizeof(why)), LB_ECORRUPT);
	assert_non_null(strstr(why, "bad block header"));
	lb_msgfile_close(mf);
	assert_int_equal(lb_msgfile_open(sn.work, LB_RDWR, 0, &mf), LB_ECORRUPT);
	sn.msgs[boff[1] + LB_BHDR_TMIN] ^= 0x01;

	/* The last block damaged: the writer cuts it and takes its records from nowhere. */
	sn.msgs[sn.mlen - 1] ^= 0x01;
	write_file(sn.work, LB_FILE_MESSAGES, sn.msgs, sn.mlen);
	assert_ok(lb_msgfile_open(sn.work, LB_RDWR, 0, &mf));
	{
		uint64_t	 first, next;

		lb_msgfile_range(mf, &first, &next);
		assert_true(next == bfirst[3]);
	}
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);
	snap_end(&sn);
}

/*
 * A WAL whose header is damaged is refused by the writer (nothing is guessed) but a reader
 * still reads the blocks; bytes after the last block are reported by verify and cut by the
 * writer.
 */
static void
t_refusals(void **state)
{
	char			 why[256];
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	struct snap		 sn;
	uint64_t		 s = 21, first, next;
	uint8_t			 junk[40];

	(void)state;
	snap_begin(&sn, 12, 1, &mf);
	for (size_t i = 0; i < sn.n; i++) {
		gen(&s, &sn.refs[i], 1 + i, 100 + (int64_t)i, 0, 1);
		assert_ok(lb_msgfile_append(mf, &sn.refs[i].m));
		if (i == 7)
			assert_ok(lb_msgfile_seal(mf));
	}
	assert_ok(lb_msgfile_commit(mf, 1));
	lb_msgfile_close(mf);
	snap_take(&sn);

	sn.wal[LB_FHDR_FIRST_ID] ^= 1;
	write_file(sn.dir, LB_FILE_WAL, sn.wal, sn.wlen);
	assert_int_equal(lb_msgfile_open(sn.dir, LB_RDWR, 1, &mf), LB_ECORRUPT);
	assert_ok(lb_msgfile_open(sn.dir, LB_RDONLY, 0, &mf));
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == 1 && next == 9);
	assert_ok(lb_msgfile_get(mf, 8, &m));
	assert_msg(&m, &sn.refs[7].m);
	assert_int_equal(lb_msgfile_verify(mf, why, sizeof(why)), LB_ECORRUPT);
	assert_non_null(strstr(why, LB_FILE_WAL ": offset 0"));
	lb_msgfile_close(mf);
	sn.wal[LB_FHDR_FIRST_ID] ^= 1;
	write_file(sn.dir, LB_FILE_WAL, sn.wal, sn.wlen);

	/* Garbage after the last block. */
	memset(junk, 0xa5, sizeof(junk));
	{
		uint8_t	*both;

		assert_non_null(both = malloc(sn.mlen + sizeof(junk)));
		memcpy(both, sn.msgs, sn.mlen);
		memcpy(both + sn.mlen, junk, sizeof(junk));
		write_file(sn.dir, LB_FILE_MESSAGES, both, sn.mlen + sizeof(junk));
		free(both);
	}
	assert_ok(lb_msgfile_open(sn.dir, LB_RDONLY, 0, &mf));
	lb_msgfile_range(mf, &first, &next);
	assert_true(next == 1 + sn.n);
	assert_int_equal(lb_msgfile_verify(mf, why, sizeof(why)), LB_ECORRUPT);
	lb_msgfile_close(mf);
	assert_ok(lb_msgfile_open(sn.dir, LB_RDWR, 1, &mf));
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_range(mf, &first, &next);
	assert_true(next == 1 + sn.n);
	check_all(mf, sn.refs, 1, sn.n, sn.n, &s);
	lb_msgfile_close(mf);
	snap_end(&sn);
}

/* The message of FORMAT.md §3's example: id 7, received 1000000, from web1's sshd[42]. */
static void
example_msg(struct lb_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->id = 7;
	m->received = 1000000;
	m->timestamp = 999000;
	m->tzoff = -60;
	m->facility = 4;
	m->severity = 6;
	m->flags = LB_MSG_RFC3164;
	m->host = (struct lb_slice){ (const uint8_t *)"web1", 4 };
	m->program = (struct lb_slice){ (const uint8_t *)"sshd", 4 };
	m->pid = (struct lb_slice){ (const uint8_t *)"42", 2 };
	m->message = (struct lb_slice){ (const uint8_t *)"hi\0\n", 4 };
}

/* The file header and a WAL record byte for byte, as FORMAT.md §3 shows them. */
static void
t_golden(void **state)
{
	char			 dir[256], path[512];
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	uint8_t			*buf;
	size_t			 len;
	static const uint8_t	 fhdr[LB_FHDR_SIZE] = {
		0x4c, 0x42, 0x4d, 0x46, 0x01, 0x00, 0x00, 0x00,
		0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00,
	};

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	example_msg(&m);
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 7, &mf));
	assert_ok(lb_msgfile_append(mf, &m));
	assert_ok(lb_msgfile_commit(mf, 1));
	lb_msgfile_close(mf);

	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
	buf = t_read_file(path, &len);
	assert_int_equal(len, LB_FHDR_SIZE);
	assert_memory_equal(buf, fhdr, LB_FHDR_CRC);
	assert_int_equal(lb_get32(buf + LB_FHDR_CRC), lb_crc32(buf, LB_FHDR_CRC));
	free(buf);

	/* The WAL record: frame, then id 7, time 1000000, and the fields (FORMAT.md §3). */
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_WAL);
	buf = t_read_file(path, &len);
	{
		static const uint8_t body[] = {
			0x07,				/* id 7 */
			0x80, 0x89, 0x7a,		/* zigzag(1000000) = 2000000 */
			0xcf, 0x0f,			/* zigzag(-1000) = 1999 */
			0x77,				/* zigzag(-60) = 119 */
			0x04, 0x06, 0x04,		/* facility, severity, flags */
			0x04, 'w', 'e', 'b', '1',
			0x04, 's', 's', 'h', 'd',
			0x02, '4', '2',
			0x00, 0x00,			/* msgid, sd */
			0x04, 'h', 'i', 0x00, '\n',
		};

		assert_int_equal(len, LB_FHDR_SIZE + LB_WREC_HDR + sizeof(body));
		assert_int_equal(lb_get32(buf + LB_FHDR_SIZE), sizeof(body));
		assert_int_equal(lb_get32(buf + LB_FHDR_SIZE + 4), lb_crc32(body, sizeof(body)));
		assert_memory_equal(buf + LB_FHDR_SIZE + LB_WREC_HDR, body, sizeof(body));
	}
	free(buf);
	t_rmtree(dir);
}

/* The golden record of t_golden as it was before peers existed (FORMAT.md §3.4). */
static const uint8_t old_body[] = {
	0x07, 0x80, 0x89, 0x7a, 0xcf, 0x0f, 0x77, 0x04, 0x06, 0x04,
	0x04, 'w', 'e', 'b', '1', 0x04, 's', 's', 'h', 'd', 0x02, '4', '2', 0x00, 0x00,
	0x04, 'h', 'i', 0x00, '\n',
};

/* A file header (FORMAT.md §3.1) with magic, first id 7, at f. */
static void
put_fhdr(uint8_t *f, uint32_t magic)
{
	lb_put32(f + LB_FHDR_MAGIC, magic);
	lb_put32(f + LB_FHDR_VERSION, LB_MSGF_VERSION);
	lb_put64(f + LB_FHDR_FIRST_ID, 7);
	lb_put32(f + LB_FHDR_CRC, lb_crc32(f, LB_FHDR_CRC));
}

/* Writes messages (one stored block of payload p[0..n), id 7, received 1000000) and an empty WAL. */
static void
write_block(const char *dir, const uint8_t *p, size_t n)
{
	uint8_t	 f[LB_FHDR_SIZE + LB_BHDR_SIZE + 512], *h = f + LB_FHDR_SIZE;

	assert_true(n <= 512);
	memset(f, 0, sizeof(f));
	put_fhdr(f, LB_WAL_MAGIC);
	write_file(dir, LB_FILE_WAL, f, LB_FHDR_SIZE);
	put_fhdr(f, LB_MSGF_MAGIC);
	lb_put32(h + LB_BHDR_MAGIC, LB_BLK_MAGIC);
	lb_put32(h + LB_BHDR_COUNT, 1);
	lb_put64(h + LB_BHDR_FIRST_ID, 7);
	lb_put64(h + LB_BHDR_TMIN, 1000000);
	lb_put64(h + LB_BHDR_TMAX, 1000000);
	lb_put32(h + LB_BHDR_RAW_LEN, (uint32_t)n);
	lb_put32(h + LB_BHDR_COMP_LEN, (uint32_t)n);
	lb_put32(h + LB_BHDR_PAYLOAD_CRC, lb_crc32(p, n));
	h[LB_BHDR_METHOD] = LB_BLK_STORED;
	lb_put32(h + LB_BHDR_CRC, lb_crc32(h, LB_BHDR_CRC));
	memcpy(h + LB_BHDR_SIZE, p, n);
	write_file(dir, LB_FILE_MESSAGES, f, LB_FHDR_SIZE + LB_BHDR_SIZE + n);
}

/* Writes messages (no block) and a WAL holding the one record body b[0..n). */
static void
write_wal(const char *dir, const uint8_t *b, size_t n)
{
	uint8_t	 f[LB_FHDR_SIZE + LB_WREC_HDR + 256];

	assert_true(n <= 256);
	memset(f, 0, sizeof(f));
	put_fhdr(f, LB_MSGF_MAGIC);
	write_file(dir, LB_FILE_MESSAGES, f, LB_FHDR_SIZE);
	put_fhdr(f, LB_WAL_MAGIC);
	lb_put32(f + LB_FHDR_SIZE, (uint32_t)n);
	lb_put32(f + LB_FHDR_SIZE + 4, lb_crc32(b, n));
	memcpy(f + LB_FHDR_SIZE + LB_WREC_HDR, b, n);
	write_file(dir, LB_FILE_WAL, f, LB_FHDR_SIZE + LB_WREC_HDR + n);
}

/* Opens dir read-only and gets id 7: the result, *m filled on success (mf left in *out). */
static int
get7(const char *dir, struct lb_msgfile **out, struct lb_msg *m)
{
	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, out));
	return (lb_msgfile_get(*out, 7, m));
}

/*
 * The peer (FORMAT.md §3.3): a record written before it existed still decodes, from a block
 * and from the WAL, with an empty peer; a record with one carries LB_MSG_PEER and the peer
 * after the message, byte for byte; a peer that breaks the rules is LB_ECORRUPT.
 */
static void
t_peer(void **state)
{
	char			 dir[256], path[512], why[256];
	struct lb_msgfile	*mf;
	struct lb_msg		 m, w;
	uint8_t			 b[512], *buf;
	size_t			 n, len;
	static const uint8_t	 peer[] = { 0x08, '1', '0', '.', '0', '.', '0', '.', '7' };

	(void)state;
	t_mkdtemp(dir, sizeof(dir));

	/* Old records: in the WAL and in a block. */
	write_wal(dir, old_body, sizeof(old_body));
	assert_ok(get7(dir, &mf, &m));
	assert_true(m.received == 1000000 && m.flags == LB_MSG_RFC3164 && m.peer.len == 0);
	assert_true(m.host.len == 4 && memcmp(m.host.p, "web1", 4) == 0 && m.message.len == 4);
	lb_msgfile_close(mf);
	write_block(dir, old_body + 1, sizeof(old_body) - 1);
	assert_ok(get7(dir, &mf, &m));
	assert_true(m.received == 1000000 && m.flags == LB_MSG_RFC3164 && m.peer.len == 0);
	assert_true(m.message.len == 4 && memcmp(m.message.p, "hi\0\n", 4) == 0);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);
	t_rmtree(dir);

	/* The writer: flag and peer after the message; m's own LB_MSG_PEER is ignored. */
	t_mkdtemp(dir, sizeof(dir));
	example_msg(&w);
	w.flags |= LB_MSG_PEER;
	w.peer = (struct lb_slice){ (const uint8_t *)"10.0.0.7", 8 };
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 7, &mf));
	assert_ok(lb_msgfile_append(mf, &w));
	w.id = 8;
	w.peer.len = 0;		/* the flag alone is not written */
	assert_ok(lb_msgfile_append(mf, &w));
	assert_ok(lb_msgfile_commit(mf, 1));
	lb_msgfile_close(mf);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_WAL);
	buf = t_read_file(path, &len);
	memcpy(b, old_body, sizeof(old_body));
	b[9] = 0x44;
	memcpy(b + sizeof(old_body), peer, sizeof(peer));
	n = sizeof(old_body) + sizeof(peer);
	assert_int_equal(len, LB_FHDR_SIZE + 2 * LB_WREC_HDR + n + sizeof(old_body));
	assert_int_equal(lb_get32(buf + LB_FHDR_SIZE), n);
	assert_memory_equal(buf + LB_FHDR_SIZE + LB_WREC_HDR, b, n);
	/* The second record is the old format exactly, but for its id. */
	assert_int_equal(buf[LB_FHDR_SIZE + 2 * LB_WREC_HDR + n], 8);
	assert_memory_equal(buf + LB_FHDR_SIZE + 2 * LB_WREC_HDR + n + 1, old_body + 1,
	    sizeof(old_body) - 1);
	free(buf);
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 0, &mf));	/* recovered, then sealed */
	assert_ok(lb_msgfile_seal(mf));
	lb_msgfile_close(mf);
	assert_ok(get7(dir, &mf, &m));
	assert_true(m.flags == LB_MSG_RFC3164 && m.peer.len == 8 &&
	    memcmp(m.peer.p, "10.0.0.7", 8) == 0);
	assert_ok(lb_msgfile_get(mf, 8, &m));
	assert_true(m.flags == LB_MSG_RFC3164 && m.peer.len == 0);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);
	t_rmtree(dir);

	/* Bad peers in a block: cut short, flag with no bytes, empty, over LB_FIELD_MAX. */
	t_mkdtemp(dir, sizeof(dir));
	memcpy(b, old_body + 1, sizeof(old_body) - 1);
	b[8] = 0x44;
	n = sizeof(old_body) - 1;
	write_block(dir, b, n);				/* the flag, nothing after */
	assert_int_equal(get7(dir, &mf, &m), LB_ECORRUPT);
	lb_msgfile_close(mf);
	memcpy(b + n, peer, sizeof(peer));
	write_block(dir, b, n + sizeof(peer) - 1);	/* one byte short */
	assert_int_equal(get7(dir, &mf, &m), LB_ECORRUPT);
	lb_msgfile_close(mf);
	b[n] = 0x00;
	write_block(dir, b, n + 1);			/* an empty peer under the flag */
	assert_int_equal(get7(dir, &mf, &m), LB_ECORRUPT);
	lb_msgfile_close(mf);
	b[n] = 0x80;
	b[n + 1] = 0x02;				/* 256 bytes */
	memset(b + n + 2, 'p', 256);
	write_block(dir, b, n + 2 + 256);
	assert_int_equal(get7(dir, &mf, &m), LB_ECORRUPT);
	assert_int_equal(lb_msgfile_verify(mf, why, sizeof(why)), LB_ECORRUPT);
	lb_msgfile_close(mf);
	/* The same in the WAL: the record does not decode, so id 7 is not there. */
	memcpy(b, old_body, sizeof(old_body));
	b[9] = 0x44;
	write_wal(dir, b, sizeof(old_body));
	assert_int_not_equal(get7(dir, &mf, &m), 0);
	lb_msgfile_close(mf);
	t_rmtree(dir);
}

/*
 * The compressor thread under a random mix of calls: many blocks appended quickly with
 * commits (with and without sync), gets of any id (open block, queued blocks, written
 * blocks) and seals in between; then close, reopen and read everything back.
 */
static void
t_threaded(void **state)
{
	char			 dir[256], why[256];
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	struct ref		*refs;
	uint64_t		 s = 0x2545f4914f6cdd1dULL, first, next;
	const size_t		 n = 40000, first_id = 7;
	int64_t			 t = 1700000000000000LL;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	assert_ok(lb_msgfile_open(dir, LB_RDWR, first_id, &mf));
	for (size_t i = 0; i < n; i++) {
		t += (int64_t)(t_rnd(&s) % 1000);
		gen(&s, &refs[i], first_id + i, t, 0, 0);
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
		switch (t_rnd(&s) % 64) {
		case 0:
			assert_ok(lb_msgfile_commit(mf, 0));
			break;
		case 1:
			if (t_rnd(&s) % 4 == 0)
				assert_ok(lb_msgfile_commit(mf, 1));
			break;
		case 2:
		case 3: {
			/* The newest ids are the likeliest to sit in a queued block. */
			size_t j = i - (size_t)(t_rnd(&s) % (i < 2000 ? i + 1 : 2000));

			if (t_rnd(&s) % 8 == 0)
				j = (size_t)(t_rnd(&s) % (i + 1));
			assert_ok(lb_msgfile_get(mf, first_id + j, &m));
			assert_msg(&m, &refs[j].m);
			break;
		}
		case 4:
			if (t_rnd(&s) % 16 == 0)
				assert_ok(lb_msgfile_seal(mf));
			break;
		}
	}
	assert_ok(lb_msgfile_commit(mf, 0));
	check_all(mf, refs, first_id, n, 500, &s);
	lb_msgfile_close(mf);
	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &mf));
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == first_id && next == first_id + n);
	check_all(mf, refs, first_id, n, 500, &s);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);
	/* The writer finds everything again, and close wrote the queued blocks. */
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 0, &mf));
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == first_id && next == first_id + n);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);
	free_refs(refs, n);
	t_rmtree(dir);
}

static uint64_t
file_size(const char *dir, const char *name)
{
	char		 path[512];
	struct stat	 st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(stat(path, &st), 0);
	return ((uint64_t)st.st_size);
}

/*
 * Appends refs[*i..n) until a call fails, committing every 50; *committed is how many were
 * committed. Returns the failure (0: all went in).
 */
static int
append_until_error(struct lb_msgfile *mf, uint64_t *s, struct ref *refs, size_t *i, size_t n,
    uint64_t first_id, int64_t *t, size_t *committed)
{
	int	rc;

	for (; *i < n; (*i)++) {
		if (refs[*i].mem == NULL) {
			*t += 1000;
			gen(s, &refs[*i], first_id + *i, *t, 0, 0);
		}
		if ((rc = lb_msgfile_append(mf, &refs[*i].m)) != 0)
			return (rc);
		if (*i % 50 == 0) {
			if ((rc = lb_msgfile_commit(mf, 0)) != 0) {
				(*i)++;
				return (rc);
			}
			*committed = *i + 1;
		}
	}
	return (0);
}

/* Gets ids first_id.. of refs[0..n) in order, verifies, closes mf. */
static void
check_in_order(struct lb_msgfile *mf, const struct ref *refs, uint64_t first_id, size_t n)
{
	char		 why[256];
	struct lb_msg	 m;

	for (size_t j = 0; j < n; j++) {
		assert_ok(lb_msgfile_get(mf, first_id + j, &m));
		assert_msg(&m, &refs[j].m);
	}
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);
}

/*
 * After the writer recovered: the rest go in on the same handle, every message is read back
 * byte for byte, before and after a reopen, and verify passes.
 */
static void
finish_and_check(const char *dir, struct lb_msgfile *mf, uint64_t *s, struct ref *refs,
    size_t i, size_t n, uint64_t first_id, int64_t *t)
{
	uint64_t	 first, next;
	size_t		 committed = 0;

	assert_ok(append_until_error(mf, s, refs, &i, n, first_id, t, &committed));
	assert_ok(lb_msgfile_commit(mf, 1));
	assert_ok(lb_msgfile_seal(mf));
	check_in_order(mf, refs, first_id, n);
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 0, &mf));
	lb_msgfile_range(mf, &first, &next);
	assert_true(first == first_id);
	assert_true(next == first_id + n);
	check_in_order(mf, refs, first_id, n);
}

/*
 * A block the thread cannot write (a real EFBIG: RLIMIT_FSIZE set just past the end of
 * messages) is reported by the next call (append, commit), and not sticky: once the limit is
 * lifted the same handle writes the failed blocks, takes the rest and everything reads back,
 * on the handle and after a reopen. No message is lost or written twice.
 */
static void
t_thread_write_error(void **state)
{
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	struct ref		*refs;
	struct rlimit		 old, lim;
	char			 dir[256];
	uint64_t		 s = 0x853c49e6748fea9bULL, msize, wsize;
	const size_t		 n = 20000, first_id = 1;
	size_t			 i = 0, committed = 0, phase1 = 6000;
	int64_t			 t = 1700000000000000LL;
	int			 rc, rc2, rc3;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	assert_ok(lb_msgfile_open(dir, LB_RDWR, first_id, &mf));
	assert_ok(append_until_error(mf, &s, refs, &i, phase1, first_id, &t, &committed));
	assert_ok(lb_msgfile_commit(mf, 1));
	assert_ok(lb_msgfile_commit(mf, 1));	/* now the WAL holds only the unwritten */
	msize = file_size(dir, LB_FILE_MESSAGES);
	wsize = file_size(dir, LB_FILE_WAL);
	/* Room in messages for less than one more block; the WAL stays far below. */
	assert_true(wsize + 4 * LB_BLOCK_RAW_TARGET < msize + 1000);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = (rlim_t)(msize + 1000);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	rc = append_until_error(mf, &s, refs, &i, n, first_id, &t, &committed);
	/*
	 * Reported by the next call after the thread met it, again while the cause lasts, not by
	 * a read. On a loaded machine the thread may reach the failing block only after the last
	 * append: then a later commit is that next call (waited for, up to 30 s).
	 */
	for (int k = 0; rc == 0 && k < 3000; k++) {
		if ((rc = lb_msgfile_commit(mf, 1)) == 0)
			usleep(10000);
	}
	assert_int_equal(rc, EFBIG);
	/* The thread tries the block again and meets the limit again: reported again. */
	rc2 = 0;
	for (int k = 0; rc2 == 0 && k < 3000; k++) {
		if ((rc2 = lb_msgfile_commit(mf, 1)) == 0)
			usleep(10000);
	}
	rc3 = lb_msgfile_get(mf, first_id + i - 1, &m);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(rc2, EFBIG);
	assert_int_equal(rc3, 0);	/* (queued and open blocks are served from memory) */
	assert_msg(&m, &refs[i - 1].m);
	/* The cause is gone: the same handle goes on (the failed append is simply retried). */
	if (lb_msgfile_commit(mf, 0) != 0)
		assert_ok(lb_msgfile_commit(mf, 0));
	finish_and_check(dir, mf, &s, refs, i, n, first_id, &t);
	free_refs(refs, n);
	t_rmtree(dir);
}

/*
 * A real ENOSPC: the message file on a 16 MiB tmpfs (root only: skipped otherwise) that a
 * filler file fills to the last byte; messages are appended until a block the compressor thread
 * could not write makes append fail. Every commit fails while it is full (ENOSPC, nothing
 * half taken); the filler is removed and the same handle goes on, no reopen: every message is
 * there once, byte for byte, before and after a reopen.
 */
static void
t_enospc_recovers(void **state)
{
	struct lb_msgfile	*mf;
	struct ref		*refs;
	char			 dir[256], mnt[300], cmd[700], fill_path[320];
	uint8_t			 chunk[4096];
	uint64_t		 s = 0x2545f4914f6cdd1dULL, first, next;
	const size_t		 n = 30000, first_id = 1;
	size_t			 i = 0, committed = 0;
	int64_t			 t = 1700000000000000LL;
	int			 fd, rc;

	(void)state;
	if (geteuid() != 0) {
		print_message("t_enospc_recovers: skipped: mounting a tmpfs needs root\n");
		skip();
	}
	t_mkdtemp(dir, sizeof(dir));
	snprintf(mnt, sizeof(mnt), "%s/fs", dir);
	assert_int_equal(mkdir(mnt, 0700), 0);
	snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o size=16m tmpfs '%s'", mnt);
	if (system(cmd) != 0) {
		t_rmtree(dir);
		print_message("t_enospc_recovers: skipped: cannot mount a tmpfs here\n");
		skip();
	}
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	assert_ok(lb_msgfile_open(mnt, LB_RDWR, first_id, &mf));
	assert_ok(append_until_error(mf, &s, refs, &i, 500, first_id, &t, &committed));
	assert_ok(lb_msgfile_commit(mf, 1));
	/* The filler takes every free byte. */
	snprintf(fill_path, sizeof(fill_path), "%s/filler", mnt);
	assert_true((fd = open(fill_path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) != -1);
	memset(chunk, 'F', sizeof(chunk));
	for (size_t k = sizeof(chunk); k > 0; k /= 2)
		while (write(fd, chunk, k) == (ssize_t)k)
			;
	close(fd);
	/*
	 * Appends go on into memory (commits fail: the WAL cannot grow) until a block the
	 * thread could not write makes append fail too.
	 */
	for (;; i++) {
		assert_true(i < n);
		t += 1000;
		gen(&s, &refs[i], first_id + i, t, 0, 0);
		if ((rc = lb_msgfile_append(mf, &refs[i].m)) != 0)
			break;
		if (i % 50 == 0)
			(void)lb_msgfile_commit(mf, 0);
	}
	assert_int_equal(rc, ENOSPC);
	/* While full: every try fails with ENOSPC and takes nothing. */
	for (int k = 0; k < 3; k++) {
		assert_int_equal(lb_msgfile_commit(mf, 1), ENOSPC);
		lb_msgfile_range(mf, &first, &next);
		assert_true(next == first_id + i);
	}
	lb_msgfile_range(mf, &first, &next);
	i = (size_t)(next - first_id);	/* the one that failed is appended again */
	assert_int_equal(unlink(fill_path), 0);
	if (lb_msgfile_commit(mf, 0) != 0)
		assert_ok(lb_msgfile_commit(mf, 0));
	/* A few more blocks than the filler freed room for: 16 MiB holds no more. */
	finish_and_check(mnt, mf, &s, refs, i, i + 400, first_id, &t);
	snprintf(cmd, sizeof(cmd), "umount '%s'", mnt);
	assert_int_equal(system(cmd), 0);
	free_refs(refs, n);
	t_rmtree(dir);
}

/*
 * The crash tests recover thousands of times and every recovery fdatasync()s: run on tmpfs
 * when there is one and TMPDIR does not say otherwise (the files are as real).
 */
/* ------------------------------------------------------------------ block methods */

/* A syslog-like message i (so that blocks compress), its memory in r->mem. */
static void
gen_text(uint64_t *s, struct ref *r, uint64_t id, int64_t recv)
{
	char	*p;
	int	 n;

	memset(r, 0, sizeof(*r));
	assert_non_null(r->mem = malloc(256));
	p = (char *)r->mem;
	n = snprintf(p, 256, "web%uAccepted password for user%u from 10.0.%u.%u port %u ssh2",
	    (unsigned)(t_rnd(s) % 7), (unsigned)(t_rnd(s) % 50), (unsigned)(t_rnd(s) % 256),
	    (unsigned)(t_rnd(s) % 256), (unsigned)(1024 + t_rnd(s) % 60000));
	r->m.host = (struct lb_slice){ (const uint8_t *)p, 4 };
	r->m.program = (struct lb_slice){ (const uint8_t *)"sshd", 4 };
	r->m.message = (struct lb_slice){ (const uint8_t *)p + 4, (size_t)n - 4 };
	r->m.id = id;
	r->m.received = recv;
	r->m.timestamp = recv - 1000;
	r->m.facility = 4;
	r->m.severity = 6;
	r->m.flags = LB_MSG_RFC3164;
}

/*
 * Walks the blocks of messages m[0..len): counts blocks of each method in per[3] and checks
 * that every compressed payload decodes to its raw length with the reference decoders (zlib's
 * inflate, libzstd's one-shot decompress), independent of lb_block.c. Returns the blocks seen.
 */
static size_t
walk_methods(const uint8_t *m, size_t len, size_t per[8], uint8_t *order, size_t max)
{
	size_t	 off = LB_FHDR_SIZE, nb = 0;

	for (int i = 0; i < 8; i++)
		per[i] = 0;
	while (off + LB_BHDR_SIZE <= len) {
		const uint8_t	*h = m + off, *p = h + LB_BHDR_SIZE;
		uint32_t	 raw = lb_get32(h + LB_BHDR_RAW_LEN);
		uint32_t	 comp = lb_get32(h + LB_BHDR_COMP_LEN);
		uint8_t		*out, meth = h[LB_BHDR_METHOD];

		assert_true(meth <= LB_BLK_TPL);
		assert_true(off + LB_BHDR_SIZE + comp <= len);
		assert_non_null(out = malloc(raw));
		if (meth == LB_BLK_DEFLATE) {
			z_stream	 z;

			memset(&z, 0, sizeof(z));
			assert_int_equal(inflateInit2(&z, -15), Z_OK);
			z.next_in = (Bytef *)(uintptr_t)p;
			z.avail_in = comp;
			z.next_out = out;
			z.avail_out = raw;
			assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
			assert_int_equal(z.total_out, raw);
			inflateEnd(&z);
		} else if (meth == LB_BLK_ZSTD) {
			assert_true(ZSTD_getFrameContentSize(p, comp) == raw);
			assert_int_equal(ZSTD_decompress(out, raw, p, comp), raw);
		} else if (meth == LB_BLK_STORED) {
			assert_int_equal(comp, raw);
		}	/* columns, templates: lb_block.c's own (the gets check them) */
		free(out);
		per[meth]++;
		if (nb < max)
			order[nb] = meth;
		nb++;
		off += LB_BHDR_SIZE + comp;
	}
	assert_int_equal(off, len);
	return (nb);
}

/*
 * A day file written first with DEFLATE (the kept code path: what logbox wrote before zstd),
 * then with zstd in the same session, then templates after a reopen: readers and writers read
 * every message of every kind of block, verify accepts the file, and the payloads are what zlib
 * and libzstd themselves decode.
 */
static void
t_mixed_methods(void **state)
{
	char			 dir[256], path[512], why[256];
	struct lb_msgfile	*mf, *rd;
	struct ref		*refs;
	size_t			 n = 9000, per[8], nb;
	uint8_t			*buf, order[64];
	size_t			 len;
	uint64_t		 s = 77;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	for (size_t i = 0; i < n; i++)
		gen_text(&s, &refs[i], 100 + i, 5000000 + 13 * (int64_t)i);
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 100, &mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_DEFLATE));
	assert_int_equal(lb_msgfile_set_method(mf, 7), EINVAL);
	for (size_t i = 0; i < 3000; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_ZSTD));
	for (size_t i = 3000; i < 6000; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_commit(mf, 1));
	lb_msgfile_close(mf);
	/* A reader set to write is refused. */
	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &rd));
	assert_int_equal(lb_msgfile_set_method(rd, LB_BLK_DEFLATE), EINVAL);
	lb_msgfile_close(rd);
	/* Reopened: the default is templates; the last ones stay in the WAL. */
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 100, &mf));
	for (size_t i = 6000; i < n; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_commit(mf, 1));
	check_all(mf, refs, 100, n, 500, &s);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));

	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
	buf = t_read_file(path, &len);
	nb = walk_methods(buf, len, per, order, sizeof(order));
	assert_true(per[LB_BLK_DEFLATE] >= 3 && per[LB_BLK_ZSTD] >= 3 && per[LB_BLK_TPL] >= 3);
	assert_int_equal(per[LB_BLK_STORED], 0);
	assert_int_equal(per[LB_BLK_COLS], 0);
	/* DEFLATE blocks first, then zstd, then templates (the default). */
	for (size_t i = 1; i < nb && i < sizeof(order); i++)
		assert_true(order[i] >= order[i - 1]);
	free(buf);

	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &rd));
	check_all(rd, refs, 100, n, 2000, &s);
	assert_ok(lb_msgfile_verify(rd, why, sizeof(why)));
	lb_msgfile_close(rd);
	lb_msgfile_close(mf);
	free_refs(refs, n);
	t_rmtree(dir);
}

/* One block (header h from a sound file, with method, payload p[0..comp)) and the WAL w. */
static void
put_one_block(const char *dir, const uint8_t *fh, const uint8_t *hdr, unsigned method,
    const uint8_t *p, size_t comp, const uint8_t *w, size_t wlen)
{
	uint8_t	*f;

	assert_non_null(f = malloc(LB_FHDR_SIZE + LB_BHDR_SIZE + comp));
	memcpy(f, fh, LB_FHDR_SIZE);
	memcpy(f + LB_FHDR_SIZE, hdr, LB_BHDR_SIZE);
	memcpy(f + LB_FHDR_SIZE + LB_BHDR_SIZE, p, comp);
	f[LB_FHDR_SIZE + LB_BHDR_METHOD] = (uint8_t)method;
	lb_put32(f + LB_FHDR_SIZE + LB_BHDR_COMP_LEN, (uint32_t)comp);
	lb_put32(f + LB_FHDR_SIZE + LB_BHDR_PAYLOAD_CRC, lb_crc32(p, comp));
	lb_put32(f + LB_FHDR_SIZE + LB_BHDR_CRC, lb_crc32(f + LB_FHDR_SIZE, LB_BHDR_CRC));
	write_file(dir, LB_FILE_MESSAGES, f, LB_FHDR_SIZE + LB_BHDR_SIZE + comp);
	write_file(dir, LB_FILE_WAL, w, wlen);
	free(f);
}

/*
 * Opens dir read-only and gets every id of refs: 0 means every one was served and equal,
 * LB_ECORRUPT that every one was refused (mixed results fail the test). verify must agree.
 */
static int
read_block(const char *dir, const struct ref *refs, size_t n, int *vrc, char *why, size_t wl)
{
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	int			 rc, all = -1;

	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &mf));
	for (size_t i = 0; i < n; i++) {
		rc = lb_msgfile_get(mf, refs[i].m.id, &m);
		if (rc == 0)
			assert_msg(&m, &refs[i].m);
		else
			assert_int_equal(rc, LB_ECORRUPT);
		assert_true(all == -1 || all == rc);
		all = rc;
	}
	*vrc = lb_msgfile_verify(mf, why, wl);
	lb_msgfile_close(mf);
	return (all);
}

/* A zstd frame of src[0..len) made with libzstd itself: content size and checksum as chosen. */
static size_t
zframe(const uint8_t *src, size_t len, uint8_t *dst, size_t cap, int fcs, int sum)
{
	ZSTD_CCtx	*c;
	size_t		 r;

	assert_non_null(c = ZSTD_createCCtx());
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3)));
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, fcs)));
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, sum)));
	r = ZSTD_compress2(c, dst, cap, src, len);
	assert_false(ZSTD_isError(r));
	ZSTD_freeCCtx(c);
	return (r);
}

/*
 * A block's payload made by the reference encoders (zlib's raw deflate, as any DEFLATE writer
 * before zstd; libzstd) reads back; every zstd payload that breaks FORMAT.md §3.2 (a frame
 * claiming more than raw_len, no content size, no checksum, bytes after the frame, two
 * frames, cut short, an unknown method) is LB_ECORRUPT and verify reports it; a byte of a
 * zstd payload changed is never served: with its CRC it is refused by the CRC, and with the
 * CRC made to match it is refused by the decoder or decodes to the very same records.
 */
static void
t_zstd_payload(void **state)
{
	char			 dir[256], path[512], why[256];
	struct lb_msgfile	*mf;
	struct ref		 refs[40];
	uint8_t			*mfile, *wal, *raw, *big, fh[LB_FHDR_SIZE], hdr[LB_BHDR_SIZE];
	uint8_t			 z[8192], z2[8192];
	size_t			 mlen, wlen, rlen, zl, zl2, refused = 0, flips = 0;
	uint64_t		 s = 3;
	int			 vrc, rc;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	for (size_t i = 0; i < 40; i++)
		gen_text(&s, &refs[i], 7 + i, 1000000 + 10 * (int64_t)i);
	/* The raw records: a block the writer stores as is. */
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 7, &mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_STORED));
	for (size_t i = 0; i < 40; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	lb_msgfile_close(mf);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
	mfile = t_read_file(path, &mlen);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_WAL);
	wal = t_read_file(path, &wlen);
	memcpy(fh, mfile, LB_FHDR_SIZE);
	memcpy(hdr, mfile + LB_FHDR_SIZE, LB_BHDR_SIZE);
	assert_int_equal(hdr[LB_BHDR_METHOD], LB_BLK_STORED);
	rlen = lb_get32(hdr + LB_BHDR_RAW_LEN);
	assert_int_equal(mlen, LB_FHDR_SIZE + LB_BHDR_SIZE + rlen);
	raw = mfile + LB_FHDR_SIZE + LB_BHDR_SIZE;
	assert_true(rlen < sizeof(z) / 2);

	/* zlib's raw DEFLATE (an old writer's format): read. */
	{
		z_stream	 d;

		memset(&d, 0, sizeof(d));
		assert_int_equal(deflateInit2(&d, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
		d.next_in = raw;
		d.avail_in = (uInt)rlen;
		d.next_out = z;
		d.avail_out = sizeof(z);
		assert_int_equal(deflate(&d, Z_FINISH), Z_STREAM_END);
		zl = d.total_out;
		deflateEnd(&d);
		assert_true(zl < rlen);
		put_one_block(dir, fh, hdr, LB_BLK_DEFLATE, z, zl, wal, wlen);
		assert_ok(read_block(dir, refs, 40, &vrc, why, sizeof(why)));
		assert_ok(vrc);
		/* The same stream marked zstd is not a zstd frame. */
		put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z, zl, wal, wlen);
		assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
		assert_int_equal(vrc, LB_ECORRUPT);
	}

	/* libzstd's frame with content size and checksum: read. */
	zl = zframe(raw, rlen, z, sizeof(z), 1, 1);
	assert_true(zl < rlen);
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z, zl, wal, wlen);
	assert_ok(read_block(dir, refs, 40, &vrc, why, sizeof(why)));
	assert_ok(vrc);
	/* Marked DEFLATE, it does not inflate. */
	put_one_block(dir, fh, hdr, LB_BLK_DEFLATE, z, zl, wal, wlen);
	assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);

	/* A frame claiming (and holding) more than raw_len: refused, nothing served. */
	assert_non_null(big = malloc(rlen + 64));
	memcpy(big, raw, rlen);
	memset(big + rlen, 'x', 64);
	zl2 = zframe(big, rlen + 64, z2, sizeof(z2), 1, 1);
	assert_true(zl2 < rlen);
	assert_true(ZSTD_getFrameContentSize(z2, zl2) == rlen + 64);
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z2, zl2, wal, wlen);
	assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);
	assert_non_null(strstr(why, "does not decompress"));
	/* ... and the same records claimed shorter (raw_len - 1 of them): refused as well. */
	zl2 = zframe(raw, rlen - 1, z2, sizeof(z2), 1, 1);
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z2, zl2, wal, wlen);
	assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
	free(big);

	/* No content size; no checksum: refused. */
	zl2 = zframe(raw, rlen, z2, sizeof(z2), 0, 1);
	assert_true(ZSTD_getFrameContentSize(z2, zl2) == ZSTD_CONTENTSIZE_UNKNOWN);
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z2, zl2, wal, wlen);
	assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);
	zl2 = zframe(raw, rlen, z2, sizeof(z2), 1, 0);
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z2, zl2, wal, wlen);
	assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);

	/* A byte after the frame; two frames of the two halves; the frame cut short. */
	memcpy(z2, z, zl);
	z2[zl] = 0;
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z2, zl + 1, wal, wlen);
	assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
	zl2 = zframe(raw, rlen / 2, z2, sizeof(z2), 1, 1);
	zl2 += zframe(raw + rlen / 2, rlen - rlen / 2, z2 + zl2, sizeof(z2) - zl2, 1, 1);
	if (zl2 < rlen) {
		put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z2, zl2, wal, wlen);
		assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
		assert_int_equal(vrc, LB_ECORRUPT);
	}
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z, zl - 1, wal, wlen);
	assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);

	/* A method no reader knows: the header is unsound, verify says so. */
	put_one_block(dir, fh, hdr, LB_BLK_TPL + 1, z, zl, wal, wlen);
	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &mf));
	{
		struct lb_msg	 m;

		assert_int_not_equal(lb_msgfile_get(mf, 7, &m), 0);
	}
	assert_int_equal(lb_msgfile_verify(mf, why, sizeof(why)), LB_ECORRUPT);
	assert_non_null(strstr(why, "bad block header"));
	lb_msgfile_close(mf);

	/* Every byte of the zstd payload changed. */
	for (size_t pos = 0; pos < zl; pos++) {
		uint8_t	 save = z[pos], *f;

		/* The CRC of the sound frame kept: the damage a disk does. */
		put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z, zl, wal, wlen);
		snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
		f = t_read_file(path, &mlen);
		f[LB_FHDR_SIZE + LB_BHDR_SIZE + pos] ^= (uint8_t)(1 + t_rnd(&s) % 255);
		write_file(dir, LB_FILE_MESSAGES, f, mlen);
		free(f);
		assert_int_equal(read_block(dir, refs, 40, &vrc, why, sizeof(why)), LB_ECORRUPT);
		assert_int_equal(vrc, LB_ECORRUPT);
		assert_non_null(strstr(why, "payload checksum mismatch"));
		/* The CRC made to match: the decoder refuses it, or it is the same records. */
		z[pos] ^= (uint8_t)(1 + t_rnd(&s) % 255);
		put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z, zl, wal, wlen);
		rc = read_block(dir, refs, 40, &vrc, why, sizeof(why));
		assert_true(rc == LB_ECORRUPT || rc == 0);
		assert_int_equal(vrc, rc);
		refused += rc == LB_ECORRUPT;
		flips++;
		z[pos] = save;
	}
	/* Only a flip in what the decoder may ignore (such as the window size) reads. */
	assert_true(refused >= flips - flips / 10);
	for (size_t i = 0; i < 40; i++)
		free(refs[i].mem);
	free(mfile);
	free(wal);
	t_rmtree(dir);
}

/*
 * Columns blocks (LB_BLK_COLS): random messages of every shape (binary, multi-line, empty and
 * LB_MSG_MAX-long fields, peers) written as columns, after DEFLATE and zstd blocks in the same
 * file, read back exactly by a writer after reopening and by a reader, verified.
 */
static void
t_cols_roundtrip(void **state)
{
	char			 dir[256], path[512], why[256];
	struct lb_msgfile	*mf, *rd;
	struct ref		*refs;
	size_t			 n = 2500, per[8], len;
	uint8_t			*buf, order[256];
	uint64_t		 s = 91;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	for (size_t i = 0; i < n; i++) {
		if (i % 3 == 0)
			gen_text(&s, &refs[i], 1 + i, 1000 + 3 * (int64_t)i);
		else
			gen(&s, &refs[i], 1 + i, 1000 + 3 * (int64_t)i, i == 1700, 0);
		if (i % 5 == 0)
			refs[i].m.peer = (struct lb_slice){ (const uint8_t *)"2001:db8::1", 11 };
	}
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 1, &mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_DEFLATE));
	for (size_t i = 0; i < 300; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_ZSTD));
	for (size_t i = 300; i < 600; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_COLS));
	for (size_t i = 600; i < n; i++) {
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
		if (i % 97 == 0)
			assert_ok(lb_msgfile_seal(mf));	/* small blocks too */
	}
	assert_ok(lb_msgfile_commit(mf, 1));
	check_all(mf, refs, 1, n, 500, &s);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);

	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
	buf = t_read_file(path, &len);
	(void)walk_methods(buf, len, per, order, sizeof(order));
	assert_true(per[LB_BLK_DEFLATE] >= 1 && per[LB_BLK_ZSTD] >= 1 && per[LB_BLK_COLS] >= 10);
	free(buf);

	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &rd));
	check_all(rd, refs, 1, n, 1000, &s);
	assert_ok(lb_msgfile_verify(rd, why, sizeof(why)));
	lb_msgfile_close(rd);
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 1, &mf));
	check_all(mf, refs, 1, n, 100, &s);
	lb_msgfile_close(mf);
	free_refs(refs, n);
	t_rmtree(dir);
}

/*
 * A columns block damaged: every byte of its payload changed, with the payload CRC as it was
 * (refused by the CRC) and with the CRC made to match (refused by the stream table, a zstd
 * frame's rules or checksum, the rebuild, or the CRC of the rebuilt records; never served
 * different). Also a payload cut short and one with a byte more.
 */
static void
t_cols_damage(void **state)
{
	char			 dir[256], path[512], why[256];
	struct lb_msgfile	*mf;
	struct ref		 refs[60];
	uint8_t			*mfile, *wal, *z, fh[LB_FHDR_SIZE], hdr[LB_BHDR_SIZE];
	size_t			 mlen, wlen, zl, refused = 0;
	uint64_t		 s = 8;
	int			 vrc, rc;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	for (size_t i = 0; i < 60; i++) {
		gen_text(&s, &refs[i], 7 + i, 1000000 + 10 * (int64_t)i);
		if (i % 4 == 1)
			refs[i].m.peer = (struct lb_slice){ (const uint8_t *)"10.0.0.7", 8 };
	}
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 7, &mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_COLS));
	for (size_t i = 0; i < 60; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	lb_msgfile_close(mf);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
	mfile = t_read_file(path, &mlen);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_WAL);
	wal = t_read_file(path, &wlen);
	memcpy(fh, mfile, LB_FHDR_SIZE);
	memcpy(hdr, mfile + LB_FHDR_SIZE, LB_BHDR_SIZE);
	assert_int_equal(hdr[LB_BHDR_METHOD], LB_BLK_COLS);
	zl = lb_get32(hdr + LB_BHDR_COMP_LEN);
	assert_int_equal(mlen, LB_FHDR_SIZE + LB_BHDR_SIZE + zl);
	assert_non_null(z = malloc(zl + 1));
	memcpy(z, mfile + LB_FHDR_SIZE + LB_BHDR_SIZE, zl);
	assert_ok(read_block(dir, refs, 60, &vrc, why, sizeof(why)));
	assert_ok(vrc);

	put_one_block(dir, fh, hdr, LB_BLK_COLS, z, zl - 1, wal, wlen);
	assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);
	z[zl] = 0;
	put_one_block(dir, fh, hdr, LB_BLK_COLS, z, zl + 1, wal, wlen);
	assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);
	/* The same payload read as one zstd frame is not one. */
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z, zl, wal, wlen);
	assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);

	for (size_t pos = 0; pos < zl; pos++) {
		uint8_t	 save = z[pos], *f;

		put_one_block(dir, fh, hdr, LB_BLK_COLS, z, zl, wal, wlen);
		snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
		f = t_read_file(path, &mlen);
		f[LB_FHDR_SIZE + LB_BHDR_SIZE + pos] ^= (uint8_t)(1 + t_rnd(&s) % 255);
		write_file(dir, LB_FILE_MESSAGES, f, mlen);
		free(f);
		assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);
		assert_non_null(strstr(why, "payload checksum mismatch"));
		z[pos] ^= (uint8_t)(1 + t_rnd(&s) % 255);
		put_one_block(dir, fh, hdr, LB_BLK_COLS, z, zl, wal, wlen);
		rc = read_block(dir, refs, 60, &vrc, why, sizeof(why));
		assert_true(rc == LB_ECORRUPT || rc == 0);
		assert_int_equal(vrc, rc);
		refused += rc == LB_ECORRUPT;
		z[pos] = save;
	}
	assert_true(refused >= zl - zl / 10);
	for (size_t i = 0; i < 60; i++)
		free(refs[i].mem);
	free(z);
	free(mfile);
	free(wal);
	t_rmtree(dir);
}

/*
 * FORMAT.md §3.2's columns example byte for byte: the message of §3.4 eight times (ids 7..14,
 * all received at 1000000), every stream stored. It reads back as those eight messages, and
 * the same block with a code past the dictionary, or one stream byte short, is refused.
 */
static void
t_cols_golden(void **state)
{
	static const uint8_t	 rec1[] = {	/* the first record (§3.4 without the id) */
		0x80, 0x89, 0x7a, 0xcf, 0x0f, 0x77, 0x04, 0x06, 0x04,
		0x04, 'w', 'e', 'b', '1', 0x04, 's', 's', 'h', 'd', 0x02, '4', '2', 0x00, 0x00,
		0x04, 'h', 'i', 0x00, '\n',
	};
	static const uint8_t	 table[] = {
		0x00, 0x22, 0x00, 0x18, 0x00, 0x08, 0x00, 0x08, 0x00, 0x08, 0x00, 0x08,
		0x00, 0x00, 0x00, 0x0e, 0x00, 0x08, 0x00, 0x08, 0x00, 0x20,
	};
	static const uint8_t	 dict[] = {
		0x04, 'w', 'e', 'b', '1', 0x04, 's', 's', 'h', 'd', 0x02, '4', '2', 0x00,
	};
	char		 dir[256], why[256];
	struct ref	 refs[8];
	uint8_t		 raw[218], pay[179], fh[LB_FHDR_SIZE], wal[LB_FHDR_SIZE], hdr[LB_BHDR_SIZE];
	size_t		 r = 0, p = 0;
	int		 vrc;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	memcpy(raw, rec1, sizeof(rec1));
	r = sizeof(rec1);
	for (int i = 1; i < 8; i++) {	/* received difference 0: 00 for 80 89 7a */
		raw[r++] = 0x00;
		memcpy(raw + r, rec1 + 3, sizeof(rec1) - 3);
		r += sizeof(rec1) - 3;
	}
	assert_int_equal(r, sizeof(raw));
	pay[p++] = 0x08;				/* n */
	lb_put32(pay + p, lb_crc32(raw, sizeof(raw)));	/* raw_crc */
	p += 4;
	memcpy(pay + p, table, sizeof(table));
	p += sizeof(table);
	memcpy(pay + p, rec1, 6);			/* time */
	p += 6;
	for (int i = 1; i < 8; i++) {
		memcpy(pay + p, "\x00\xcf\x0f\x77", 4);
		p += 4;
	}
	for (int i = 0; i < 8; i++) {			/* meta */
		memcpy(pay + p, "\x04\x06\x04", 3);
		p += 3;
	}
	memset(pay + p, 0, 32);				/* host, program, pid, msgid codes */
	p += 32;
	memcpy(pay + p, dict, sizeof(dict));		/* peer: empty; dict */
	p += sizeof(dict);
	memset(pay + p, 0x00, 8);			/* sd */
	p += 8;
	memset(pay + p, 0x04, 8);			/* blen */
	p += 8;
	for (int i = 0; i < 8; i++) {			/* body */
		memcpy(pay + p, "hi\0\n", 4);
		p += 4;
	}
	assert_int_equal(p, sizeof(pay));

	for (int i = 0; i < 8; i++) {
		example_msg(&refs[i].m);
		refs[i].m.id = 7 + (uint64_t)i;
		refs[i].mem = NULL;
	}
	memset(fh, 0, sizeof(fh));
	put_fhdr(fh, LB_MSGF_MAGIC);
	memset(wal, 0, sizeof(wal));
	put_fhdr(wal, LB_WAL_MAGIC);
	memset(hdr, 0, sizeof(hdr));
	lb_put32(hdr + LB_BHDR_MAGIC, LB_BLK_MAGIC);
	lb_put32(hdr + LB_BHDR_COUNT, 8);
	lb_put64(hdr + LB_BHDR_FIRST_ID, 7);
	lb_put64(hdr + LB_BHDR_TMIN, 1000000);
	lb_put64(hdr + LB_BHDR_TMAX, 1000000);
	lb_put32(hdr + LB_BHDR_RAW_LEN, sizeof(raw));
	put_one_block(dir, fh, hdr, LB_BLK_COLS, pay, sizeof(pay), wal, sizeof(wal));
	assert_ok(read_block(dir, refs, 8, &vrc, why, sizeof(why)));
	assert_ok(vrc);

	/* The third host code 2: past the one value met so far and the next new one. */
	pay[1 + 4 + sizeof(table) + 34 + 24 + 2] = 0x02;
	put_one_block(dir, fh, hdr, LB_BLK_COLS, pay, sizeof(pay), wal, sizeof(wal));
	assert_int_equal(read_block(dir, refs, 8, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);
	pay[1 + 4 + sizeof(table) + 34 + 24 + 2] = 0x00;
	/* The body stream said one byte shorter (and the payload cut to match). */
	pay[1 + 4 + sizeof(table) - 1] = 0x1f;
	put_one_block(dir, fh, hdr, LB_BLK_COLS, pay, sizeof(pay) - 1, wal, sizeof(wal));
	assert_int_equal(read_block(dir, refs, 8, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);
	t_rmtree(dir);
}

/* ------------------------------------------------------------ templates blocks (method 4) */

/* Pieces a templates body is made of: every edge of the variable rules, and plain text. */
static const char *const tpl_piece[] = {
	"0", "00", "007", "42", "-5", "+7", "-0", "3.14", "1e10", "9999999999999999999",
	"10000000000000000000", "18446744073709551615", "99999999999999999999999",
	"0000000000000000000000", "01234567890123456789012", "1.2.3.4", "1.2.3.999", "01.2.3.4",
	"1.02.3.4", "255.255.255.255", "256.1.1.1", "1.2.3.4.5", "1.2.3.4.", "10.0.0.1:22",
	"x1.2.3.4", "1.2.3.4x", "1.2.3", "1..2.3.4", "deadbeef", "deadbeef01", "DEADBEEF01",
	"0a1b2c", "a1b2c", "abcdef", "123456", "0x1f2e3d4c", "fa1", "0a1b2c3", "ffffffffffffffff0",
	"deadbeef01g", "gdeadbeef01", "\x11", "\x12", "\x13", "\x14", "\x15", "\x15\x11", "\x10",
	"\x16", " ", ".", "-", ":", "=", "user", "port", "failed", "cafe", "\xc3\x28", "\xff\xfe",
	"\xe2\x82\xac", "\t", "\n",
};
#define NPIECE	(sizeof(tpl_piece) / sizeof(tpl_piece[0]))

/* A body of len bytes or a little less, of pieces, random bytes of the variable alphabets, NULs. */
static size_t
tpl_body(uint64_t *s, uint8_t *p, size_t len)
{
	static const char alpha[] = "0123456789abcdef.:- x\x11\x15";
	size_t	 o = 0;

	while (o < len) {
		size_t	 k;

		switch (t_rnd(s) % 8) {
		case 0:
			p[o++] = (uint8_t)t_rnd(s);
			break;
		case 1:
			p[o++] = (uint8_t)alpha[t_rnd(s) % (sizeof(alpha) - 1)];
			break;
		case 2:
			p[o++] = 0;
			break;
		default: {
			const char	*x = tpl_piece[t_rnd(s) % NPIECE];

			k = strlen(x);
			if (k > len - o)
				return (o);
			memcpy(p + o, x, k);
			o += k;
			break;
		}
		}
	}
	return (o);
}

/* Encodes bodies b[0..n) as one block's template streams and decodes them again: identical. */
static void
tpl_block_identity(uint8_t **b, const size_t *bl, size_t n)
{
	struct lb_tpl	*te = NULL, *td = NULL;
	struct bbuf	 st[NTSTREAM];
	struct rs	 rs[NTSTREAM];
	uint8_t		*out;
	size_t		 len, cap = 0;

	memset(st, 0, sizeof(st));
	for (size_t i = 0; i < n; i++)
		cap = bl[i] > cap ? bl[i] : cap;
	assert_non_null(out = malloc(cap + LB_VARINT_MAX + 8));
	assert_ok(lb_tpl_begin(&te));
	for (size_t i = 0; i < n; i++)
		assert_ok(lb_tpl_put(te, b[i], bl[i], st));
	for (int k = 0; k < NTSTREAM; k++)
		rs[k] = (struct rs){ st[k].p, st[k].len, 0 };
	assert_ok(lb_tpl_dbegin(&td, n));
	for (size_t i = 0; i < n; i++) {
		uint8_t		 v[LB_VARINT_MAX];
		size_t		 vk = lb_varint_put(v, bl[i]);

		/* Exactly the room it needs, or some more. */
		assert_ok(lb_tpl_body(td, rs, out, vk + bl[i] + (i % 2) * 7, &len));
		assert_int_equal(len, vk + bl[i]);
		assert_memory_equal(out, v, vk);
		assert_memory_equal(out + vk, b[i], bl[i]);
	}
	for (int k = 0; k < NTSTREAM; k++) {
		assert_int_equal(rs[k].at, rs[k].len);
		free(st[k].p);
	}
	/* The table is reused block after block. */
	memset(st, 0, sizeof(st));
	assert_ok(lb_tpl_begin(&te));
	assert_ok(lb_tpl_put(te, b[0], bl[0], st));
	for (int k = 0; k < NTSTREAM; k++)
		free(st[k].p);
	lb_tpl_free(te);
	lb_tpl_free(td);
	free(out);
}

/*
 * The template split is exact: random bodies of every kind (pieces at every edge of the
 * variable rules, placeholder and escape bytes, NULs, invalid UTF-8, random bytes, empty,
 * LB_MSG_MAX long) come back byte for byte from their templates and variables, every stream
 * used up. With LOGBOX_TPL_CORPORA=DIR, so do the bodies (whole lines) of the first 50 MB of
 * DIR/{synth,lhlike,long4k,gencorpus}.log.
 */
static void
t_tpl_identity(void **state)
{
	static const char *const corp[] = { "synth", "lhlike", "long4k", "gencorpus" };
	uint8_t		*b[600];
	size_t		 bl[600];
	uint64_t	 s = 1234;
	const char	*dir = getenv("LOGBOX_TPL_CORPORA");

	(void)state;
	/*
	 * Bodies whose length varint is not the size their template's suggests: 100 escaped
	 * bytes (a 200-byte template, a 100-byte body), and long numbers in a short template
	 * (16 bytes, 144), each twice, so that the second meets the first's size.
	 */
	for (int i = 0; i < 6; i++) {
		size_t	 len = i % 3 == 0 ? 100 : i % 3 == 1 ? 144 : 18;

		assert_non_null(b[i] = malloc(len));
		for (size_t j = 0; j < len; j++)
			b[i][j] = i % 3 == 0 ? 0x11 : j % 18 == 17 ? ' ' : '9';
		bl[i] = len;
	}
	tpl_block_identity(b, bl, 6);
	for (int i = 0; i < 6; i++)
		free(b[i]);
	for (int blk = 0; blk < 300; blk++) {
		size_t	 n = 1 + t_rnd(&s) % 600;

		for (size_t i = 0; i < n; i++) {
			size_t	 want;

			switch (t_rnd(&s) % 10) {
			case 0:
				want = 0;
				break;
			case 1:
				want = t_rnd(&s) % 50 == 0 ? LB_MSG_MAX : 1000 + t_rnd(&s) % 4000;
				break;
			case 2:	/* a body seen before in this block */
				want = 0;
				if (i > 0) {
					size_t	 j = t_rnd(&s) % i;

					assert_non_null(b[i] = malloc(bl[j] + 1));
					memcpy(b[i], b[j], bl[j]);
					bl[i] = bl[j];
					continue;
				}
				break;
			default:
				want = t_rnd(&s) % 200;
				break;
			}
			assert_non_null(b[i] = malloc(want + 1));
			if (t_rnd(&s) % 8 == 0)
				fill(&s, b[i], bl[i] = want, (int)(t_rnd(&s) % 4));
			else
				bl[i] = tpl_body(&s, b[i], want);
		}
		tpl_block_identity(b, bl, n);
		for (size_t i = 0; i < n; i++)
			free(b[i]);
	}
	for (size_t c = 0; dir != NULL && c < sizeof(corp) / sizeof(corp[0]); c++) {
		char	 path[512], *line = NULL;
		size_t	 lcap = 0, total = 0, n = 0, lines = 0;
		ssize_t	 l;
		FILE	*f;

		snprintf(path, sizeof(path), "%s/%s.log", dir, corp[c]);
		assert_non_null(f = fopen(path, "rb"));
		while (total < 50000000 && (l = getline(&line, &lcap, f)) > 0) {
			assert_non_null(b[n] = malloc((size_t)l));
			memcpy(b[n], line, (size_t)l);
			bl[n++] = (size_t)l;
			total += (size_t)l;
			lines++;
			if (n == 400) {
				tpl_block_identity(b, bl, n);
				while (n > 0)
					free(b[--n]);
			}
		}
		if (n > 0)
			tpl_block_identity(b, bl, n);
		while (n > 0)
			free(b[--n]);
		print_message("%s: %zu lines, %zu bytes identical\n", corp[c], lines, total);
		free(line);
		fclose(f);
	}
}

/*
 * Templates blocks through the message file: random messages of every shape with bodies of
 * every kind, after DEFLATE, zstd and columns blocks in the same file, read back exactly by
 * the writer after reopening and by a reader, verified; the payloads are LB_BLK_TPL.
 */
static void
t_tpl_roundtrip(void **state)
{
	char			 dir[256], path[512], why[256];
	struct lb_msgfile	*mf, *rd;
	struct ref		*refs;
	size_t			 n = 3000, per[8], len, nb = 0, off;
	uint8_t			*buf;
	uint64_t		 s = 4242;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_non_null(refs = calloc(n, sizeof(*refs)));
	for (size_t i = 0; i < n; i++) {
		if (i % 3 == 0)
			gen_text(&s, &refs[i], 1 + i, 1000 + 3 * (int64_t)i);
		else
			gen(&s, &refs[i], 1 + i, 1000 + 3 * (int64_t)i, i == 1700, 0);
		if (i % 3 == 1) {	/* a body of template pieces */
			uint8_t	*p = (uint8_t *)(uintptr_t)refs[i].m.message.p;
			size_t	 want = refs[i].m.message.len;

			refs[i].m.message.len = tpl_body(&s, p, want);
		}
		if (i % 5 == 0)
			refs[i].m.peer = (struct lb_slice){ (const uint8_t *)"2001:db8::1", 11 };
	}
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 1, &mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_DEFLATE));
	for (size_t i = 0; i < 300; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_ZSTD));
	for (size_t i = 300; i < 600; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_COLS));
	for (size_t i = 600; i < 900; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_TPL));
	for (size_t i = 900; i < n; i++) {
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
		if (i % 89 == 0)
			assert_ok(lb_msgfile_seal(mf));	/* small blocks too */
	}
	assert_ok(lb_msgfile_commit(mf, 1));
	check_all(mf, refs, 1, n, 500, &s);
	assert_ok(lb_msgfile_verify(mf, why, sizeof(why)));
	lb_msgfile_close(mf);

	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
	buf = t_read_file(path, &len);
	memset(per, 0, sizeof(per));
	for (off = LB_FHDR_SIZE; off + LB_BHDR_SIZE <= len; nb++) {
		per[buf[off + LB_BHDR_METHOD] & 7]++;
		off += LB_BHDR_SIZE + lb_get32(buf + off + LB_BHDR_COMP_LEN);
	}
	assert_int_equal(off, len);
	assert_true(per[LB_BLK_DEFLATE] >= 1 && per[LB_BLK_ZSTD] >= 1 && per[LB_BLK_COLS] >= 1 &&
	    per[LB_BLK_TPL] >= 10);
	free(buf);

	assert_ok(lb_msgfile_open(dir, LB_RDONLY, 0, &rd));
	check_all(rd, refs, 1, n, 1000, &s);
	assert_ok(lb_msgfile_verify(rd, why, sizeof(why)));
	lb_msgfile_close(rd);
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 1, &mf));
	check_all(mf, refs, 1, n, 100, &s);
	lb_msgfile_close(mf);
	free_refs(refs, n);
	t_rmtree(dir);
}

/*
 * A templates block damaged: every byte of its payload changed, with the payload CRC as it
 * was (refused by the CRC) and made to match (refused by the stream table, a frame, the
 * rebuild or the CRC of the rebuilt records; never served different); cut short; a byte more.
 */
static void
t_tpl_damage(void **state)
{
	char			 dir[256], path[512], why[256];
	struct lb_msgfile	*mf;
	struct ref		 refs[60];
	uint8_t			*mfile, *wal, *z, fh[LB_FHDR_SIZE], hdr[LB_BHDR_SIZE];
	size_t			 mlen, wlen, zl, refused = 0;
	uint64_t		 s = 18;
	int			 vrc, rc;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	for (size_t i = 0; i < 60; i++) {
		gen_text(&s, &refs[i], 7 + i, 1000000 + 10 * (int64_t)i);
		if (i % 4 == 1)
			refs[i].m.peer = (struct lb_slice){ (const uint8_t *)"10.0.0.7", 8 };
		if (i % 6 == 2)	/* a hex word, a number with a leading zero, an escape */
			refs[i].m.message = (struct lb_slice){
			    (const uint8_t *)"session 0a1b2c3d4e opened by 007 \x11", 34 };
	}
	assert_ok(lb_msgfile_open(dir, LB_RDWR, 7, &mf));
	assert_ok(lb_msgfile_set_method(mf, LB_BLK_TPL));
	for (size_t i = 0; i < 60; i++)
		assert_ok(lb_msgfile_append(mf, &refs[i].m));
	assert_ok(lb_msgfile_seal(mf));
	lb_msgfile_close(mf);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
	mfile = t_read_file(path, &mlen);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_WAL);
	wal = t_read_file(path, &wlen);
	memcpy(fh, mfile, LB_FHDR_SIZE);
	memcpy(hdr, mfile + LB_FHDR_SIZE, LB_BHDR_SIZE);
	assert_int_equal(hdr[LB_BHDR_METHOD], LB_BLK_TPL);
	zl = lb_get32(hdr + LB_BHDR_COMP_LEN);
	assert_int_equal(mlen, LB_FHDR_SIZE + LB_BHDR_SIZE + zl);
	assert_non_null(z = malloc(zl + 1));
	memcpy(z, mfile + LB_FHDR_SIZE + LB_BHDR_SIZE, zl);
	assert_ok(read_block(dir, refs, 60, &vrc, why, sizeof(why)));
	assert_ok(vrc);

	put_one_block(dir, fh, hdr, LB_BLK_TPL, z, zl - 1, wal, wlen);
	assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);
	assert_int_equal(vrc, LB_ECORRUPT);
	z[zl] = 0;
	put_one_block(dir, fh, hdr, LB_BLK_TPL, z, zl + 1, wal, wlen);
	assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);
	/* The same payload read as a columns block or one zstd frame is neither. */
	put_one_block(dir, fh, hdr, LB_BLK_COLS, z, zl, wal, wlen);
	assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);
	put_one_block(dir, fh, hdr, LB_BLK_ZSTD, z, zl, wal, wlen);
	assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);

	for (size_t pos = 0; pos < zl; pos++) {
		uint8_t	 save = z[pos], *f;

		put_one_block(dir, fh, hdr, LB_BLK_TPL, z, zl, wal, wlen);
		snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_MESSAGES);
		f = t_read_file(path, &mlen);
		f[LB_FHDR_SIZE + LB_BHDR_SIZE + pos] ^= (uint8_t)(1 + t_rnd(&s) % 255);
		write_file(dir, LB_FILE_MESSAGES, f, mlen);
		free(f);
		assert_int_equal(read_block(dir, refs, 60, &vrc, why, sizeof(why)), LB_ECORRUPT);
		assert_non_null(strstr(why, "payload checksum mismatch"));
		z[pos] ^= (uint8_t)(1 + t_rnd(&s) % 255);
		put_one_block(dir, fh, hdr, LB_BLK_TPL, z, zl, wal, wlen);
		rc = read_block(dir, refs, 60, &vrc, why, sizeof(why));
		assert_true(rc == LB_ECORRUPT || rc == 0);
		assert_int_equal(vrc, rc);
		refused += rc == LB_ECORRUPT;
		z[pos] = save;
	}
	assert_true(refused >= zl - zl / 10);
	for (size_t i = 0; i < 60; i++)
		free(refs[i].mem);
	free(z);
	free(mfile);
	free(wal);
	t_rmtree(dir);
}

/*
 * FORMAT.md §3.2.1's templates example byte for byte: the message of §3.4 six times (ids 7..12,
 * all received at 1000000) with the bodies "n=42 ip 10.0.0.7", "n=7 ip 192.168.1.1",
 * "id 007 deadbeef01 \x11" and the same three again, every stream stored. The writer makes exactly this payload, and it
 * reads back as those messages. The same block with a template code past the table, a number
 * column cut short, a template with one placeholder fewer, a hex length past the body, or an
 * escape at a template's end is refused.
 */
static void
t_tpl_golden(void **state)
{
	static const uint8_t	 head[] = {	/* record 1 up to the body (§3.4 without the id) */
		0x80, 0x89, 0x7a, 0xcf, 0x0f, 0x77, 0x04, 0x06, 0x04,
		0x04, 'w', 'e', 'b', '1', 0x04, 's', 's', 'h', 'd', 0x02, '4', '2', 0x00, 0x00,
	};
	static const char *const body[3] = { "n=42 ip 10.0.0.7", "n=7 ip 192.168.1.1",
		"id 007 deadbeef01 \x11" };
	static const uint8_t	 table[] = {
		0x00, 0x1a, 0x00, 0x12, 0x00, 0x06, 0x00, 0x06, 0x00, 0x06, 0x00, 0x06,
		0x00, 0x00, 0x00, 0x0e, 0x00, 0x06, 0x00, 0x06, 0x00, 0x13, 0x00, 0x04,
		0x00, 0x04, 0x00, 0x10, 0x00, 0x0c,
	};
	static const uint8_t	 dict[] = {
		0x04, 'w', 'e', 'b', '1', 0x04, 's', 's', 'h', 'd', 0x02, '4', '2', 0x00,
	};
	static const uint8_t	 rest[] = {
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00,		/* sd */
		0x00, 0x00, 0x01, 0x00, 0x00, 0x01,		/* template codes */
		0x08, 'n', '=', 0x11, ' ', 'i', 'p', ' ', 0x13,	/* templates */
		0x09, 'i', 'd', ' ', 0x12, ' ', 0x14, ' ', 0x15, 0x11,
		0x2a, 0x07, 0x2a, 0x07,				/* numbers */
		0x03, 0x07, 0x03, 0x07,				/* with a leading zero */
		0x0a, 0x00, 0x00, 0x07, 0xc0, 0xa8, 0x01, 0x01,	/* IPv4 */
		0x0a, 0x00, 0x00, 0x07, 0xc0, 0xa8, 0x01, 0x01,
		0x0a, 0xde, 0xad, 0xbe, 0xef, 0x01,		/* hex */
		0x0a, 0xde, 0xad, 0xbe, 0xef, 0x01,
	};
	char		 dir[256], why[256];
	struct ref	 refs[6];
	struct lb_bcodec *c = NULL;
	uint8_t		 raw[300], pay[300], out[300], used, fh[LB_FHDR_SIZE], wal[LB_FHDR_SIZE];
	uint8_t		 hdr[LB_BHDR_SIZE], bad[300];
	size_t		 r = 0, p = 0, comp, tstart;
	int		 vrc;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	for (int i = 0; i < 6; i++) {
		size_t	 bl = strlen(body[i % 3]);

		if (i == 0) {
			memcpy(raw, head, sizeof(head));
			r = sizeof(head);
		} else {	/* received difference 0: 00 for 80 89 7a */
			raw[r++] = 0x00;
			memcpy(raw + r, head + 3, sizeof(head) - 3);
			r += sizeof(head) - 3;
		}
		raw[r++] = (uint8_t)bl;
		memcpy(raw + r, body[i % 3], bl);
		r += bl;
	}
	assert_int_equal(r, 24 + 5 * 22 + 6 + 2 * (16 + 18 + 19));
	assert_int_equal(r, 246);
	pay[p++] = 0x06;				/* n */
	lb_put32(pay + p, lb_crc32(raw, r));		/* raw_crc */
	p += 4;
	memcpy(pay + p, table, sizeof(table));
	p += sizeof(table);
	tstart = p;
	memcpy(pay + p, head, 6);			/* time */
	p += 6;
	for (int i = 1; i < 6; i++) {
		memcpy(pay + p, "\x00\xcf\x0f\x77", 4);
		p += 4;
	}
	for (int i = 0; i < 6; i++) {			/* meta */
		memcpy(pay + p, "\x04\x06\x04", 3);
		p += 3;
	}
	memset(pay + p, 0, 24);				/* host, program, pid, msgid codes */
	p += 24;
	memcpy(pay + p, dict, sizeof(dict));		/* peer: empty; dict */
	p += sizeof(dict);
	memcpy(pay + p, rest, sizeof(rest));
	p += sizeof(rest);
	assert_int_equal(p, 1 + 4 + sizeof(table) + 26 + 18 + 24 + 14 + sizeof(rest));
	assert_int_equal(p, 184);

	/* The writer's payload is exactly this one. */
	assert_ok(lb_block_compress(&c, LB_BLK_TPL, raw, r, out, &comp, &used));
	assert_int_equal(used, LB_BLK_TPL);
	assert_int_equal(comp, p);
	assert_memory_equal(out, pay, p);
	memset(out, 0, sizeof(out));
	assert_ok(lb_block_decompress(&c, LB_BLK_TPL, pay, p, out, r));
	assert_memory_equal(out, raw, r);
	lb_block_free(c);

	for (int i = 0; i < 6; i++) {
		example_msg(&refs[i].m);
		refs[i].m.id = 7 + (uint64_t)i;
		refs[i].m.message = (struct lb_slice){ (const uint8_t *)body[i % 3],
		    strlen(body[i % 3]) };
		refs[i].mem = NULL;
	}
	memset(fh, 0, sizeof(fh));
	put_fhdr(fh, LB_MSGF_MAGIC);
	memset(wal, 0, sizeof(wal));
	put_fhdr(wal, LB_WAL_MAGIC);
	memset(hdr, 0, sizeof(hdr));
	lb_put32(hdr + LB_BHDR_MAGIC, LB_BLK_MAGIC);
	lb_put32(hdr + LB_BHDR_COUNT, 6);
	lb_put64(hdr + LB_BHDR_FIRST_ID, 7);
	lb_put64(hdr + LB_BHDR_TMIN, 1000000);
	lb_put64(hdr + LB_BHDR_TMAX, 1000000);
	lb_put32(hdr + LB_BHDR_RAW_LEN, (uint32_t)r);
	put_one_block(dir, fh, hdr, LB_BLK_TPL, pay, p, wal, sizeof(wal));
	assert_ok(read_block(dir, refs, 6, &vrc, why, sizeof(why)));
	assert_ok(vrc);

#define REFUSED(buf, len) do {							\
	put_one_block(dir, fh, hdr, LB_BLK_TPL, buf, len, wal, sizeof(wal));	\
	assert_int_equal(read_block(dir, refs, 6, &vrc, why, sizeof(why)), LB_ECORRUPT); \
	assert_int_equal(vrc, LB_ECORRUPT);					\
} while (0)
	{
		size_t	 codes = tstart + 26 + 18 + 24 + 14 + 6;	/* the template codes */
		size_t	 tx = codes + 6, nums = tx + 19;

		/* The third message's template code 2: past the one met so far and the next. */
		memcpy(bad, pay, p);
		bad[codes + 2] = 0x02;
		REFUSED(bad, p);
		/* The second's code 1: a new template, but it is the third's (and then none is). */
		memcpy(bad, pay, p);
		bad[codes + 1] = 0x01;
		REFUSED(bad, p);
		/* The numbers column one byte short (42 42 7), the payload cut to match. */
		memcpy(bad, pay, p);
		bad[1 + 4 + 23] = 0x03;
		memmove(bad + nums + 1, bad + nums + 2, p - nums - 2);
		REFUSED(bad, p - 1);
		/* The first template's number placeholder made a literal 'x': numbers left over. */
		memcpy(bad, pay, p);
		bad[tx + 3] = 'x';
		REFUSED(bad, p);
		/* The hex length 10 made 127: past the hex column. */
		memcpy(bad, pay, p);
		assert_int_equal(bad[p - 6], 0x0a);
		bad[p - 6] = 0x7f;
		REFUSED(bad, p);
		/* The second template ending in an escape: "... \x15\x11" made "... \x15". */
		memcpy(bad, pay, p);
		bad[tx + 17] = ' ';
		bad[tx + 18] = 0x15;
		REFUSED(bad, p);
	}
#undef REFUSED
	t_rmtree(dir);
}

static int
on_tmpfs(void **state)
{
	struct stat	 st;

	(void)state;
	if (getenv("TMPDIR") == NULL && stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
	    access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 0);
	return (0);
}

T_MAIN_SETUP(on_tmpfs,
	cmocka_unit_test(t_golden),
	cmocka_unit_test(t_limits),
	cmocka_unit_test(t_peer),
	cmocka_unit_test(t_roundtrip),
	cmocka_unit_test(t_remote),
	cmocka_unit_test(t_reader_follows),
	cmocka_unit_test(t_middle_damage),
	cmocka_unit_test(t_refusals),
	cmocka_unit_test(t_crash_every_byte),
	cmocka_unit_test(t_crash_stale_wal),
	cmocka_unit_test(t_flip_every_byte),
	cmocka_unit_test(t_threaded),
	cmocka_unit_test(t_thread_write_error),
	cmocka_unit_test(t_enospc_recovers),
	cmocka_unit_test(t_mixed_methods),
	cmocka_unit_test(t_zstd_payload),
	cmocka_unit_test(t_cols_roundtrip),
	cmocka_unit_test(t_cols_damage),
	cmocka_unit_test(t_cols_golden),
	cmocka_unit_test(t_tpl_identity),
	cmocka_unit_test(t_tpl_roundtrip),
	cmocka_unit_test(t_tpl_damage),
	cmocka_unit_test(t_tpl_golden))
