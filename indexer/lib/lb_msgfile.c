/*
 * lb_msgfile.c — a day's message file: <daydir>/messages (sealed, compressed blocks appended
 * back to back: columns or zstd, DEFLATE in older files; the codec is lb_block.c's) and
 * <daydir>/messages.wal (the records of the block being filled).
 * It owns both files' bytes (FORMAT.md §3), crash recovery on open, the block index, reading
 * a message by id and the full check. It does not know days, the catalog or the index.
 *
 * The one idea: a message is in exactly one of two places, a sealed block (ids
 * [first_id, snext)) or the WAL (ids [snext, next)), and a WAL record is dropped only after the
 * block holding it is fdatasync()ed. Appends build the open block in memory and frame each
 * record for the WAL; lb_msgfile_commit() writes the frames with one write(2). A full block is
 * sealed with a plain write(2) (no fsync: that would cost a disk flush per 64 KiB); its WAL
 * records stay in the WAL ("stale") until a commit with sync has fdatasync()ed messages, which
 * then replaces the WAL by a fresh one holding only the records not yet in a written block
 * (written to messages.wal.tmp, fdatasync, rename). lb_msgfile_seal() seals, fdatasyncs and
 * truncates the WAL to its header. Recovery therefore keeps WAL records whose ids follow the
 * last sound block and drops those already sealed.
 *
 * Threads: a writer compresses in a second thread. When the open block is full, append hands
 * its records to a queue of QDEPTH blocks (waiting when the queue is full) and goes on with a
 * new open block; the compressor thread compresses the queued blocks in id order and appends
 * them to messages. The appender takes finished blocks back ("reap", at the next hand-off,
 * commit, get, seal or verify): only then do they join the block index and do their records'
 * WAL frames leave wal[]. Until then those frames are written to the WAL by commits like the
 * open block's, so a commit never waits for the thread and the rule above holds unchanged;
 * get serves queued ids from the queued records; seal and verify wait for the queue to drain;
 * close lets the thread write what is queued and joins it. A write the thread fails (ENOSPC,
 * EIO) is cut from messages (the blocks after it are not written either) and its error is
 * returned by the next append, commit, seal or verify, which also puts the failed block and
 * those after it back in the queue: the thread writes them again, in order, from the same
 * offset, and the call after a retry that worked goes on as if nothing had failed (a full disk
 * that gets space back needs no reopen). Their records stay in wal[] meanwhile, so commits
 * keep them durable in the WAL. The thread touches only the queued slots' records, its own
 * codec state and buffer, and messages past the last reaped block; the slot states are
 * handed over under one mutex.
 *
 * Readers never write. They index the block headers at open (pread of headers only) and
 * re-read the WAL by path whenever asked for an id past what they have seen; if the WAL's
 * records do not start where their blocks end, a block was sealed meanwhile: they scan the new
 * block headers and try again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "logbox.h"
#include "lb_block.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

#ifndef BLOCK_TARGET
#define BLOCK_TARGET	LB_BLOCK_RAW_TARGET	/* overridable only to measure */
#endif
#ifndef WRITE_METHOD
#ifndef WRITE_METHOD
#define WRITE_METHOD	LB_BLK_TPL	/* a writer's block method (lb_msgfile_set_method) */
#endif
#endif
#define WAL_READ_MAX	(256u << 20)	/* a WAL longer than this is not read (LB_ETOOBIG) */
#define REC_FIXED_MAX	64		/* record bytes beside the seven byte strings, at most */
#define RESYNC_CHUNK	(64 * 1024)
#define QDEPTH		4		/* full blocks waiting for or in the compressor thread */

/* Decoded records: a sealed block (the read cache) or the records past the sealed blocks. */
struct mblk {
	uint64_t	 first;		/* id of record 0 */
	uint32_t	 n;		/* records */
	uint32_t	 acap;		/* room in off[] and recv[] */
	uint32_t	*off;		/* offset in buf of record i's fields after the time */
	int64_t		*recv;		/* record i's receive time */
	uint8_t		*buf;		/* records (block encoding, or WAL bodies' tails) */
	size_t		 len;		/* bytes used in buf */
	size_t		 cap;		/* bytes allocated */
};

/*
 * A full block handed to the compressor thread. The appender fills it and sets state to
 * Q_QUEUED; the thread compresses and writes it, fills off/comp/rc and sets Q_DONE; the
 * appender takes the result (reap) and sets Q_FREE. state is read and written under mu; the
 * other fields belong to whoever the state says, and b is only read while queued.
 */
struct qslot {
	struct mblk	 b;		/* the block's records */
	int64_t		 tmin, tmax;
	size_t		 wend;		/* end of its records' frames in wal[] */
	int		 state;
	int		 rc;		/* the thread's result */
	uint64_t	 off;		/* where the thread wrote the block */
	uint32_t	 comp;		/* payload bytes written */
	uint8_t		 want;		/* the method asked for (set when queued) */
	uint8_t		 method;	/* the method written */
};

enum { Q_FREE, Q_QUEUED, Q_DONE };

/* A decoded sealed block kept for the next gets. */
struct mcache {
	struct mblk	 b;
	size_t		 idx;		/* its index in blk, or SIZE_MAX */
	uint64_t	 used;		/* LRU stamp */
};

#define MF_CACHE_READER	128	/* decoded blocks a reader keeps (a writer: 1) */

/* One entry of the block index. */
struct bent {
	uint64_t	 first;		/* first id */
	uint64_t	 off;		/* file offset of the block header */
	uint32_t	 count;		/* records */
	uint32_t	 comp;		/* payload bytes on disk */
	uint32_t	 raw;		/* payload bytes decoded */
	uint8_t		 bad;		/* ids here are damaged: LB_ECORRUPT */
};

struct lb_msgfile {
	int		 mode;		/* LB_RDONLY or LB_RDWR */
	int		 mfd;		/* messages */
	int		 wfd;		/* messages.wal (writer only; readers open it per refresh) */
	char		 dir[PATH_MAX];
	char		 mpath[PATH_MAX];
	char		 wpath[PATH_MAX];
	char		 tpath[PATH_MAX];	/* messages.wal.tmp */
	uint64_t	 first_id;	/* from the messages header */
	struct bent	*blk;		/* block index, ascending ids */
	size_t		 nblk, cblk;
	uint64_t	 snext;		/* one past the last sealed id */
	uint64_t	 mend;		/* end of the last sound block in messages */
	uint64_t	 sraw;		/* raw payload bytes of the sealed blocks */
	struct mcache	*cache;		/* decoded sealed blocks (LRU) */
	unsigned	 ncache;
	uint64_t	 cclock;	/* LRU clock for cache[].used */
	struct mblk	 tail;		/* ids [snext, next): open block / WAL records */
	uint64_t	 wsize;		/* reader: WAL bytes seen at the last refresh */
	/* writer */
	int64_t		 tmin, tmax, lastrecv;	/* of the open block */
	uint8_t		*wal;		/* WAL frames of the open block's records */
	size_t		 wlen, wcap;
	size_t		 wdone;		/* bytes of wal[] already written to the WAL file */
	uint64_t	 wbase;		/* WAL file offset of wal[0] */
	int		 wstale;	/* the WAL file holds records of sealed blocks */
	int		 mdirty;	/* messages has blocks not yet fdatasync()ed */
	uint8_t		 wmethod;	/* method of the blocks sealed from now on */
	struct lb_bcodec *rcodec;	/* the codec's scratch for reads */
	uint8_t		*zbuf;		/* a block as read: header + payload */
	size_t		 zcap;
	/* the compressor thread and its queue */
	struct qslot	 q[QDEPTH];
	unsigned	 qhead, nq;	/* appender: oldest slot not reaped, slots in use */
	uint64_t	 qraw;		/* raw bytes of the queued blocks */
	int		 terr;		/* sticky: a written block could not join the index */
	int		 thr_on;
	pthread_t	 thr;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv_work;	/* a slot was queued, or qstop set */
	pthread_cond_t	 cv_done;	/* a slot is done */
	int		 qstop;		/* under mu */
	int		 qfailed;	/* under mu: the thread's write error, until a requeue */
	atomic_int	 tfail;		/* qfailed is set (a lock-free hint for append) */
	/* thread only */
	unsigned	 qwork;		/* next slot to compress (under mu: requeue moves it back) */
	uint64_t	 woff;		/* where the next block goes in messages */
	int		 wcut;		/* a failed write could not be cut: cut before the next */
	struct lb_bcodec *wcodec;	/* the codec's scratch for writes */
	uint8_t		*tbuf;		/* a block as stored: header + payload */
	size_t		 tcap;
	/* a remote reader (lb_msgfile_open_src): blocks come from src, each checked by bsha */
	struct lb_msgsrc src;
	int		 remote;
	uint8_t		(*bsha)[32];	/* nblk SHA-256s of header + payload */
};

/* ------------------------------------------------------------------ small helpers */

static inline uint64_t
zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63));
}

static inline int64_t
unzz(uint64_t v)
{
	return ((int64_t)((v >> 1) ^ (0 - (v & 1))));
}

