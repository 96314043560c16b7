/*
 * eps_sink — the bench's receiving end for tests/bench/eps.py: listens on 127.0.0.1 (an
 * ephemeral port, printed as one line on stdout), reads everything it is sent and throws it
 * away, and at SIGTERM prints what it got ("received N": bytes for tcp and tls, datagrams for
 * udp).
 * A thread per connection; TLS with OpenSSL (1.2 or newer), reading whole records.
 *
 *   eps_sink tcp|udp
 *   eps_sink tls CERT KEY
 *
 * In C so that the sink is no slower than either sender: a Python reader of TLS gets one record
 * per call, and a sender that writes one message per record (loggen) would be measured by it.
 * Built by eps.py with cc -O2 ... -lssl -lcrypto -lpthread (bench only, never shipped).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_ullong	 got;
static SSL_CTX		*ctx;

static void *
reader(void *arg)
{
	int		 fd = (int)(intptr_t)arg;
	static __thread char buf[1 << 20];
	SSL		*ssl = NULL;
	long		 n;

	if (ctx != NULL) {
		if ((ssl = SSL_new(ctx)) == NULL || SSL_set_fd(ssl, fd) != 1 ||
		    SSL_accept(ssl) != 1)
			goto out;
	}
	for (;;) {
		n = ssl != NULL ? SSL_read(ssl, buf, sizeof(buf)) : read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		atomic_fetch_add(&got, (unsigned long long)n);
	}
out:
	if (ssl != NULL)
		SSL_free(ssl);
	close(fd);
	return (NULL);
}

static void
report(int sig)
{
	char	line[64];
	int	len;

	(void)sig;
	len = snprintf(line, sizeof(line), "received %llu\n",
	    (unsigned long long)atomic_load(&got));
	if (write(STDOUT_FILENO, line, (size_t)len) < 0)
		_exit(1);
	_exit(0);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in	 sin;
	socklen_t		 len = sizeof(sin);
	int			 udp, fd, c, one = 1, rcvbuf = 8 << 20;
	pthread_t		 t;
	static char		 dgram[65536];

	if (argc < 2 || (strcmp(argv[1], "tls") == 0 && argc != 4)) {
		fprintf(stderr, "usage: eps_sink tcp|udp | eps_sink tls CERT KEY\n");
		return (2);
	}
	udp = strcmp(argv[1], "udp") == 0;
	if (strcmp(argv[1], "tls") == 0) {
		ctx = SSL_CTX_new(TLS_server_method());
		if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
		    SSL_CTX_use_certificate_chain_file(ctx, argv[2]) != 1 ||
		    SSL_CTX_use_PrivateKey_file(ctx, argv[3], SSL_FILETYPE_PEM) != 1) {
			ERR_print_errors_fp(stderr);
			return (1);
		}
	}
	signal(SIGTERM, report);
	signal(SIGPIPE, SIG_IGN);
	fd = socket(AF_INET, udp ? SOCK_DGRAM : SOCK_STREAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    (!udp && listen(fd, 64) != 0) || getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
		perror("eps_sink");
		return (1);
	}
	printf("%d\n", ntohs(sin.sin_port));
	fflush(stdout);
	if (udp) {
		for (;;)
			if (recv(fd, dgram, sizeof(dgram), 0) >= 0)
				atomic_fetch_add(&got, 1);
	}
	for (;;) {
		if ((c = accept(fd, NULL, NULL)) < 0)
			continue;
		if (pthread_create(&t, NULL, reader, (void *)(intptr_t)c) != 0)
			close(c);
		else
			pthread_detach(t);
	}
}
