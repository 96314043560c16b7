/*
 * lb_chain.h — a day's hash chain (<day>/chain, FORMAT.md §14): an append-only file of
 * records, each holding the SHA-256 of the one before it, that commits to every sealed message
 * block and every published segment of the day, in the order they became durable. The first
 * record of a day links the previous day's chain; retention leaves a tombstone in the next day's.
 * This file knows the records and the file; lb_store_chain.c knows when to write them.
 */
#ifndef LB_CHAIN_H
#define LB_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#define LB_SHA256_LEN	32

/* One record, as written (the fields of its kind) or as read back (all of them). */
struct lb_chrec {
	uint8_t		 kind;		/* LB_CH_* */
	uint8_t		 flags;		/* LB_CHF_* */
	uint64_t	 seq;		/* 0 for the genesis record, then one more each */
	int64_t		 time;		/* µs since the epoch when it was written */
	uint64_t	 foff;		/* read: the record's offset in the file */
	uint8_t		 prev[LB_SHA256_LEN];	/* the record before's hash (genesis: §14) */
	uint8_t		 hash[LB_SHA256_LEN];	/* SHA-256 of the record up to here */
	/* genesis: the logspace, the day, the previous day and its chain's head then */
	char		 ls[65];
	uint32_t	 day;		/* genesis: its day; tombstone: the day removed */
	uint32_t	 prev_day;	/* genesis: 0 when the logspace had no day before */
	uint64_t	 prev_seq;	/* genesis: the seq of prev in prev_day's chain */
	/* block: ids [first_id, first_id + count) at off, len bytes (header + payload) */
	/* segment: the file name, ids [first_id, last_id], count, size, level */
	/* tombstone: ids [first_id, first_id + count) of the day removed, its chain's seq
	 * (prev_seq) and head (sha), flags (level) and signature (sig) */
	char		 name[64];
	uint64_t	 first_id, last_id, count;
	uint64_t	 off, len;
	uint32_t	 level;
	uint8_t		 sha[LB_SHA256_LEN];	/* block/segment: of its bytes; tomb: head */
	char		(*repl)[64];	/* segment: the names it replaces (malloc'ed) */
	uint32_t	 nrepl;
	/* seal: the epoch, when it began, and the MAC (in sha) */
	uint64_t	 epoch;
	int64_t		 started;
	/* day root: first_id and count of the day's messages, and the signature */
	uint8_t		 sig[64];
};

/*
 * What a new chain file starts with: written by lb_chain_append when the file does not exist
 * (or is empty), ignored otherwise.
 */
struct lb_chgen {
	const char	*ls;
	uint32_t	 day;
	uint32_t	 prev_day;
	uint64_t	 prev_seq;
	uint8_t		 prev[LB_SHA256_LEN];
};

/*
 * Appends n records to <daydir>/chain under an exclusive flock (writers in other threads of
 * the process append to the same day: the merge thread, retention), filling in seq, time,
 * prev and hash (recs[] is updated). Creates the file with gen's genesis record first when it
 * has none. A torn last record (a crash in an append) is cut first. fdatasync()s when sync.
 * LB_ECORRUPT when the file's records before the end do not link: nothing is appended to a
 * chain that is damaged (lb_chain_load names the damage).
 */
int	lb_chain_append(const char *daydir, const struct lb_chgen *gen, struct lb_chrec *recs,
	    size_t n, int sync);

/*
 * lb_chain_append, but fill(rec, prev, arg) is called for each record before it is encoded,
 * with the hash it will link (a seal's MAC covers it). With unless_sealed nothing is appended
 * when the chain's last record is a seal already.
 */
int	lb_chain_append_fill(const char *daydir, const struct lb_chgen *gen,
	    struct lb_chrec *recs, size_t n, int sync, int unless_sealed,
	    int (*fill)(struct lb_chrec *, const uint8_t *, void *), void *arg);