/* a - b and b + d modulo 2^64, so every int64 pair round-trips. */
static inline int64_t
tdiff(int64_t a, int64_t b)
{
	return ((int64_t)((uint64_t)a - (uint64_t)b));
}

static inline int64_t
tadd(int64_t b, int64_t d)
{
	return ((int64_t)((uint64_t)b + (uint64_t)d));
}

static int
mblk_reserve(struct mblk *b, size_t bytes, uint32_t recs)
{
	size_t	 c = b->acap;
	int	 rc;

	if ((rc = lb_grow(&b->buf, &b->cap, b->len + bytes, 1)) != 0)
		return (rc);
	if ((size_t)b->n + recs > c) {
		size_t	 nc = c ? c : 64;

		while (nc < (size_t)b->n + recs)
			nc *= 2;
		if (nc > UINT32_MAX)
			return (LB_ETOOBIG);
		if ((rc = lb_grow(&b->off, &c, nc, sizeof(*b->off))) != 0)
			return (rc);
		c = b->acap;
		if ((rc = lb_grow(&b->recv, &c, nc, sizeof(*b->recv))) != 0)
			return (rc);
		b->acap = (uint32_t)nc;
	}
	return (0);
}

static void
mblk_reset(struct mblk *b, uint64_t first)
{
	b->first = first;
	b->n = 0;
	b->len = 0;
}

