/*
 * lb_tsa.c — RFC 3161 time stamps of day roots (FORMAT.md §14.7): the request over a day
 * root's hash (SHA-256 message imprint, a nonce, the TSA's certificate asked for), the check
 * of a reply against that hash (and, given the TSA's CA, its signature), and the token file
 * beside the day. OpenSSL's TS API; the HTTP is the caller's (indexd).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/objects.h>
#include <openssl/ts.h>
#include <openssl/x509.h>

#include "logbox.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

int
lb_tsa_request(const uint8_t digest[LB_SHA256_LEN], uint8_t **der, size_t *len)
{
	TS_REQ		*req = NULL;
	TS_MSG_IMPRINT	*mi = NULL;
	X509_ALGOR	*alg = NULL;
	ASN1_INTEGER	*nonce = NULL;
	BIGNUM		*bn = NULL;
	uint8_t		 nb[8], *out = NULL;
	int		 n, rc = ENOMEM;

	*der = NULL;
	*len = 0;
	if (getrandom(nb, sizeof(nb), 0) != (ssize_t)sizeof(nb))
		return (errno != 0 ? errno : EIO);
	if ((req = TS_REQ_new()) == NULL || (mi = TS_MSG_IMPRINT_new()) == NULL ||
	    (alg = X509_ALGOR_new()) == NULL)
		goto done;
	if (!X509_ALGOR_set0(alg, OBJ_nid2obj(NID_sha256), V_ASN1_NULL, NULL) ||
	    !TS_MSG_IMPRINT_set_algo(mi, alg) ||
	    !TS_MSG_IMPRINT_set_msg(mi, (unsigned char *)digest, LB_SHA256_LEN) ||
	    !TS_REQ_set_version(req, 1) || !TS_REQ_set_msg_imprint(req, mi) ||
	    !TS_REQ_set_cert_req(req, 1))
		goto done;
	if ((bn = BN_bin2bn(nb, sizeof(nb), NULL)) == NULL ||
	    (nonce = BN_to_ASN1_INTEGER(bn, NULL)) == NULL || !TS_REQ_set_nonce(req, nonce))
		goto done;
	if ((n = i2d_TS_REQ(req, &out)) <= 0)
		goto done;
	if ((*der = malloc((size_t)n)) == NULL) {
		rc = errno;
		goto done;
	}
	memcpy(*der, out, (size_t)n);
	*len = (size_t)n;
	rc = 0;
 done:
	OPENSSL_free(out);
	BN_free(bn);
	ASN1_INTEGER_free(nonce);
	X509_ALGOR_free(alg);
	TS_MSG_IMPRINT_free(mi);
	TS_REQ_free(req);
	return (rc);
}

int
lb_tsa_check(const uint8_t *resp, size_t len, const uint8_t digest[LB_SHA256_LEN],
    const char *cafile, int64_t *when, char *why, size_t whylen)
{
	const unsigned char	*p = resp;
	TS_RESP			*r = NULL;
	TS_VERIFY_CTX		*ctx = NULL;
	X509_STORE		*store = NULL;
	TS_TST_INFO		*info;
	unsigned char		*imp = NULL;
	int			 rc = LB_ECORRUPT, flags;

	if (when != NULL)
		*when = 0;
	if (len > LONG_MAX || (r = d2i_TS_RESP(NULL, &p, (long)len)) == NULL ||
	    p != resp + len) {
		lb_setwhy(why, whylen, "not an RFC 3161 time-stamp reply");
		goto done;
	}
	if ((ctx = TS_VERIFY_CTX_new()) == NULL || (imp = OPENSSL_memdup(digest,
	    LB_SHA256_LEN)) == NULL) {
		rc = ENOMEM;
		goto done;
	}
	flags = TS_VFY_VERSION | TS_VFY_IMPRINT;
	if (cafile != NULL) {
		if ((store = X509_STORE_new()) == NULL || !X509_STORE_load_file(store, cafile)) {
			lb_setwhy(why, whylen, "cannot load the TSA's CA %s", cafile);
			rc = LB_EBADCONF;
			goto done;
		}
		TS_VERIFY_CTX_set_store(ctx, store);
		store = NULL;
		flags |= TS_VFY_SIGNATURE | TS_VFY_SIGNER;
	}
	TS_VERIFY_CTX_set_flags(ctx, flags);
	TS_VERIFY_CTX_set_imprint(ctx, imp, LB_SHA256_LEN);
	imp = NULL;
	if (TS_RESP_verify_response(ctx, r) != 1) {
		lb_setwhy(why, whylen, "%s", cafile != NULL ? "the token is not a time stamp of "
		    "this day root by a TSA the CA vouches for (swapped, edited, or another TSA)" :
		    "the token is not a granted time stamp of this day root (swapped or edited)");
		goto done;
	}
	if (when != NULL && (info = TS_RESP_get_tst_info(r)) != NULL) {
		const ASN1_GENERALIZEDTIME *t = TS_TST_INFO_get_time(info);
		struct tm tm;

		if (t != NULL && ASN1_TIME_to_tm(t, &tm))
			*when = (int64_t)timegm(&tm) * 1000000;
	}
	rc = 0;
 done:
	OPENSSL_free(imp);
	X509_STORE_free(store);
	TS_VERIFY_CTX_free(ctx);
	TS_RESP_free(r);
	return (rc);
}

int
lb_tsa_path(char *buf, size_t len, const char *daydir)
{
	return (lb_path(buf, len, "%s/%s", daydir, LB_FILE_TSR));
}

int
lb_tsa_save(const char *daydir, const uint8_t *resp, size_t len)
{
	char	path[PATH_MAX], tmp[PATH_MAX];
	int	fd, rc;

	if ((rc = lb_tsa_path(path, sizeof(path), daydir)) != 0 ||
	    (rc = lb_path(tmp, sizeof(tmp), "%s.tmp", path)) != 0)
		return (rc);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)) == -1)
		return (errno);
	rc = lb_write_all(fd, resp, len);
	if (rc == 0 && fsync(fd) == -1)
		rc = errno;
	close(fd);
	if (rc == 0 && rename(tmp, path) == -1)
		rc = errno;
	if (rc == 0)
		rc = lb_fsync_dir(daydir);
	if (rc != 0)
		unlink(tmp);
	return (rc);
}