/* The seq and hash of the chain's last complete record; ENOENT when there is no chain. */
int	lb_chain_head(const char *daydir, uint64_t *seq, uint8_t head[LB_SHA256_LEN]);

/*
 * Reads <daydir>/chain: every record, checking each one's length, hash and link to the one
 * before. On damage returns LB_ECORRUPT with the records before it in *out and a one-line
 * description in why (the record, its byte offset and the kind of damage); ENOENT when there
 * is no chain. *out is malloc'ed: lb_chain_free().
 */
int	lb_chain_load(const char *daydir, struct lb_chrec **out, size_t *n, char *why,
	    size_t whylen);
void	lb_chain_free(struct lb_chrec *recs, size_t n);

/* Parses the records of buf (for the fuzzer): as lb_chain_load. */
int	lb_chain_parse(const uint8_t *buf, size_t len, struct lb_chrec **out, size_t *n,
	    char *why, size_t whylen);

/* SHA-256 of len bytes at p; of len bytes of fd from off; of a whole file (*size its length,
 * may be NULL). */
int	lb_sha256(const void *p, size_t len, uint8_t out[LB_SHA256_LEN]);
int	lb_sha256_fd(int fd, uint64_t off, uint64_t len, uint8_t out[LB_SHA256_LEN]);
int	lb_sha256_file(const char *path, uint8_t out[LB_SHA256_LEN], uint64_t *size);

/*
 * Signed days (lb_sign.c, FORMAT.md §14.6). lb_sign_day appends to day's chain of ls a day
 * root: the chain head, signed with <data>/indexd/sign.key (ENOENT when there is none).
 * lb_sign_check: 0 when sig is the signature, under the public key at pubpath, of the day
 * root of ls's day whose record links record seq (hash prev); LB_ECORRUPT when it is not.
 */
int	lb_sign_day(const char *data, const char *ls, uint32_t day, uint64_t first_id,
	    uint64_t count, const struct lb_chgen *gen);
int	lb_sign_check(const char *pubpath, const char *ls, uint32_t day, uint64_t seq,
	    const uint8_t prev[LB_SHA256_LEN], uint64_t first_id, uint64_t count,
	    const uint8_t sig[64]);

/*
 * Tombstones (FORMAT.md §14.6): lb_sign_tomb_append appends r (a tombstone: its level gets
 * LB_CHT_SIGNED) to daydir's chain, signed with <data>/indexd/sign.key when there is one.
 * lb_sign_check_tomb: 0 when r is signed under the public key at pubpath; LB_ECORRUPT when
 * it is unsigned or the signature is not; ENOENT when there is no public key there.
 */
int	lb_sign_tomb_append(const char *data, const char *daydir, const struct lb_chgen *gen,
	    const char *ls, struct lb_chrec *r);
int	lb_sign_check_tomb(const char *pubpath, const char *ls, const struct lb_chrec *r);

/*
 * RFC 3161 time stamps of day roots (lb_tsa.c, FORMAT.md §14.7). lb_tsa_request: the DER of a
 * request over digest (SHA-256 imprint, a random nonce, the TSA's certificate asked for),
 * malloc'ed. lb_tsa_check: 0 when resp is a granted reply whose token stamps digest, its
 * signature checked against cafile's CAs when cafile != NULL (*when: the time it gives, µs);
 * LB_ECORRUPT with why when it is not. lb_tsa_save writes it as <daydir>/root.tsr.
 */
int	lb_tsa_request(const uint8_t digest[LB_SHA256_LEN], uint8_t **der, size_t *len);
int	lb_tsa_check(const uint8_t *resp, size_t len, const uint8_t digest[LB_SHA256_LEN],
	    const char *cafile, int64_t *when, char *why, size_t whylen);
int	lb_tsa_path(char *buf, size_t len, const char *daydir);
int	lb_tsa_save(const char *daydir, const uint8_t *resp, size_t len);

/* The kind's name ("genesis", "block", ...) for messages. */
const char *lb_chain_kind_name(unsigned kind);

#endif /* LB_CHAIN_H */