static void
mblk_free(struct mblk *b)
{
	free(b->off);
	free(b->recv);
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

static int
fsize(int fd, uint64_t *size)
{
	struct stat	 st;

	if (fstat(fd, &st) == -1)
		return (errno);
	*size = (uint64_t)st.st_size;
	return (0);
}

/* ------------------------------------------------------------------ records */

/* Bytes rec_put() may write for m, at most. */
static size_t
rec_bound(const struct lb_msg *m)
{
	return (REC_FIXED_MAX + m->host.len + m->program.len + m->pid.len + m->msgid.len +
	    m->sd.len + m->message.len + m->peer.len);
}

static size_t
put_bytes(uint8_t *p, struct lb_slice s)
{
	size_t	 n = lb_varint_put(p, s.len);

	if (s.len > 0)
		memcpy(p + n, s.p, s.len);
	return (n + s.len);
}

/*
 * Writes the fields of m that follow the receive time (FORMAT.md §3 "Record"). The record's
 * LB_MSG_PEER flag says whether the peer follows the message: set exactly when it is not
 * empty, whatever m->flags says.
 */
static size_t
rec_put(uint8_t *p, const struct lb_msg *m)
{
	size_t		 n = 0;
	uint16_t	 flags = m->flags & ~LB_MSG_PEER;

	if (m->peer.len > 0)
		flags |= LB_MSG_PEER;
	n += lb_varint_put(p + n, zz(tdiff(m->timestamp, m->received)));
	n += lb_varint_put(p + n, zz(m->tzoff));
	p[n++] = m->facility;
	p[n++] = m->severity;
	n += lb_varint_put(p + n, flags);
	n += put_bytes(p + n, m->host);
	n += put_bytes(p + n, m->program);
	n += put_bytes(p + n, m->pid);
	n += put_bytes(p + n, m->msgid);
	n += put_bytes(p + n, m->sd);
	n += put_bytes(p + n, m->message);
	if (m->peer.len > 0)
		n += put_bytes(p + n, m->peer);
	return (n);
}

static int
get_bytes(const uint8_t *p, size_t len, size_t *i, size_t max, struct lb_slice *s)
{
	uint64_t	 v;
	size_t		 k;

	if ((k = lb_varint_get(p + *i, len - *i, &v)) == 0 || v > max || v > len - *i - k)
		return (LB_ECORRUPT);
	s->p = v > 0 ? p + *i + k : (const uint8_t *)"";
	s->len = (size_t)v;
	*i += k + (size_t)v;
	return (0);
}

/*
 * Decodes the fields after the receive time from p[0..len) into m (slices into p) and sets
 * *used. LB_ECORRUPT if they run past len or break a limit. A record without LB_MSG_PEER
 * (every record written before the flag existed) has an empty peer; the flag describes the
 * record, not the message, and is cleared from m->flags.
 */
static int
rec_get(const uint8_t *p, size_t len, int64_t recv, struct lb_msg *m, size_t *used)
{
	struct lb_msg	 t;
	uint64_t	 v;
	size_t		 i = 0, k;

	memset(&t, 0, sizeof(t));
	t.received = recv;
	if ((k = lb_varint_get(p, len, &v)) == 0)
		return (LB_ECORRUPT);
	t.timestamp = tadd(recv, unzz(v));
	i += k;
	if ((k = lb_varint_get(p + i, len - i, &v)) == 0 || unzz(v) < INT16_MIN ||
	    unzz(v) > INT16_MAX)
		return (LB_ECORRUPT);
	t.tzoff = (int16_t)unzz(v);
	i += k;
	if (len - i < 2)
		return (LB_ECORRUPT);
	t.facility = p[i++];
	t.severity = p[i++];
	if ((k = lb_varint_get(p + i, len - i, &v)) == 0 || v > UINT16_MAX)
		return (LB_ECORRUPT);
	t.flags = (uint16_t)v;
	i += k;
	if (get_bytes(p, len, &i, LB_FIELD_MAX, &t.host) != 0 ||
	    get_bytes(p, len, &i, LB_FIELD_MAX, &t.program) != 0 ||
	    get_bytes(p, len, &i, LB_FIELD_MAX, &t.pid) != 0 ||
	    get_bytes(p, len, &i, LB_FIELD_MAX, &t.msgid) != 0 ||
	    get_bytes(p, len, &i, LB_SD_MAX, &t.sd) != 0 ||
	    get_bytes(p, len, &i, LB_MSG_MAX, &t.message) != 0)
		return (LB_ECORRUPT);
	if (t.flags & LB_MSG_PEER) {
		if (get_bytes(p, len, &i, LB_FIELD_MAX, &t.peer) != 0 || t.peer.len == 0)
			return (LB_ECORRUPT);
		t.flags &= (uint16_t)~LB_MSG_PEER;
	}
	*m = t;
	*used = i;
	return (0);
}

/*
 * Decodes a block payload p[0..len) of count records starting at id first into b (which
 * takes a copy only of the offsets and times: b->buf must already hold p). Checks that the
 * records fill the payload exactly and that their times span [tmin, tmax].
 */
static int
block_decode(struct mblk *b, uint32_t count, int64_t tmin, int64_t tmax)
{
	struct lb_msg	 m;
	int64_t		 prev = 0, lo = INT64_MAX, hi = INT64_MIN;
	uint64_t	 v;
	size_t		 i = 0, k, used;
	int		 rc;

	b->n = 0;
	if ((rc = mblk_reserve(b, 0, count)) != 0)
		return (rc);
	for (uint32_t r = 0; r < count; r++) {
		if ((k = lb_varint_get(b->buf + i, b->len - i, &v)) == 0)
			return (LB_ECORRUPT);
		prev = tadd(prev, unzz(v));
		i += k;
		if ((rc = rec_get(b->buf + i, b->len - i, prev, &m, &used)) != 0)
			return (rc);
		b->off[r] = (uint32_t)i;
		b->recv[r] = prev;
		if (prev < lo)
			lo = prev;
		if (prev > hi)
			hi = prev;
		i += used;
	}
	if (i != b->len || lo != tmin || hi != tmax)
		return (LB_ECORRUPT);
	b->n = count;
	return (0);
}

static int
mblk_msg(const struct mblk *b, uint64_t id, struct lb_msg *m)
{
	uint32_t	 i = (uint32_t)(id - b->first);
	size_t		 used;
	int		 rc;

	if ((rc = rec_get(b->buf + b->off[i], b->len - b->off[i], b->recv[i], m,
	    &used)) != 0)
		return (rc);
	m->id = id;
	return (0);
}

/* ------------------------------------------------------------------ headers */

static void
fhdr_put(uint8_t *h, uint32_t magic, uint64_t first_id)
{
	memset(h, 0, LB_FHDR_SIZE);
	lb_put32(h + LB_FHDR_MAGIC, magic);
	lb_put32(h + LB_FHDR_VERSION, LB_MSGF_VERSION);
	lb_put64(h + LB_FHDR_FIRST_ID, first_id);
	lb_put32(h + LB_FHDR_CRC, lb_crc32(h, LB_FHDR_CRC));
}

static int
fhdr_check(const uint8_t *h, uint32_t magic, uint64_t *first_id)
{
	if (lb_get32(h + LB_FHDR_MAGIC) != magic ||
	    lb_get32(h + LB_FHDR_VERSION) != LB_MSGF_VERSION)
		return (LB_EFORMAT);
	if (lb_get32(h + LB_FHDR_CRC) != lb_crc32(h, LB_FHDR_CRC) ||
	    lb_get32(h + LB_FHDR_RESERVED) != 0)
		return (LB_ECORRUPT);
	*first_id = lb_get64(h + LB_FHDR_FIRST_ID);
	return (0);
}

/* Checks a block header on its own (not its place in the file). Fills e. */
static int
bhdr_check(const uint8_t *h, uint64_t off, struct bent *e)
{
	uint32_t	 count, raw, comp;
	uint64_t	 first;
	uint8_t		 method;

	if (lb_get32(h + LB_BHDR_MAGIC) != LB_BLK_MAGIC ||
	    lb_get32(h + LB_BHDR_CRC) != lb_crc32(h, LB_BHDR_CRC))
		return (LB_ECORRUPT);
	count = lb_get32(h + LB_BHDR_COUNT);
	first = lb_get64(h + LB_BHDR_FIRST_ID);
	raw = lb_get32(h + LB_BHDR_RAW_LEN);
	comp = lb_get32(h + LB_BHDR_COMP_LEN);
	method = h[LB_BHDR_METHOD];
	if (count == 0 || raw > LB_BLOCK_RAW_MAX || count > raw / LB_REC_MIN || comp == 0 ||
	    comp > raw || (method == LB_BLK_STORED && comp != raw) ||
	    !lb_block_method_ok(method) || h[45] != 0 || h[46] != 0 || h[47] != 0 ||
	    count > UINT64_MAX - first ||	/* UINT64_MAX is never an id */
	    (int64_t)lb_get64(h + LB_BHDR_TMIN) > (int64_t)lb_get64(h + LB_BHDR_TMAX))
		return (LB_ECORRUPT);
	e->first = first;
	e->off = off;
	e->count = count;
	e->comp = comp;
	e->raw = raw;
	e->bad = 0;
	return (0);
}

static int
push_block(struct lb_msgfile *mf, const struct bent *e)
{
	int	 rc;

	if ((rc = lb_grow(&mf->blk, &mf->cblk, mf->nblk + 1, sizeof(*mf->blk))) != 0)
		return (rc);
	mf->blk[mf->nblk++] = *e;
	return (0);
}

/*
 * Searches messages from off for the next sound block header (whose block fits in size and
 * whose first id is at least snext). *found is its offset, or size when there is none.
 */
static int
resync(struct lb_msgfile *mf, uint64_t off, uint64_t size, uint64_t *found)
{
	uint8_t		*buf;
	struct bent	 e;
	uint64_t	 pos = off;
	size_t		 n;
	int		 rc = 0;

	if ((buf = malloc(RESYNC_CHUNK + LB_BHDR_SIZE)) == NULL)
		return (errno);
	*found = size;
	while (pos + LB_BHDR_SIZE <= size) {
		n = size - pos < RESYNC_CHUNK + LB_BHDR_SIZE ? (size_t)(size - pos) :
		    RESYNC_CHUNK + LB_BHDR_SIZE;
		if ((rc = lb_pread_all(mf->mfd, buf, n, pos)) != 0)
			break;
		for (size_t i = 0; i + LB_BHDR_SIZE <= n; i++) {
			if (buf[i] != 'L' || lb_get32(buf + i) != LB_BLK_MAGIC)
				continue;
			if (bhdr_check(buf + i, pos + i, &e) == 0 && e.first >= mf->snext &&
			    pos + i + LB_BHDR_SIZE + e.comp <= size) {
				*found = pos + i;
				goto done;
			}
		}
		pos += n - LB_BHDR_SIZE + 1;
	}
 done:
	free(buf);
	return (rc);
}

/*
 * Indexes the block headers from mf->mend to the end of messages. Stops at an incomplete or
 * unsound block at the end (a torn write, or one in progress). A block that does not follow
 * on (bad header, id gap) with sound blocks after it is damage in the middle: the reader
 * records the missing ids as a bad entry and goes on; *damage is set. *tail is set when bytes
 * that are not a sound block follow the last sound block.
 */
static int
scan_blocks(struct lb_msgfile *mf, int *damage, int *tail)
{
	uint8_t		 h[LB_BHDR_SIZE];
	struct bent	 e, g;
	uint64_t	 size = 0, off = mf->mend, at;
	int		 rc;

	*damage = *tail = 0;
	if ((rc = fsize(mf->mfd, &size)) != 0)
		return (rc);
	while (off < size) {
		if (size - off < LB_BHDR_SIZE) {
			*tail = 1;
			break;
		}
		if ((rc = lb_pread_all(mf->mfd, h, sizeof(h), off)) != 0)
			return (rc);
		at = off;
		if (bhdr_check(h, off, &e) != 0 || e.first < mf->snext) {
			if ((rc = resync(mf, off + 1, size, &at)) != 0)
				return (rc);
			if (at == size) {
				*tail = 1;
				break;
			}
			if ((rc = lb_pread_all(mf->mfd, h, sizeof(h), at)) != 0)
				return (rc);
			if ((rc = bhdr_check(h, at, &e)) != 0)
				return (rc);
			*damage = 1;
		} else if (off + LB_BHDR_SIZE + e.comp > size) {
			*tail = 1;
			break;
		}
		if (e.first > mf->snext) {
			/* Ids with no block: a damaged range. */
			g.first = mf->snext;
			g.off = off;
			g.count = (uint32_t)(e.first - mf->snext > UINT32_MAX ? UINT32_MAX :
			    e.first - mf->snext);
			g.comp = g.raw = 0;
			g.bad = 1;
			if (e.first - mf->snext > UINT32_MAX)
				return (LB_ECORRUPT);
			if ((rc = push_block(mf, &g)) != 0)
				return (rc);
			*damage = 1;
		}
		if ((rc = push_block(mf, &e)) != 0)
			return (rc);
		mf->snext = e.first + e.count;
		mf->sraw += e.raw;
		off = at + LB_BHDR_SIZE + e.comp;
		mf->mend = off;
	}
	return (0);
}

/* ------------------------------------------------------------------ reading blocks */

/*
 * Reads the block at off (header e expected there when e != NULL), checks it and decodes it
 * into b. With e == NULL the header is read and checked from the file and returned in *got.
 */
static int
block_load(struct lb_msgfile *mf, uint64_t off, const struct bent *e, struct mblk *b,
    struct bent *got, const char **what)
{
	struct bent	 h;
	uint8_t		*p;
	int		 rc;

	if (mf->remote) {
		/* The whole block at once, as its chain record says: checked by its SHA-256. */
		*what = "cannot read block from the archive";
		if (e == NULL)
			return (EINVAL);
		if ((rc = lb_grow(&mf->zbuf, &mf->zcap, LB_BHDR_SIZE + (size_t)e->comp, 1)) != 0)
			return (rc);
		if ((rc = mf->src.block(mf->src.arg, off, LB_BHDR_SIZE + e->comp,
		    mf->bsha[e - mf->blk], mf->zbuf)) != 0)
			return (rc);
	} else {
		*what = "cannot read block header";
		if ((rc = lb_grow(&mf->zbuf, &mf->zcap, LB_BHDR_SIZE, 1)) != 0)
			return (rc);
		if ((rc = lb_pread_all(mf->mfd, mf->zbuf, LB_BHDR_SIZE, off)) != 0)
			return (rc);
	}
	*what = "bad block header";
	if ((rc = bhdr_check(mf->zbuf, off, &h)) != 0)
		return (rc);
	*what = "block header differs from the one indexed";
	if (e != NULL && (h.first != e->first || h.count != e->count || h.comp != e->comp ||
	    (!mf->remote && h.raw != e->raw)))
		return (LB_ECORRUPT);
	if (got != NULL)
		*got = h;
	*what = "cannot read block payload";
	if ((rc = lb_grow(&mf->zbuf, &mf->zcap, LB_BHDR_SIZE + (size_t)h.comp, 1)) != 0)
		return (rc);
	p = mf->zbuf + LB_BHDR_SIZE;
	if (!mf->remote && (rc = lb_pread_all(mf->mfd, p, h.comp, off + LB_BHDR_SIZE)) != 0)
		return (rc);
	*what = "payload checksum mismatch";
	if (lb_crc32(p, h.comp) != lb_get32(mf->zbuf + LB_BHDR_PAYLOAD_CRC))
		return (LB_ECORRUPT);
	b->len = 0;
	b->n = 0;
	if ((rc = mblk_reserve(b, h.raw, 0)) != 0)
		return (rc);
	*what = "payload does not decompress to its raw length";
	if ((rc = lb_block_decompress(&mf->rcodec, mf->zbuf[LB_BHDR_METHOD], p, h.comp, b->buf,
	    h.raw)) != 0)
		return (rc);
	b->len = h.raw;
	b->first = h.first;
	*what = "records do not decode or do not match the header";
	return (block_decode(b, h.count, (int64_t)lb_get64(mf->zbuf + LB_BHDR_TMIN),
	    (int64_t)lb_get64(mf->zbuf + LB_BHDR_TMAX)));
}

/* ------------------------------------------------------------------ the WAL */

/*
 * Walks WAL bytes w[0..len) (header already checked) from offset LB_FHDR_SIZE. Records with
 * ids below snext are skipped (already sealed); kept records must be snext, snext+1, ... .
 * Appends the kept ones to b (which holds only the fields after the time) unless b is NULL.
 * *end is where the walk stopped (first torn, unsound or out-of-sequence record, or len);
 * *kfirst the offset of the first kept record (or *end); *gap is set when a sound record
 * with an id past the sequence stopped the walk. With why set, reports the first problem.
 */
/* The two ways a WAL can end that a kill -9 during a write leaves: not damage (see verify_wal). */
static const char wal_torn_frame[] = "torn record frame";
static const char wal_torn_record[] = "torn record";

static int
wal_walk(const uint8_t *w, size_t len, uint64_t snext, struct mblk *b, size_t *kfirst,
    size_t *end, uint64_t *nkept, int *gap, const char **why)
{
	struct lb_msg	 m;
	uint64_t	 id = 0, t = 0, prev = 0, expect = snext, kept = 0;
	size_t		 off = LB_FHDR_SIZE, k, k2, used;
	uint32_t	 blen;
	int		 rc, have = 0;

	*kfirst = SIZE_MAX;
	*gap = 0;
	*why = NULL;
	while (off < len) {
		const uint8_t	*body;

		if (len - off < LB_WREC_HDR) {
			*why = wal_torn_frame;
			break;
		}
		blen = lb_get32(w + off);
		if (blen == 0 || blen > LB_WREC_MAX) {
			*why = "bad record length";
			break;
		}
		if (len - off - LB_WREC_HDR < blen) {
			*why = wal_torn_record;
			break;
		}
		body = w + off + LB_WREC_HDR;
		if (lb_crc32(body, blen) != lb_get32(w + off + 4)) {
			*why = "record checksum mismatch";
			break;
		}
		if ((k = lb_varint_get(body, blen, &id)) == 0 ||
		    (k2 = lb_varint_get(body + k, blen - k, &t)) == 0 ||
		    rec_get(body + k + k2, blen - k - k2, unzz(t), &m, &used) != 0 ||
		    k + k2 + used != blen) {
			*why = "record does not decode";
			break;
		}
		if (id == UINT64_MAX) {
			*why = "record id out of range";
			break;
		}
		if (have && id <= prev) {
			*why = "record ids do not ascend";
			break;
		}
		if (id >= snext && id != expect) {
			*gap = 1;
			*why = "record id does not follow the last id";
			break;
		}
		have = 1;
		prev = id;
		if (id >= snext) {
			if (*kfirst == SIZE_MAX)
				*kfirst = off;
			if (b != NULL) {
				if ((rc = mblk_reserve(b, used, 1)) != 0)
					return (rc);
				memcpy(b->buf + b->len, body + k + k2, used);
				b->off[b->n] = (uint32_t)b->len;
				b->recv[b->n] = unzz(t);
				b->n++;
				b->len += used;
			}
			expect++;
			kept++;
		}
		off += LB_WREC_HDR + blen;
	}
	*end = off;
	if (*kfirst == SIZE_MAX)
		*kfirst = off;
	*nkept = kept;
	return (0);
}

/*
 * Is there a sound record (plausible length, matching checksum) starting anywhere in
 * w[from..len)? A torn tail has none after it; a damaged length field in the middle of the WAL
 * does, so verify can tell the two apart.
 */
static int
wal_sound_record_after(const uint8_t *w, size_t len, size_t from)
{
	for (size_t p = from; p < len && len - p >= LB_WREC_HDR; p++) {
		uint32_t blen = lb_get32(w + p);

		if (blen == 0 || blen > LB_WREC_MAX || len - p - LB_WREC_HDR < blen)
			continue;
		if (lb_crc32(w + p + LB_WREC_HDR, blen) == lb_get32(w + p + 4))
			return (1);
	}
	return (0);
}

/* Reads the whole file at fd into a malloc'ed *buf. */
static int
read_whole(int fd, uint8_t **buf, size_t *len)
{
	uint64_t	 size = 0;
	uint8_t		*p;
	int		 rc;

	if ((rc = fsize(fd, &size)) != 0)
		return (rc);
	if (size > WAL_READ_MAX)
		return (LB_ETOOBIG);
	if ((p = malloc(size ? (size_t)size : 1)) == NULL)
		return (errno);
	if ((rc = lb_pread_all(fd, p, (size_t)size, 0)) != 0) {
		free(p);
		return (rc);
	}
	*buf = p;
	*len = (size_t)size;
	return (0);
}

/*
 * Reader: rebuilds mf->tail from the WAL. *gap is set when the WAL's records start past
 * snext (a block was sealed since the blocks were scanned).
 */
static int
wal_read(struct lb_msgfile *mf, int *gap)
{
	struct mblk	 nt, ot;
	uint8_t		*w = NULL;
	size_t		 len = 0, kfirst, end;
	uint64_t	 first, nkept;
	const char	*why;
	int		 fd, rc = 0;

	*gap = 0;
	/* Built aside and swapped in on success, so that an error keeps what was seen. */
	memset(&nt, 0, sizeof(nt));
	mblk_reset(&nt, mf->snext);
	if ((fd = open(mf->wpath, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno != ENOENT)
			return (errno);
	} else {
		rc = read_whole(fd, &w, &len);
		close(fd);
		if (rc != 0)
			return (rc);
	}
	if (len >= LB_FHDR_SIZE && fhdr_check(w, LB_WAL_MAGIC, &first) == 0 &&
	    first == mf->first_id &&
	    (rc = wal_walk(w, len, mf->snext, &nt, &kfirst, &end, &nkept, gap, &why)) != 0) {
		mblk_free(&nt);
		free(w);
		return (rc);
	}
	/* (A WAL without a usable header holds no records; verify says why.) */
	free(w);
	mf->wsize = len;
	ot = mf->tail;
	mf->tail = nt;
	mblk_free(&ot);
	return (0);
}

/* Reader: picks up blocks sealed and WAL records written since the last look. */
static int
refresh(struct lb_msgfile *mf)
{
	int	 damage, tail, gap = 0, rc;

	for (int tries = 0; tries < 3; tries++) {
		if ((rc = scan_blocks(mf, &damage, &tail)) != 0)
			return (rc);
		if ((rc = wal_read(mf, &gap)) != 0)
			return (rc);
		if (!gap)
			break;
	}
	return (0);
}

/* ------------------------------------------------------------------ open and close */

/* Creates path holding only a file header, atomically (tmp, fsync, rename, fsync dir). */
static int
create_file(struct lb_msgfile *mf, const char *path, uint32_t magic, uint64_t first_id)
{
	char	 tmp[PATH_MAX];
	uint8_t	 h[LB_FHDR_SIZE];
	int	 fd, rc;

	if ((rc = lb_path(tmp, sizeof(tmp), "%s.tmp", path)) != 0)
		return (rc);
	fhdr_put(h, magic, first_id);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)) == -1)
		return (errno);
	if ((rc = lb_write_all(fd, h, sizeof(h))) == 0 && fdatasync(fd) == -1)
		rc = errno;
	close(fd);
	if (rc == 0 && rename(tmp, path) == -1)
		rc = errno;
	if (rc == 0)
		rc = lb_fsync_dir(mf->dir);
	if (rc != 0)
		unlink(tmp);
	return (rc);
}

