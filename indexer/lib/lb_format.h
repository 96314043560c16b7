/*
 * lb_format.h — every on-disk name, magic number, version and fixed offset of the logbox store,
 * in one place. It mirrors indexer/FORMAT.md; tests/t_format.c checks that the two agree.
 * Constants stored on disk are fixed: change one only with a new format version.
 */
#ifndef LB_FORMAT_H
#define LB_FORMAT_H

/* ---------------------------------------------------------------- directory tree */
#define LB_DIR_CATALOG		"catalog"	/* <data>/catalog/: the LMDB environment */
#define LB_FILE_LOCK		"writer.lock"	/* <data>/<logspace>/writer.lock: one writer */
#define LB_FILE_MESSAGES	"messages"	/* <day>/messages: sealed blocks */
#define LB_FILE_WAL		"messages.wal"	/* <day>/messages.wal: the open block */
#define LB_DIR_INDEX		"index"		/* <day>/index/: segment files */
#define LB_ARCHIVE_RESTORED	"restored"	/* <day>/restored: brought back from the archive */
#define LB_SEG_SUFFIX		".seg"		/* <day>/index/<first>-<last>.seg, ids in hex */

/*
 * The data directory's own folders. A logspace lives in <data>/<name>/, so none may take one
 * of these names: LB_RESERVED_NAMES lists them for lb_logspace_name_ok() (and, parsed from this
 * file, for the Python copy in rpc/logbox_core/constants.py).
 */
#define LB_DIR_INDEXD		"indexd"	/* indexd's state, lock, reserve, dead letters */
#define LB_DIR_SPOOL		"spool"		/* the collector's spool files (FORMAT.md §13) */
#define LB_DIR_COLLECTOR	"collector"	/* syslog-ng's persist file (make run) */
#define LB_DIR_ACCOUNTS		"accounts"	/* the web UI's and the API's accounts store */
#define LB_DIR_RUN		"run"		/* sockets and pid files (make run) */
#define LB_DIR_TLS		"tls"		/* keys and certificates (make run) */
#define LB_RESERVED_NAMES	LB_DIR_INDEXD, LB_DIR_CATALOG, LB_DIR_COLLECTOR, \
				LB_DIR_ACCOUNTS, LB_DIR_RUN, LB_DIR_TLS, LB_DIR_SPOOL

/* ---------------------------------------------------------------- limits */
#define LB_MSG_MAX		(256 * 1024)	/* message bytes kept; longer ones are cut */
#define LB_FIELD_MAX		255		/* host, program, pid, msgid bytes kept */
#define LB_SD_MAX		(16 * 1024)	/* structured-data bytes kept */

/* ---------------------------------------------------------------- message file (lb_msgfile.c) */
/*
 * Both files start with a 24-byte file header: magic, version, first id, reserved, CRC of
 * bytes 0..19. "messages" then holds sealed blocks back to back; "messages.wal" holds one
 * framed record per message of the block being filled.
 */
#define LB_MSGF_MAGIC		0x464d424cU	/* "LBMF" at offset 0 of messages */
#define LB_WAL_MAGIC		0x574d424cU	/* "LBMW" at offset 0 of messages.wal */
#define LB_MSGF_VERSION		1
#define LB_FHDR_SIZE		24	/* file header */
#define LB_FHDR_MAGIC		0	/* u32 */
#define LB_FHDR_VERSION		4	/* u32 */
#define LB_FHDR_FIRST_ID	8	/* u64: id of the day's first message */
#define LB_FHDR_RESERVED	16	/* u32: 0 */
#define LB_FHDR_CRC		20	/* u32: CRC of bytes 0..19 */

#define LB_BLK_MAGIC		0x314b424cU	/* "LBK1" at offset 0 of every block header */
#define LB_BHDR_SIZE		52	/* block header */
#define LB_BHDR_MAGIC		0	/* u32 */
#define LB_BHDR_COUNT		4	/* u32: records in the block, >= 1 */
#define LB_BHDR_FIRST_ID	8	/* u64: id of the first record */
#define LB_BHDR_TMIN		16	/* i64: smallest receive time, µs */
#define LB_BHDR_TMAX		24	/* i64: largest receive time, µs */
#define LB_BHDR_RAW_LEN		32	/* u32: payload bytes before compression */
#define LB_BHDR_COMP_LEN	36	/* u32: payload bytes on disk (<= raw length) */
#define LB_BHDR_PAYLOAD_CRC	40	/* u32: CRC of the payload as stored */
#define LB_BHDR_METHOD		44	/* u8: LB_BLK_STORED .. LB_BLK_TPL */
#define LB_BHDR_RESERVED	45	/* 3 bytes: 0 */
#define LB_BHDR_CRC		48	/* u32: CRC of bytes 0..47 */
#define LB_BLK_STORED		0	/* payload kept as is (compressing did not make it smaller) */
#define LB_BLK_DEFLATE		1	/* raw DEFLATE (RFC 1951), no zlib header: written before zstd */
#define LB_BLK_ZSTD		2	/* one zstd frame (RFC 8878) with its content size */
#define LB_BLK_COLS		3	/* the records as columns, each stream stored or one zstd frame */
#define LB_BLK_TPL		4	/* columns with the bodies as per-block templates + variables */

