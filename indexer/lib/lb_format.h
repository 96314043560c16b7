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
#define LB_SEG_SUFFIX		".seg"		/* <day>/index/<first>-<last>.seg, ids in hex */

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
#define LB_BHDR_METHOD		44	/* u8: LB_BLK_STORED or LB_BLK_DEFLATE */
#define LB_BHDR_RESERVED	45	/* 3 bytes: 0 */
#define LB_BHDR_CRC		48	/* u32: CRC of bytes 0..47 */
#define LB_BLK_STORED		0	/* payload kept as is (deflate did not make it smaller) */
#define LB_BLK_DEFLATE		1	/* raw DEFLATE (RFC 1951), no zlib header */

/*
 * A block is sealed once its payload reaches LB_BLOCK_RAW_TARGET bytes. zlib's window is
 * 32 KiB, so bigger blocks barely compress better but cost more per random read.
 */
#define LB_BLOCK_RAW_TARGET	(64 * 1024)
#define LB_BLOCK_RAW_MAX	(1024 * 1024)	/* a reader rejects a longer raw length */
#define LB_REC_MIN		12	/* smallest encoded record: count <= raw / LB_REC_MIN */

#define LB_WREC_HDR		8	/* WAL record frame: u32 length, u32 CRC of the body */
#define LB_WREC_MAX		(1024 * 1024)	/* a reader rejects a longer WAL record body */

/* ---------------------------------------------------------------- segment file (lb_segment.c) */
/* (section owned by lb_segment.c) */

/* ---------------------------------------------------------------- catalog (lb_catalog.c) */
/* (section owned by lb_catalog.c) */

/* ---------------------------------------------------------------- time map */
#define LB_TIMEMAP_STEP		(1000000LL)	/* µs of receive time per time→id entry */

#endif /* LB_FORMAT_H */