/* Opens path read-write, creating it (header only) when it is missing or shorter than one. */
static int
open_or_create(struct lb_msgfile *mf, const char *path, uint32_t magic, uint64_t first_id,
    int *fdp)
{
	uint64_t	 size;
	int		 fd, rc;

	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1 && errno != ENOENT)
		return (errno);
	if (fd != -1) {
		if ((rc = fsize(fd, &size)) != 0) {
			close(fd);
			return (rc);
		}
		if (size >= LB_FHDR_SIZE) {
			*fdp = fd;
			return (0);
		}
		close(fd);	/* a header never written whole: start again */
	}
	if ((rc = create_file(mf, path, magic, first_id)) != 0)
		return (rc);
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1)
		return (errno);
	*fdp = fd;
	return (0);
}

static int
read_fhdr(int fd, uint32_t magic, uint64_t *first_id)
{
	uint8_t	 h[LB_FHDR_SIZE];
	int	 rc;

	if ((rc = lb_pread_all(fd, h, sizeof(h), 0)) != 0)
		return (rc == LB_ECORRUPT ? LB_EFORMAT : rc);
	return (fhdr_check(h, magic, first_id));
}

/* The first id a valid WAL header names, else dflt (to re-create a lost messages file). */
static uint64_t
wal_first_id(const char *wpath, uint64_t dflt)
{
	uint64_t	 first;
	int		 fd;

	if ((fd = open(wpath, O_RDONLY | O_CLOEXEC)) == -1)
		return (dflt);
	if (read_fhdr(fd, LB_WAL_MAGIC, &first) != 0)
		first = dflt;
	close(fd);
	return (first);
}

/* Appends one already-checked WAL body's record to the open block (writer recovery). */
static int
tail_add(struct lb_msgfile *mf, int64_t recv, const uint8_t *rest, size_t rlen)
{
	struct mblk	*b = &mf->tail;
	size_t		 k;
	int		 rc;

	if ((rc = mblk_reserve(b, LB_VARINT_MAX + rlen, 1)) != 0)
		return (rc);
	k = lb_varint_put(b->buf + b->len, zz(tdiff(recv, b->n ? mf->lastrecv : 0)));
	memcpy(b->buf + b->len + k, rest, rlen);
	b->off[b->n] = (uint32_t)(b->len + k);
	b->recv[b->n] = recv;
	b->n++;
	b->len += k + rlen;
	if (b->n == 1 || recv < mf->tmin)
		mf->tmin = recv;
	if (b->n == 1 || recv > mf->tmax)
		mf->tmax = recv;
	mf->lastrecv = recv;
	return (0);
}