/*
 * A block is sealed once its payload reaches LB_BLOCK_RAW_TARGET bytes. zlib's window is
 * 32 KiB, so bigger blocks barely compress better but cost more per random read.
 */
#define LB_BLOCK_RAW_TARGET	(64 * 1024)
#define LB_BLOCK_RAW_MAX	(1024 * 1024)	/* a reader rejects a longer raw length */
#define LB_REC_MIN		12	/* smallest encoded record: count <= raw / LB_REC_MIN */

#define LB_WREC_HDR		8	/* WAL record frame: u32 length, u32 CRC of the body */
#define LB_WREC_MAX		(1024 * 1024)	/* a reader rejects a longer WAL record body */

/* ------------------------------------------------ segment file (lb_segout.c, lb_segment.c) */
/*
 * <day>/index/<first>-<last>.seg: header | postings | dictionary | block index (FORMAT.md §4).
 * Offsets below are byte offsets in the 128-byte header; all integers little-endian.
 */
#define LB_SEG_MAGIC		"LBSEG\r\n\x1a"	/* 8 bytes at offset 0 */
#define LB_SEG_MAGIC_LEN	8
#define LB_SEG_VERSION		3	/* text terms hold the tokens' forms */
#define LB_SEG_VERSION_NOFORMS	2	/* still read: text terms are the tokens only */
#define LB_SEG_HDR_SIZE		128		/* the postings section starts here */
#define LB_SEG_H_VERSION	8		/* u32 format version */
#define LB_SEG_H_FLAGS		12		/* u32, LB_SEG_F_* */
#define LB_SEG_F_EVTIME		0x1		/* the segment holds LB_NS_EVTIME terms */
#define LB_SEG_H_FIRST		16		/* u64 smallest id */
#define LB_SEG_H_LAST		24		/* u64 largest id */
#define LB_SEG_H_COUNT		32		/* u64 messages */
#define LB_SEG_H_TMIN		40		/* i64 receive-time range, µs */
#define LB_SEG_H_TMAX		48
#define LB_SEG_H_NTERMS		56		/* u64 distinct terms */
#define LB_SEG_H_POSTLEN	64		/* u64 postings section length */
#define LB_SEG_H_DICTOFF	72		/* u64 dictionary section offset */
#define LB_SEG_H_DICTLEN	80		/* u64 dictionary section length */
#define LB_SEG_H_IDXOFF		88		/* u64 block index offset */
#define LB_SEG_H_IDXLEN		96		/* u64 block index length */
#define LB_SEG_H_NBLOCKS	104		/* u32 dictionary blocks */
#define LB_SEG_H_POSTCRC	108		/* u32 CRC of the postings section */
#define LB_SEG_H_IDXCRC		112		/* u32 CRC of the block index */
#define LB_SEG_H_RESERVED	116		/* 8 bytes, 0 */
#define LB_SEG_H_CRC		124		/* u32 CRC of header bytes 0..123 */
#define LB_SEG_IDX_ENTRY	16		/* u64 block offset, u32 key offset, u32 key length */
#define LB_SEG_BLOCK_TERMS	512		/* at most this many terms per dictionary block */
#define LB_SEG_BLOCK_BYTES	8192		/* a block is closed once its entries reach this */
#define LB_SEG_BLOCK_RAW_MAX	10240		/* longest block before compression (a reader's limit) */
#define LB_SEG_COOKIE_SHIFT	16		/* a term's cookie: block << 16 | entry */
#define LB_SEG_BIGLIST		64		/* id lists this long (bytes) carry their own CRC */
#define LB_SEG_TERM_MAX		1024		/* longest term, namespace byte included */
#define LB_SEG_TPL_MIN		2		/* messages of a segment a template term needs */