/*
 * Writer recovery of messages: indexes the blocks, cuts a torn or unsound tail, and checks
 * the last block's payload (a crash may leave a full-length block of garbage); refuses
 * damage in the middle (LB_ECORRUPT: run verify).
 */
static int
recover_messages(struct lb_msgfile *mf)
{
	struct mblk	 tmp;
	struct bent	 last;
	const char	*what;
	uint64_t	 size = 0;
	int		 damage, tail, rc;

	if ((rc = scan_blocks(mf, &damage, &tail)) != 0)
		return (rc);
	if (damage)
		return (LB_ECORRUPT);
	if (mf->nblk > 0) {
		memset(&tmp, 0, sizeof(tmp));
		last = mf->blk[mf->nblk - 1];
		rc = block_load(mf, last.off, &last, &tmp, NULL, &what);
		mblk_free(&tmp);
		if (rc == LB_ECORRUPT) {
			mf->nblk--;
			mf->snext = last.first;
			mf->sraw -= last.raw;
			mf->mend = last.off;
			tail = 1;
		} else if (rc != 0)
			return (rc);
	}
	if ((rc = fsize(mf->mfd, &size)) != 0)
		return (rc);
	if ((tail || size != mf->mend) && ftruncate(mf->mfd, (off_t)mf->mend) == -1)
		return (errno);
	/*
	 * Blocks a killed writer left unsynced must be durable before the WAL records they
	 * hold may be dropped (a later seal or sync commit does so).
	 */
	if (fdatasync(mf->mfd) == -1)
		return (errno);
	return (0);
}

/*
 * Writer recovery of the WAL: keeps the records that follow the sealed blocks, rebuilds the
 * open block from them, and cuts the WAL after the last one kept.
 */
static int
recover_wal(struct lb_msgfile *mf)
{
	uint8_t		*w = NULL;
	size_t		 len, kfirst, end, off;
	uint64_t	 first, nkept, id = 0, t = 0;
	const char	*why;
	int		 gap, rc;

	if ((rc = read_whole(mf->wfd, &w, &len)) != 0)
		return (rc);
	if ((rc = fhdr_check(w, LB_WAL_MAGIC, &first)) != 0)
		goto done;
	if (first != mf->first_id) {
		rc = LB_ECORRUPT;
		goto done;
	}
	if ((rc = wal_walk(w, len, mf->snext, NULL, &kfirst, &end, &nkept, &gap, &why)) != 0)
		goto done;
	/* Rebuild the open block and its WAL frames from the kept records. */
	mblk_reset(&mf->tail, mf->snext);
	for (off = kfirst; off < end; ) {
		uint32_t	 blen = lb_get32(w + off);
		const uint8_t	*body = w + off + LB_WREC_HDR;
		size_t		 k, k2;

		k = lb_varint_get(body, blen, &id);
		k2 = lb_varint_get(body + k, blen - k, &t);
		if ((rc = tail_add(mf, unzz(t), body + k + k2, blen - k - k2)) != 0)
			goto done;
		off += LB_WREC_HDR + blen;
	}
	mf->wlen = mf->wdone = 0;
	if ((rc = lb_grow(&mf->wal, &mf->wcap, end - kfirst, 1)) != 0)
		goto done;
	if (end > kfirst)
		memcpy(mf->wal, w + kfirst, end - kfirst);
	mf->wlen = mf->wdone = end - kfirst;
	mf->wbase = kfirst;
	mf->wstale = kfirst > LB_FHDR_SIZE;
	if (end != len) {
		if (ftruncate(mf->wfd, (off_t)end) == -1 || fdatasync(mf->wfd) == -1) {
			rc = errno;
			goto done;
		}
	}
 done:
	free(w);
	return (rc);
}

/* A file handle with nothing open yet (what lb_msgfile_close can always close). */
static int
mf_alloc(int mode, struct lb_msgfile **out)
{
	struct lb_msgfile	*mf;
	int			 rc;

	if ((mf = calloc(1, sizeof(*mf))) == NULL)
		return (errno);
	mf->mfd = mf->wfd = -1;
	mf->mode = mode;
	mf->wmethod = WRITE_METHOD;
	if ((rc = pthread_mutex_init(&mf->mu, NULL)) != 0) {
		free(mf);
		return (rc);
	}
	if ((rc = pthread_cond_init(&mf->cv_work, NULL)) != 0) {
		pthread_mutex_destroy(&mf->mu);
		free(mf);
		return (rc);
	}
	if ((rc = pthread_cond_init(&mf->cv_done, NULL)) != 0) {
		pthread_cond_destroy(&mf->cv_work);
		pthread_mutex_destroy(&mf->mu);
		free(mf);
		return (rc);
	}
	mf->ncache = mode == LB_RDONLY ? MF_CACHE_READER : 1;
	if ((mf->cache = calloc(mf->ncache, sizeof(*mf->cache))) == NULL) {
		rc = ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < mf->ncache; i++)
		mf->cache[i].idx = SIZE_MAX;
	*out = mf;
	return (0);
 fail:
	lb_msgfile_close(mf);
	return (rc);
}

int
lb_msgfile_open(const char *daydir, int mode, uint64_t first_id, struct lb_msgfile **out)
{
	struct lb_msgfile	*mf;
	int			 rc;

	if (mode != LB_RDONLY && mode != LB_RDWR)
		return (EINVAL);
	if ((rc = mf_alloc(mode, &mf)) != 0)
		return (rc);
	if ((rc = lb_path(mf->dir, sizeof(mf->dir), "%s", daydir)) != 0 ||
	    (rc = lb_path(mf->mpath, sizeof(mf->mpath), "%s/%s", daydir,
	    LB_FILE_MESSAGES)) != 0 ||
	    (rc = lb_path(mf->wpath, sizeof(mf->wpath), "%s/%s", daydir, LB_FILE_WAL)) != 0 ||
	    (rc = lb_path(mf->tpath, sizeof(mf->tpath), "%s.tmp", mf->wpath)) != 0)
		goto fail;
	if (mode == LB_RDONLY) {
		if ((mf->mfd = open(mf->mpath, O_RDONLY | O_CLOEXEC)) == -1) {
			rc = errno;
			goto fail;
		}
		if ((rc = read_fhdr(mf->mfd, LB_MSGF_MAGIC, &mf->first_id)) != 0)
			goto fail;
		mf->snext = mf->first_id;
		mf->mend = LB_FHDR_SIZE;
		mblk_reset(&mf->tail, mf->snext);
		if ((rc = refresh(mf)) != 0)
			goto fail;
		*out = mf;
		return (0);
	}
	if ((rc = lb_mkdirs(daydir)) != 0 ||
	    (rc = open_or_create(mf, mf->mpath, LB_MSGF_MAGIC,
	    wal_first_id(mf->wpath, first_id), &mf->mfd)) != 0 ||
	    (rc = read_fhdr(mf->mfd, LB_MSGF_MAGIC, &mf->first_id)) != 0)
		goto fail;
	mf->snext = mf->first_id;
	mf->mend = LB_FHDR_SIZE;
	if ((rc = recover_messages(mf)) != 0 ||
	    (rc = open_or_create(mf, mf->wpath, LB_WAL_MAGIC, mf->first_id, &mf->wfd)) != 0 ||
	    (rc = recover_wal(mf)) != 0)
		goto fail;
	*out = mf;
	return (0);
 fail:
	lb_msgfile_close(mf);
	return (rc);
}

/*
 * A reader of a closed day's messages somewhere else (an archive): blocks[0..n) is its block
 * index (from the day's chain), each block read whole through src and checked by its SHA-256
 * before any byte is used. The file has no WAL: its ids are the blocks'. On success the file
 * owns src (src->done at close); on failure the caller keeps it.
 */
int
lb_msgfile_open_src(const struct lb_msgsrc *src, uint64_t first_id, const struct lb_blkref *blocks,
    const uint8_t (*sha)[32], size_t n, struct lb_msgfile **out)
{
	struct lb_msgfile	*mf;
	uint64_t		 next = first_id;
	int			 rc;

	if ((rc = mf_alloc(LB_RDONLY, &mf)) != 0)
		return (rc);
	if ((mf->blk = calloc(n > 0 ? n : 1, sizeof(*mf->blk))) == NULL ||
	    (mf->bsha = calloc(n > 0 ? n : 1, sizeof(*mf->bsha))) == NULL) {
		rc = ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		if (blocks[i].first != next || blocks[i].count == 0 ||
		    blocks[i].len <= LB_BHDR_SIZE || blocks[i].len - LB_BHDR_SIZE > LB_BLOCK_RAW_MAX) {
			rc = LB_ECORRUPT;
			goto fail;
		}
		mf->blk[i].first = blocks[i].first;
		mf->blk[i].off = blocks[i].off;
		mf->blk[i].count = blocks[i].count;
		mf->blk[i].comp = blocks[i].len - LB_BHDR_SIZE;
		memcpy(mf->bsha[i], sha[i], 32);
		next += blocks[i].count;
	}
	mf->nblk = mf->cblk = n;
	mf->first_id = first_id;
	mf->snext = next;
	mblk_reset(&mf->tail, next);
	mf->src = *src;
	mf->remote = 1;
	*out = mf;
	return (0);
 fail:
	lb_msgfile_close(mf);
	return (rc);
}

void
lb_msgfile_close(struct lb_msgfile *mf)
{
	if (mf == NULL)
		return;
	if (mf->thr_on) {
		/* The thread writes what is queued, then exits. */
		pthread_mutex_lock(&mf->mu);
		mf->qstop = 1;
		pthread_cond_signal(&mf->cv_work);
		pthread_mutex_unlock(&mf->mu);
		pthread_join(mf->thr, NULL);
	}
	pthread_cond_destroy(&mf->cv_work);
	pthread_cond_destroy(&mf->cv_done);
	pthread_mutex_destroy(&mf->mu);
	for (unsigned i = 0; i < QDEPTH; i++)
		mblk_free(&mf->q[i].b);
	free(mf->tbuf);
	if (mf->mfd != -1)
		close(mf->mfd);
	if (mf->wfd != -1)
		close(mf->wfd);
	lb_block_free(mf->wcodec);
	lb_block_free(mf->rcodec);
	for (unsigned i = 0; mf->cache != NULL && i < mf->ncache; i++)
		mblk_free(&mf->cache[i].b);
	free(mf->cache);
	mblk_free(&mf->tail);
	free(mf->blk);
	free(mf->wal);
	free(mf->zbuf);
	free(mf->bsha);
	if (mf->remote && mf->src.done != NULL)
		mf->src.done(mf->src.arg);
	free(mf);
}

void
lb_msgfile_range(struct lb_msgfile *mf, uint64_t *first, uint64_t *next)
{
	if (mf->mode == LB_RDONLY && !mf->remote)
		(void)refresh(mf);	/* best effort: on error, what was seen before */
	*first = mf->first_id;
	*next = mf->snext + mf->tail.n;
}

/* ------------------------------------------------------------------ writing */

int
lb_msgfile_set_method(struct lb_msgfile *mf, unsigned method)
{
	if (mf->mode != LB_RDWR || (method != LB_BLK_STORED && method != LB_BLK_DEFLATE &&
	    method != LB_BLK_ZSTD && method != LB_BLK_COLS && method != LB_BLK_TPL))
		return (EINVAL);
	mf->wmethod = (uint8_t)method;	/* the appender's: copied into a slot when it is queued */
	return (0);
}

/*
 * Thread: compresses the queued block s and appends it to messages at mf->woff (no fsync).
 * On failure cuts what it wrote (recovery would too).
 */
static int
block_write(struct lb_msgfile *mf, struct qslot *s)
{
	struct mblk	*b = &s->b;
	uint8_t		*h;
	size_t		 comp;
	uint8_t		 method;
	int		 rc;

	if (mf->wcut) {
		if (ftruncate(mf->mfd, (off_t)mf->woff) == -1)
			return (errno);
		mf->wcut = 0;
	}
	if ((rc = lb_grow(&mf->tbuf, &mf->tcap, LB_BHDR_SIZE + b->len, 1)) != 0)
		return (rc);
	h = mf->tbuf;
	if ((rc = lb_block_compress(&mf->wcodec, s->want, b->buf, b->len, h + LB_BHDR_SIZE, &comp,
	    &method)) != 0)
		return (rc);
	memset(h, 0, LB_BHDR_SIZE);
	lb_put32(h + LB_BHDR_MAGIC, LB_BLK_MAGIC);
	lb_put32(h + LB_BHDR_COUNT, b->n);
	lb_put64(h + LB_BHDR_FIRST_ID, b->first);
	lb_put64(h + LB_BHDR_TMIN, (uint64_t)s->tmin);
	lb_put64(h + LB_BHDR_TMAX, (uint64_t)s->tmax);
	lb_put32(h + LB_BHDR_RAW_LEN, (uint32_t)b->len);
	lb_put32(h + LB_BHDR_COMP_LEN, (uint32_t)comp);
	lb_put32(h + LB_BHDR_PAYLOAD_CRC, lb_crc32(h + LB_BHDR_SIZE, comp));
	h[LB_BHDR_METHOD] = method;
	lb_put32(h + LB_BHDR_CRC, lb_crc32(h, LB_BHDR_CRC));
	if ((rc = lb_pwrite_all(mf->mfd, h, LB_BHDR_SIZE + (size_t)comp, mf->woff)) != 0) {
		if (ftruncate(mf->mfd, (off_t)mf->woff) == -1)
			mf->wcut = 1;	/* the retry cuts it first (and recovery would) */
		return (rc);
	}
	s->off = mf->woff;
	s->comp = (uint32_t)comp;
	s->method = method;
	mf->woff += LB_BHDR_SIZE + (uint64_t)comp;
	return (0);
}

/*
 * The compressor thread: takes the queued blocks in slot (= id) order, writes them, marks
 * them done. After a failure it writes nothing more and fails every later block too, until
 * the appender puts them back in the queue (requeue). Exits once asked to and the queue is
 * empty.
 */
static void *
compressor(void *arg)
{
	struct lb_msgfile	*mf = arg;
	struct qslot		*s;
	int			 failed, rc;

	pthread_mutex_lock(&mf->mu);
	for (;;) {
		/* (requeue may move qwork back while we wait) */
		while (mf->q[mf->qwork].state != Q_QUEUED && !mf->qstop)
			pthread_cond_wait(&mf->cv_work, &mf->mu);
		s = &mf->q[mf->qwork];
		if (s->state != Q_QUEUED)
			break;
		failed = mf->qfailed;
		pthread_mutex_unlock(&mf->mu);
		rc = failed ? failed : block_write(mf, s);
		pthread_mutex_lock(&mf->mu);
		if (rc != 0 && mf->qfailed == 0) {
			mf->qfailed = rc;
			atomic_store_explicit(&mf->tfail, 1, memory_order_relaxed);
		}
		s->rc = rc;
		s->state = Q_DONE;
		mf->qwork = (mf->qwork + 1) % QDEPTH;
		pthread_cond_broadcast(&mf->cv_done);
	}
	pthread_mutex_unlock(&mf->mu);
	return (NULL);
}

/*
 * A written block joins the index. Its records' WAL frames leave wal[]: those written to the
 * WAL file become stale, those not written are not needed (uncommitted, and in messages now).
 */
static int
block_done(struct lb_msgfile *mf, struct qslot *s)
{
	struct bent	 e;
	size_t		 w = s->wend;
	int		 rc;

	e.first = s->b.first;
	e.off = s->off;
	e.count = s->b.n;
	e.comp = s->comp;
	e.raw = (uint32_t)s->b.len;
	e.bad = 0;
	if ((rc = push_block(mf, &e)) != 0)
		return (rc);
	mf->mend = s->off + LB_BHDR_SIZE + s->comp;
	mf->sraw += s->b.len;
	mf->mdirty = 1;
	if (mf->wdone >= w) {
		mf->wbase += w;
		mf->wdone -= w;
	} else {
		mf->wbase += mf->wdone;
		mf->wdone = 0;
	}
	if (mf->wbase > LB_FHDR_SIZE)
		mf->wstale = 1;
	memmove(mf->wal, mf->wal + w, mf->wlen - w);
	mf->wlen -= w;
	for (unsigned i = 1; i < mf->nq; i++)
		mf->q[(mf->qhead + i) % QDEPTH].wend -= w;
	return (0);
}

/*
 * After a failed write: waits until the thread has finished every queued slot (the failed one
 * is the oldest; it fails those after it without writing), then queues them all again, oldest
 * first, and clears the failure. Their records and WAL frames never left.
 */
static void
requeue(struct lb_msgfile *mf)
{
	pthread_mutex_lock(&mf->mu);
	for (unsigned i = 0; i < mf->nq; i++) {
		struct qslot *s = &mf->q[(mf->qhead + i) % QDEPTH];

		while (s->state != Q_DONE)
			pthread_cond_wait(&mf->cv_done, &mf->mu);
	}
	for (unsigned i = 0; i < mf->nq; i++) {
		struct qslot *s = &mf->q[(mf->qhead + i) % QDEPTH];

		s->rc = 0;
		s->state = Q_QUEUED;
	}
	mf->qwork = mf->qhead;
	mf->qfailed = 0;
	atomic_store_explicit(&mf->tfail, 0, memory_order_relaxed);
	pthread_cond_signal(&mf->cv_work);
	pthread_mutex_unlock(&mf->mu);
}

/*
 * Takes back the blocks the thread has finished, oldest first, waiting until at most maxq
 * remain queued. Returns a failed write's error once (the blocks from it on are queued again:
 * requeue) or the sticky terr.
 */