/* ---------------------------------------------------------------- catalog (lb_catalog.c) */
#define LB_CAT_VERSION		2		/* catalog format version, in the meta record: 2 since zstd blocks */
#define LB_CAT_VERSION_MIN	1		/* the oldest version still opened (a writer raises it) */
#define LB_CAT_MAGIC		0x5443424cU	/* "LBCT" little-endian: meta record magic */
#define LB_CAT_MAXDBS		8		/* mdb_env_set_maxdbs(): named databases */
#define LB_CAT_MAPSIZE		(64ULL << 30)	/* LMDB map size: 64 GiB of address space */
#define LB_CAT_DB_META		"meta"		/* "format" -> magic, version */
#define LB_CAT_DB_LOGSPACES	"logspaces"	/* name -> struct lb_lsconf */
#define LB_CAT_DB_SEGMENTS	"segments"	/* name 00 first_id(BE) -> struct lb_segref */
#define LB_CAT_DB_DAYS		"days"		/* name 00 day(BE) -> struct lb_dayref */
#define LB_CAT_DB_TIMEMAP	"timemap"	/* name 00 step time(BE, biased) -> id */
#define LB_CAT_DB_STATE		"state"		/* name -> struct lb_lsstate */
#define LB_CAT_META_KEY		"format"	/* the one key of the meta database */
#define LB_CAT_META_SIZE	12		/* magic u32, version u32, crc u32 */
#define LB_CAT_VALUE_V1		1		/* first byte of every v1 value but meta */
#define LB_CAT_LSCONF_SIZE	89		/* bytes of a logspaces value */
#define LB_CAT_SEGREF_SIZE	125		/* bytes of a segments value */
#define LB_CAT_DAYREF_SIZE	41		/* bytes of a days value */
#define LB_CAT_TIMEMAP_SIZE	13		/* bytes of a timemap value */
#define LB_CAT_STATE_SIZE	29		/* bytes of a state value */
#define LB_CAT_TIME_BIAS	0x8000000000000000ULL	/* added to signed µs in timemap keys */

/* ---------------------------------------------------------------- dead-letter file (lb_deadletter.c) */
/*
 * <data>/indexd/deadletter (FORMAT.md §12): a 16-byte file header, then records back to back,
 * each a 12-byte record header (magic, body length, CRC of the body) and the body.
 */
#define LB_DL_FILE		"indexd/deadletter"	/* under the data directory */
#define LB_DL_MAGIC		0x4c44424cU	/* "LBDL" at offset 0 of the file */
#define LB_DL_VERSION		1
#define LB_DL_FHDR_SIZE		16	/* file header */
#define LB_DL_FHDR_MAGIC	0	/* u32 */
#define LB_DL_FHDR_VERSION	4	/* u32 */
#define LB_DL_FHDR_RESERVED	8	/* u32: 0 */
#define LB_DL_FHDR_CRC		12	/* u32: CRC of bytes 0..11 */
#define LB_DL_REC_MAGIC		0x5244424cU	/* "LBDR" at offset 0 of every record */
#define LB_DL_RHDR_SIZE		12	/* record header */
#define LB_DL_RHDR_MAGIC	0	/* u32 */
#define LB_DL_RHDR_LEN		4	/* u32: body bytes */
#define LB_DL_RHDR_CRC		8	/* u32: CRC of the body */
#define LB_DL_BODY_MIN		108	/* a body with empty input, reason and frame */
#define LB_DL_FRAME_MAX		(1024 * 1024)	/* frame bytes a record may hold */
#define LB_DL_BODY_MAX		(LB_DL_BODY_MIN + 2 * 65535 + LB_DL_FRAME_MAX)

/* ---------------------------------------------------------------- hash chain (lb_chain.c) */
/*
 * <day>/chain (FORMAT.md §14): records back to back, each a 32-byte header (magic, length,
 * kind, flags, seq, time), the kind's body, then a 68-byte trailer: the hash of the record
 * before, this record's SHA-256 (of every byte before it), and the length again.
 */
#define LB_FILE_CHAIN		"chain"		/* <day>/chain */
#define LB_CHAIN_MAGIC		0x5243424cU	/* "LBCR" at offset 0 of every record */
#define LB_CHR_MAGIC		0	/* u32 */
#define LB_CHR_LEN		4	/* u32: the record's bytes, header to trailer */
#define LB_CHR_KIND		8	/* u8: LB_CH_* */
#define LB_CHR_FLAGS		9	/* u8: LB_CHF_* */
#define LB_CHR_RESERVED		10	/* 6 bytes: 0 */
#define LB_CHR_SEQ		16	/* u64 */
#define LB_CHR_TIME		24	/* i64: µs since the epoch */
#define LB_CHR_HDR_SIZE		32
#define LB_CHR_TRAILER_SIZE	68	/* prev (32), hash (32), length (u32) */
#define LB_CHR_MAX		(1024 * 1024)	/* bytes a record may have */
#define LB_CH_GENESIS		1	/* body: logspace[64] day u32 prev_day u32 prev_seq u64 */
#define LB_CH_BLOCK		2	/* body: first_id u64 off u64 count u32 len u32 sha[32] */
#define LB_CH_SEGMENT		3	/* body: name[64] first u64 last u64 count u64 size u64
				   level u32 nrepl u32 sha[32], then nrepl names[64] */