static int
reap(struct lb_msgfile *mf, unsigned maxq)
{
	struct qslot	*s;
	int		 done, rc;

	while (mf->nq > 0) {
		s = &mf->q[mf->qhead];
		pthread_mutex_lock(&mf->mu);
		while (s->state != Q_DONE && mf->nq > maxq)
			pthread_cond_wait(&mf->cv_done, &mf->mu);
		done = s->state == Q_DONE;
		pthread_mutex_unlock(&mf->mu);
		if (!done)
			break;
		if (mf->terr == 0 && (rc = s->rc) != 0) {
			requeue(mf);
			return (rc);
		}
		if (mf->terr == 0 && (rc = block_done(mf, s)) != 0)
			mf->terr = rc;
		mf->qraw -= s->b.len;
		pthread_mutex_lock(&mf->mu);
		s->state = Q_FREE;
		pthread_mutex_unlock(&mf->mu);
		mf->qhead = (mf->qhead + 1) % QDEPTH;
		mf->nq--;
	}
	return (mf->terr);
}

/* Hands the open block to the compressor thread (waiting for room in the queue). */
static int
seal_block(struct lb_msgfile *mf)
{
	struct qslot	*s;
	struct mblk	 t;
	int		 rc;

	if (mf->tail.n == 0)
		return (mf->terr);
	if ((rc = reap(mf, QDEPTH - 1)) != 0)
		return (rc);
	if (!mf->thr_on) {
		mf->woff = mf->mend;
		mf->qwork = mf->qhead;
		if ((rc = pthread_create(&mf->thr, NULL, compressor, mf)) != 0)
			return (rc);
		mf->thr_on = 1;
	}
	s = &mf->q[(mf->qhead + mf->nq) % QDEPTH];
	/* The slot's old buffers become the new open block's. */
	t = s->b;
	s->b = mf->tail;
	mf->tail = t;
	s->tmin = mf->tmin;
	s->tmax = mf->tmax;
	s->wend = mf->wlen;
	s->rc = 0;
	s->want = mf->wmethod;
	pthread_mutex_lock(&mf->mu);
	s->state = Q_QUEUED;
	pthread_cond_signal(&mf->cv_work);
	pthread_mutex_unlock(&mf->mu);
	mf->nq++;
	mf->qraw += s->b.len;
	mf->snext += s->b.n;
	mblk_reset(&mf->tail, mf->snext);
	return (0);
}

int
lb_msgfile_append(struct lb_msgfile *mf, const struct lb_msg *m)
{
	struct mblk	*b = &mf->tail;
	uint8_t		*q;
	size_t		 need, k, rn, roff, hb;
	int		 rc;

	if (mf->mode != LB_RDWR || m->id != mf->snext + b->n)
		return (EINVAL);
	/*
	 * A failed write: returned (and the blocks queued again) before anything is taken. The
	 * failed block and those before it are done: reap reaches it without waiting.
	 */
	if (atomic_load_explicit(&mf->tfail, memory_order_relaxed) &&
	    (rc = reap(mf, QDEPTH)) != 0)
		return (rc);
	if (mf->terr != 0)
		return (mf->terr);
	if (m->id == UINT64_MAX)
		return (LB_ETOOBIG);	/* the id space is used up: next must stay representable */
	if (m->host.len > LB_FIELD_MAX || m->program.len > LB_FIELD_MAX ||
	    m->pid.len > LB_FIELD_MAX || m->msgid.len > LB_FIELD_MAX ||
	    m->sd.len > LB_SD_MAX || m->message.len > LB_MSG_MAX || m->peer.len > LB_FIELD_MAX)
		return (LB_ETOOBIG);
	if (b->len >= BLOCK_TARGET && (rc = seal_block(mf)) != 0)
		return (rc);
	need = rec_bound(m);
	if ((rc = mblk_reserve(b, LB_VARINT_MAX + need, 1)) != 0 ||
	    (rc = lb_grow(&mf->wal, &mf->wcap, mf->wlen + LB_WREC_HDR + 2 * LB_VARINT_MAX + need,
	    1)) != 0)
		return (rc);
	k = lb_varint_put(b->buf + b->len, zz(tdiff(m->received, b->n ? mf->lastrecv : 0)));
	roff = b->len + k;
	rn = rec_put(b->buf + roff, m);
	/* The WAL frame: length, CRC, id, absolute receive time, then the same bytes. */
	q = mf->wal + mf->wlen;
	hb = lb_varint_put(q + LB_WREC_HDR, m->id);
	hb += lb_varint_put(q + LB_WREC_HDR + hb, zz(m->received));
	memcpy(q + LB_WREC_HDR + hb, b->buf + roff, rn);
	lb_put32(q, (uint32_t)(hb + rn));
	lb_put32(q + 4, lb_crc32(q + LB_WREC_HDR, hb + rn));
	mf->wlen += LB_WREC_HDR + hb + rn;
	b->off[b->n] = (uint32_t)roff;
	b->recv[b->n] = m->received;
	b->n++;
	b->len = roff + rn;
	if (b->n == 1 || m->received < mf->tmin)
		mf->tmin = m->received;
	if (b->n == 1 || m->received > mf->tmax)
		mf->tmax = m->received;
	mf->lastrecv = m->received;
	return (0);
}

/*
 * Replaces the WAL by one holding only the open block's frames: messages.wal.tmp, fdatasync,
 * rename, fsync of the directory. Used once messages is durable and the WAL holds stale
 * records, so that the WAL stays about one block long.
 */
static int
wal_replace(struct lb_msgfile *mf)
{
	uint8_t	 h[LB_FHDR_SIZE];
	int	 fd, rc;

	fhdr_put(h, LB_WAL_MAGIC, mf->first_id);
	if ((fd = open(mf->tpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)) == -1)
		return (errno);
	if ((rc = lb_write_all(fd, h, sizeof(h))) != 0 ||
	    (rc = lb_write_all(fd, mf->wal, mf->wlen)) != 0)
		goto fail;
	if (fdatasync(fd) == -1 || rename(mf->tpath, mf->wpath) == -1) {
		rc = errno;
		goto fail;
	}
	close(mf->wfd);
	mf->wfd = fd;
	mf->wbase = LB_FHDR_SIZE;
	mf->wdone = mf->wlen;
	mf->wstale = 0;
	return (lb_fsync_dir(mf->dir));
 fail:
	close(fd);
	unlink(mf->tpath);
	return (rc);
}

int
lb_msgfile_commit(struct lb_msgfile *mf, int sync)
{
	int	 rc;

	if (mf->mode != LB_RDWR)
		return (EINVAL);
	/*
	 * No wait for queued blocks: their records are still in wal[], so they go to the WAL
	 * (and stay in a replaced one) until their block is written and made durable.
	 */
	if ((rc = reap(mf, QDEPTH)) != 0)
		return (rc);
	if (sync && mf->mdirty) {
		if (fdatasync(mf->mfd) == -1)
			return (errno);
		mf->mdirty = 0;
	}
	if (sync && mf->wstale)
		return (wal_replace(mf));
	if (mf->wdone < mf->wlen) {
		if ((rc = lb_pwrite_all(mf->wfd, mf->wal + mf->wdone, mf->wlen - mf->wdone,
		    mf->wbase + mf->wdone)) != 0) {
			/* A partial frame is cut on recovery; rewrite from wdone next time. */
			return (rc);
		}
		mf->wdone = mf->wlen;
	}
	if (sync && fdatasync(mf->wfd) == -1)
		return (errno);
	return (0);
}

int
lb_msgfile_settle(struct lb_msgfile *mf)
{
	int	 rc;

	if (mf->mode != LB_RDWR)
		return (EINVAL);
	/* The blocks written make the WAL stale: the commit replaces it. */
	if ((rc = reap(mf, 0)) != 0)
		return (rc);
	return (lb_msgfile_commit(mf, 1));
}

int
lb_msgfile_seal(struct lb_msgfile *mf)
{
	int	 rc;

	if (mf->mode != LB_RDWR)
		return (EINVAL);
	if ((rc = seal_block(mf)) != 0 || (rc = reap(mf, 0)) != 0)
		return (rc);
	if (mf->mdirty) {
		if (fdatasync(mf->mfd) == -1)
			return (errno);
		mf->mdirty = 0;
	}
	if (mf->wbase > LB_FHDR_SIZE) {
		/* Every record in the WAL is in a durable block now. */
		if (ftruncate(mf->wfd, LB_FHDR_SIZE) == -1 || fdatasync(mf->wfd) == -1)
			return (errno);
		mf->wbase = LB_FHDR_SIZE;
		mf->wstale = 0;
	}
	return (0);
}

/* ------------------------------------------------------------------ reading */