#define LB_CH_TOMB		4	/* body: day u32 flags u32 first_id u64 count u64 seq u64
				   head[32] sig[64] */
#define LB_CHT_SIGNED		0x01	/* a tombstone's flags: sig is an Ed25519 signature */
#define LB_CH_SEAL		5	/* body: epoch u64 started i64 mac[32] */
#define LB_CH_DAYROOT		6	/* body: first_id u64 count u64 sig[64] */
#define LB_CHF_RECOVERED	0x01	/* chained when the writer opened, not when made */
#define LB_CH_GENESIS_BODY	80
#define LB_CH_BLOCK_BODY	56
#define LB_CH_SEGMENT_BODY	136	/* without the names it replaces */
#define LB_CH_TOMB_BODY		128
#define LB_CH_SEAL_BODY		48
#define LB_CH_DAYROOT_BODY	80

/* ---------------------------------------------------------------- seals (lb_seal.c) */
/*
 * <data>/indexd/seal (FORMAT.md §14.5): two 96-byte slots; the sound one with the higher epoch
 * is the key now. A new key goes to the other slot, then the old slot is zeroed.
 */
#define LB_SEAL_FILE		"indexd/seal"	/* under the data directory */
#define LB_SEAL_MAGIC		0x4b53424cU	/* "LBSK" at offset 0 of each slot */
#define LB_SEAL_VERSION		1
#define LB_SEAL_SLOT_SIZE	96
#define LB_SEAL_SLOT_MAGIC	0	/* u32 */
#define LB_SEAL_SLOT_VERSION	4	/* u32 */
#define LB_SEAL_SLOT_EPOCH	8	/* u64 */
#define LB_SEAL_SLOT_STARTED	16	/* i64: µs when the epoch began */
#define LB_SEAL_SLOT_INTERVAL	24	/* u64: µs of an epoch */
#define LB_SEAL_SLOT_KEY	32	/* 32 bytes: K_epoch */
#define LB_SEAL_SLOT_CRC	92	/* u32: CRC of bytes 0..91 */
#define LB_SEAL_RATCHET_TAG	"LBRATCH1"	/* K_{e+1} = HMAC(K_e, tag || u64 e+1) */
#define LB_SEAL_RATCHET_TAG_LEN	8
#define LB_SEAL_MAC_TAG		"LBSEAL01"	/* a seal's MAC message starts with it */
#define LB_SEAL_MAC_TAG_LEN	8
#define LB_SEAL_INTERVAL_MIN	(1000000ULL)		/* µs: 1 s */
#define LB_SEAL_INTERVAL_MAX	(86400000000ULL)	/* µs: a day */
#define LB_SEAL_INTERVAL_DEFAULT (900000000ULL)		/* µs: 15 min */

/* ---------------------------------------------------------------- signed days (lb_sign.c) */
#define LB_SIGN_KEY_FILE	"indexd/sign.key"	/* Ed25519 private key, PEM, mode 0600 */
#define LB_SIGN_PUB_FILE	"indexd/sign.pub"	/* its public key, PEM */
#define LB_SIGN_TAG		"LBDAY001"	/* a day root's signed message starts with it */
#define LB_SIGN_TAG_LEN		8
#define LB_SIGN_MSG_LEN		132	/* tag, logspace[64], day, seq, head, first_id, count */
#define LB_SIGN_SIG_LEN		64
#define LB_TOMB_TAG		"LBTOMB01"	/* a tombstone's signed message starts with it */
#define LB_TOMB_MSG_LEN		164	/* tag, logspace[64], day, first, count, seq, head, prev */
#define LB_FILE_TSR		"root.tsr"	/* <day>/root.tsr: the day root's RFC 3161 reply */
#define LB_TSR_MAX		(64 * 1024)	/* bytes of a time-stamp reply kept */
#define LB_FILE_ROOT_SENT	"root.sent"	/* <day>/root.sent: the syslog line sent */

/* ---------------------------------------------------------------- time map */
#define LB_TIMEMAP_STEP		(1000000LL)	/* µs of receive time per time→id entry */

#endif /* LB_FORMAT_H */