int
lb_msgfile_get(struct lb_msgfile *mf, uint64_t id, struct lb_msg *m)
{
	struct mcache	*c;
	const char	*what;
	size_t		 lo, hi, mid;
	int		 rc;

	if (id < mf->first_id)
		return (LB_ENOTFOUND);
	if (id >= mf->snext + mf->tail.n && mf->mode == LB_RDONLY && !mf->remote &&
	    (rc = refresh(mf)) != 0)
		return (rc);
	if (id >= mf->snext + mf->tail.n)
		return (LB_ENOTFOUND);
	if (id >= mf->snext)
		return (mblk_msg(&mf->tail, id, m));
	/* (A failed write is not this read's business: its blocks are queued again, below.) */
	if (mf->nq > 0 && (rc = reap(mf, QDEPTH)) != 0 && mf->terr != 0)
		return (rc);
	if (mf->terr != 0 && id >= (mf->nblk > 0 ? mf->blk[mf->nblk - 1].first +
	    mf->blk[mf->nblk - 1].count : mf->first_id))
		return (mf->terr);	/* its block is written but not in the index */
	/* Blocks still queued: read their records in memory (the thread only reads them). */
	for (unsigned i = 0; i < mf->nq; i++) {
		const struct mblk	*b = &mf->q[(mf->qhead + i) % QDEPTH].b;

		if (id >= b->first && id - b->first < b->n)
			return (mblk_msg(b, id, m));
	}
	lo = 0;
	hi = mf->nblk;
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (mf->blk[mid].first <= id)
			lo = mid;
		else
			hi = mid;
	}
	if (mf->nblk == 0 || mf->blk[lo].bad || id < mf->blk[lo].first ||
	    id - mf->blk[lo].first >= mf->blk[lo].count)
		return (LB_ECORRUPT);
	/* The decoded block, or the least recently used slot to decode it into. */
	c = &mf->cache[0];
	for (unsigned i = 0; i < mf->ncache; i++) {
		if (mf->cache[i].idx == lo) {
			c = &mf->cache[i];
			break;
		}
		if (mf->cache[i].used < c->used)
			c = &mf->cache[i];
	}
	if (c->idx != lo) {
		c->idx = SIZE_MAX;
		if ((rc = block_load(mf, mf->blk[lo].off, &mf->blk[lo], &c->b, NULL,
		    &what)) != 0) {
			if (rc == LB_ECORRUPT)
				mf->blk[lo].bad = 1;
			return (rc);
		}
		c->idx = lo;
	}
	c->used = ++mf->cclock;
	return (mblk_msg(&c->b, id, m));
}

static int
verify_wal(struct lb_msgfile *mf, uint64_t snext, char *why, size_t whylen)
{
	uint8_t		*w = NULL;
	size_t		 len, kfirst, end;
	uint64_t	 first, nkept;
	const char	*what;
	int		 fd, gap, rc;

	if ((fd = open(mf->wpath, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return (0);
		lb_setwhy(why, whylen, "%s: cannot open: %s", mf->wpath, strerror(errno));
		return (errno);
	}
	rc = read_whole(fd, &w, &len);
	close(fd);
	if (rc != 0) {
		lb_setwhy(why, whylen, "%s: cannot read: %s", mf->wpath, lb_strerror(rc));
		return (rc);
	}
	if (len < LB_FHDR_SIZE || (rc = fhdr_check(w, LB_WAL_MAGIC, &first)) != 0) {
		lb_setwhy(why, whylen, "%s: offset 0: bad file header", mf->wpath);
		rc = LB_ECORRUPT;
		goto done;
	}
	if (first != mf->first_id) {
		lb_setwhy(why, whylen, "%s: offset %d: first id %llu, messages says %llu",
		    mf->wpath, LB_FHDR_FIRST_ID, (unsigned long long)first,
		    (unsigned long long)mf->first_id);
		rc = LB_ECORRUPT;
		goto done;
	}
	if ((rc = wal_walk(w, len, snext, NULL, &kfirst, &end, &nkept, &gap, &what)) != 0)
		goto done;
	/*
	 * A record cut short by the end of the file is what a process killed in the middle of a
	 * write(2) leaves (or a writer still writing): that message was never acknowledged, and
	 * the writer's next open cuts it. Anything else is damage.
	 */
	if (end != len && (what == wal_torn_frame || what == wal_torn_record) &&
	    !wal_sound_record_after(w, len, end + 1))
		end = len;
	if (end != len) {
		lb_setwhy(why, whylen, "%s: offset %zu: %s (after id %llu)", mf->wpath, end,
		    what != NULL ? what : "trailing bytes",
		    (unsigned long long)(snext + nkept - 1));
		rc = LB_ECORRUPT;
	}
 done:
	free(w);
	return (rc);
}

int
lb_msgfile_verify(struct lb_msgfile *mf, char *why, size_t whylen)
{
	struct bent	 e;
	const char	*what;
	uint64_t	 size = 0, off = LB_FHDR_SIZE, next, first;
	int		 rc, torn = 0;

	lb_setwhy(why, whylen, "ok");
	if (mf->mode == LB_RDWR && (rc = reap(mf, 0)) != 0) {
		lb_setwhy(why, whylen, "%s: cannot write a block: %s", mf->mpath, lb_strerror(rc));
		return (rc);
	}
	if ((rc = read_fhdr(mf->mfd, LB_MSGF_MAGIC, &first)) != 0 || first != mf->first_id) {
		lb_setwhy(why, whylen, "%s: offset 0: bad file header", mf->mpath);
		return (rc != 0 ? rc : LB_ECORRUPT);
	}
	if ((rc = fsize(mf->mfd, &size)) != 0)
		return (rc);
	next = mf->first_id;
	mf->cache[0].idx = SIZE_MAX;	/* the first cached block is the work buffer */
	while (off < size) {
		/*
		 * A last block cut short by the end of the file is what a writer killed inside
		 * its write(2) leaves; its records are still in the WAL (a record leaves the WAL
		 * only once its block is durable), which verify_wal() checks from this id on.
		 */
		if (size - off < LB_BHDR_SIZE) {
			uint8_t	 part[LB_BHDR_SIZE], magic[4];
			size_t	 n = (size_t)(size - off) < 4 ? (size_t)(size - off) : 4;

			lb_put32(magic, LB_BLK_MAGIC);
			if (lb_pread_all(mf->mfd, part, (size_t)(size - off), off) == 0 &&
			    memcmp(part, magic, n) == 0) {
				torn = 1;
				break;
			}
			lb_setwhy(why, whylen, "%s: offset %llu: %llu trailing bytes, expected block "
			    "first id %llu", mf->mpath, (unsigned long long)off,
			    (unsigned long long)(size - off), (unsigned long long)next);
			return (LB_ECORRUPT);
		}
		rc = block_load(mf, off, NULL, &mf->cache[0].b, &e, &what);
		if (rc == LB_ECORRUPT && strcmp(what, "cannot read block payload") == 0 &&
		    off + LB_BHDR_SIZE + (uint64_t)e.comp > size) {
			torn = 1;
			break;
		}
		if (rc == 0 && e.first != next) {
			what = "block first id does not follow the previous block";
			rc = LB_ECORRUPT;
		}
		if (rc != 0) {
			lb_setwhy(why, whylen, "%s: offset %llu: block first id %llu: %s",
			    mf->mpath, (unsigned long long)off, (unsigned long long)next,
			    rc == LB_ECORRUPT ? what : lb_strerror(rc));
			return (rc);
		}
		next += e.count;
		off += LB_BHDR_SIZE + (uint64_t)e.comp;
	}
	if ((rc = verify_wal(mf, next, why, whylen)) != 0 && torn)
		lb_setwhy(why, whylen, "%s: offset %llu: the last block is cut short and the WAL does "
		    "not hold its records from id %llu on", mf->mpath, (unsigned long long)off,
		    (unsigned long long)next);
	return (rc);
}

void
lb_msgfile_sizes(struct lb_msgfile *mf, uint64_t *disk, uint64_t *raw)
{
	uint64_t	 wal;

	if (mf->mode == LB_RDWR)
		wal = mf->wbase + mf->wdone;
	else
		wal = mf->wsize;
	*disk = mf->mend + wal;
	*raw = mf->sraw + mf->qraw + mf->tail.len;
}

/* ------------------------------------------------------------------ the block index */

size_t
lb_msgfile_nblocks(struct lb_msgfile *mf)
{
	return (mf->nblk);
}

void
lb_msgfile_block(struct lb_msgfile *mf, size_t i, struct lb_blkref *b)
{
	const struct bent *e = &mf->blk[i];

	b->off = e->off;
	b->first = e->first;
	b->count = e->count;
	b->bad = e->bad;
	b->len = e->bad ? 0 : LB_BHDR_SIZE + e->comp;
}

int
lb_msgfile_block_hash(struct lb_msgfile *mf, const struct lb_blkref *b, uint8_t sha[32])
{
	if (b->bad)
		return (LB_ECORRUPT);
	return (lb_sha256_fd(mf->mfd, b->off, b->len, sha));
}

uint64_t
lb_msgfile_end(struct lb_msgfile *mf)
{
	return (mf->mend);
}

int
lb_msgfile_fd(struct lb_msgfile *mf)
{
	return (mf->mfd);
}

uint64_t
lb_msgfile_file_size(struct lb_msgfile *mf)
{
	uint64_t size = 0;

	(void)fsize(mf->mfd, &size);
	return (size);
}
