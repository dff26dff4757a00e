/*
 * DTLS 1.2 load generator for `npm run bench`, on OpenSSL (a native peer nobody here wrote, so the client costs
 * little CPU next to the server under test). Built by bench/dtls.ts with `gcc -O2 ... -lssl -lcrypto`.
 *
 *   dtls-load hs   <host> <port> <seconds> psk <identity> <keyhex>
 *   dtls-load hs   <host> <port> <seconds> cert <cert.pem> <key.pem> <ca.pem>
 *       full handshakes back to back (new socket, new session, close_notify), one at a time
 *   dtls-load coap <host> <port> <seconds> <sessions> psk <identity-prefix> <keyhex> <first> <path> [<interval-ms>]
 *       <sessions> PSK sessions (identities <identity-prefix><first+i>, one key for all), each with one CoAP CON POST
 *       in flight at a time (closed loop); the round trip is measured from send to the piggybacked answer;
 *       <path> "put:/example_data" sends PUT instead of POST (libcoap's coap-server answers PUT there);
 *       an optional last argument <interval-ms> paces each session to one request per interval (latency counted from
 *       when each request was due)
 *       with DTLS_LOAD_BARRIER set: prints "ready" once its sessions are up and starts its load when a line arrives on
 *       stdin (the parallel processes of one row start together)
 *
 *   dtls-load idle <host> <port> <seconds> <sessions> psk <identity> <keyhex>
 *       opens <sessions> PSK sessions, prints "connected <n>", holds them idle for <seconds>, then closes them
 *
 * Prints one JSON line: {"ok":n,"errors":n,"cpuMs":n,"hist":[[bucket,count],...],"suite":"...","sessions":n} (cpuMs: this process's own CPU time; sessions: coap mode's sessions whose handshake succeeded) where bucket b holds latencies in
 * [1.02^b, 1.02^(b+1)) microseconds; bench/dtls.ts merges the lines of parallel processes. suite: the cipher suite
 * (OpenSSL name) and ECDHE group the server chose in the first handshake that completed ("" when none did).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUCKETS 1200
static unsigned long hist[BUCKETS];
static unsigned long ok_count, err_count;
/* coap mode: sessions whose handshake succeeded */
static int sessions_up;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* answers slower than slow_us (DTLS_LOAD_SLOW_MS, 100 ms by default), by the 100 ms slot (since the load started) in
   which they came back */
#define SLOTS 6000
static unsigned long slow[SLOTS];
static double slow_us = 100000;
static double started_us, started_wall_ms;

static double now_us(void);

static void record(double us) {
  int b = us < 1 ? 0 : (int)(log(us) / log(1.02));
  if (b >= BUCKETS) b = BUCKETS - 1;
  hist[b]++;
  ok_count++;
  if (us > slow_us) {
    long slot = (long)((now_us() - started_us) / 100000);
    if (slot >= 0 && slot < SLOTS) slow[slot]++;
  }
}

/* what the server negotiated in the first completed handshake: "<cipher>[ <group>]" */
static char suite[96];

static void note_suite(SSL *ssl) {
  if (suite[0]) return;
  EVP_PKEY *tmp = NULL;
  const char *group = NULL;
  char gname[32] = "";
  if (SSL_get_peer_tmp_key(ssl, &tmp) == 1 && tmp) {
    size_t len = 0;
    if (EVP_PKEY_get_group_name(tmp, gname, sizeof gname, &len) == 1) group = gname;
    else group = EVP_PKEY_get0_type_name(tmp);
  }
  snprintf(suite, sizeof suite, "%s%s%s", SSL_get_cipher_name(ssl), group ? " " : "", group ? group : "");
  EVP_PKEY_free(tmp);
}

static const char *psk_identity;
static unsigned char psk_key[64];
static int psk_key_len;

static unsigned int psk_cb(SSL *ssl, const char *hint, char *identity, unsigned int max_identity, unsigned char *psk,
                           unsigned int max_psk) {
  (void)hint;
  const char *id = SSL_get_app_data(ssl) ? (const char *)SSL_get_app_data(ssl) : psk_identity;
  if (strlen(id) + 1 > max_identity || (unsigned)psk_key_len > max_psk) return 0;
  strcpy(identity, id);
  memcpy(psk, psk_key, psk_key_len);
  return psk_key_len;
}

static int hexkey(const char *hex) {
  int n = strlen(hex) / 2;
  if (n > 64) return -1;
  for (int i = 0; i < n; i++) sscanf(hex + 2 * i, "%2hhx", &psk_key[i]);
  return n;
}

static struct sockaddr_in server;

static int udp_connected(void) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&server, sizeof server) != 0) return -1;
  return fd;
}

/* A connected DTLS client on a fresh socket; NULL when the handshake fails. */
static SSL *dtls_connect(SSL_CTX *ctx, int *fd_out, const char *identity) {
  int fd = udp_connected();
  if (fd < 0) return NULL;
  BIO *bio = BIO_new_dgram(fd, BIO_NOCLOSE);
  BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_CONNECTED, 0, &server);
  struct timeval tv = {5, 0};
  BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_RECV_TIMEOUT, 0, &tv);
  SSL *ssl = SSL_new(ctx);
  SSL_set_app_data(ssl, (void *)identity);
  SSL_set_bio(ssl, bio, bio);
  SSL_set_mtu(ssl, 1200);
  if (SSL_connect(ssl) != 1) {
    ERR_clear_error();
    SSL_free(ssl);
    close(fd);
    return NULL;
  }
  note_suite(ssl);
  *fd_out = fd;
  return ssl;
}

static SSL_CTX *make_ctx(char **argv, int argc, int at) {
  SSL_CTX *ctx = SSL_CTX_new(DTLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx, DTLS1_2_VERSION);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  if (at < argc && strcmp(argv[at], "psk") == 0 && at + 2 < argc) {
    psk_identity = argv[at + 1];
    psk_key_len = hexkey(argv[at + 2]);
    SSL_CTX_set_cipher_list(ctx, "PSK-AES128-CCM8");
    SSL_CTX_set_psk_client_callback(ctx, psk_cb);
  } else if (at < argc && strcmp(argv[at], "cert") == 0 && at + 3 < argc) {
    SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-CCM8:ECDHE-ECDSA-AES128-GCM-SHA256");
    if (SSL_CTX_use_certificate_chain_file(ctx, argv[at + 1]) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, argv[at + 2], SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_load_verify_locations(ctx, argv[at + 3], NULL) != 1) {
      fprintf(stderr, "cannot load client certificate, key or CA\n");
      exit(2);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  } else {
    fprintf(stderr, "credentials: psk <identity> <keyhex> | cert <cert> <key> <ca>\n");
    exit(2);
  }
  return ctx;
}

static void handshakes(SSL_CTX *ctx, double seconds) {
  double end = now_us() + seconds * 1e6;
  while (now_us() < end) {
    double t0 = now_us();
    int fd;
    SSL *ssl = dtls_connect(ctx, &fd, NULL);
    if (!ssl) {
      err_count++;
      continue;
    }
    record(now_us() - t0);
    SSL_shutdown(ssl);
    SSL_free(ssl);
    close(fd);
  }
}

/* CoAP CON POST (or PUT when `path` starts with "put:"), Uri-Path segments from `path`, Content-Format 50, JSON. */
static int coap_post(unsigned char *out, unsigned short mid, unsigned int token, const char *path, const char *json) {
  int n = 0;
  int put = strncmp(path, "put:", 4) == 0;
  if (put) path += 4;
  out[n++] = 0x44; /* ver 1, CON, TKL 4 */
  out[n++] = put ? 0x03 : 0x02;
  out[n++] = mid >> 8;
  out[n++] = mid & 0xff;
  memcpy(out + n, &token, 4);
  n += 4;
  int last = 0;
  const char *p = path;
  while (*p) {
    while (*p == '/') p++;
    const char *e = strchr(p, '/');
    int len = e ? (int)(e - p) : (int)strlen(p);
    if (len == 0) break;
    int delta = 11 - last; /* Uri-Path */
    out[n++] = (delta << 4) | (len < 13 ? len : 13);
    if (len >= 13) out[n++] = len - 13;
    memcpy(out + n, p, len);
    n += len;
    last = 11;
    p += len;
  }
  out[n++] = ((12 - last) << 4) | 1; /* Content-Format: 50 */
  out[n++] = 50;
  out[n++] = 0xff;
  int jl = strlen(json);
  memcpy(out + n, json, jl);
  return n + jl;
}

struct sess {
  SSL *ssl;
  int fd;
  unsigned short mid;
  unsigned int token;
  double sent;    /* when the request in flight went out */
  double due;     /* when the next request is due (paced mode: on a fixed schedule) */
  int waiting;    /* a request is in flight */
  char identity[128];
};

static int coap_send(struct sess *s, const char *path, unsigned long seq) {
  unsigned char buf[512];
  char json[96];
  snprintf(json, sizeof json, "{\"v\":%lu.5,\"t\":%ld}", seq % 400, (long)time(NULL) * 1000);
  s->mid++;
  s->token++;
  int n = coap_post(buf, s->mid, s->token, path, json);
  s->sent = now_us();
  s->waiting = 1;
  return SSL_write(s->ssl, buf, n) == n ? 0 : -1;
}

/*
 * interval_us 0: closed loop, each session sends its next request as soon as the answer arrives.
 * interval_us > 0: paced, each session's requests are due on a fixed schedule (starts spread over one interval); a
 * request sent late (its answer was slow) still counts its latency from when it was due, so slowness is not hidden.
 */
static void coap_load(SSL_CTX *ctx, double seconds, int count, const char *prefix, int first, const char *path, double interval_us) {
  struct sess *ss = calloc(count, sizeof *ss);
  struct pollfd *pfd = calloc(count, sizeof *pfd);
  int open = 0;
  for (int i = 0; i < count; i++) {
    snprintf(ss[i].identity, sizeof ss[i].identity, "%s%d", prefix, first + i);
    ss[i].ssl = dtls_connect(ctx, &ss[i].fd, ss[i].identity);
    if (!ss[i].ssl) {
      err_count++;
      ss[i].fd = -1;
      continue;
    }
    fcntl(ss[i].fd, F_SETFL, O_NONBLOCK);
    ss[i].mid = rand();
    ss[i].token = rand();
    open++;
  }
  if (getenv("DTLS_LOAD_SLOW_MS")) slow_us = atof(getenv("DTLS_LOAD_SLOW_MS")) * 1000;
  /* every process's sessions are up before any process starts its load: the first second of one process's load
     would otherwise overlap the other processes' handshakes (bench/dtls.ts sends the go line to all at once) */
  if (getenv("DTLS_LOAD_BARRIER")) {
    printf("ready\n");
    fflush(stdout);
    char go[8];
    if (!fgets(go, sizeof go, stdin)) return;
  }
  sessions_up = open;
  if (open == 0) return;
  unsigned long seq = 0;
  double start = now_us();
  started_us = start;
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  started_wall_ms = wall.tv_sec * 1e3 + wall.tv_nsec / 1e6;
  double end = start + seconds * 1e6;
  for (int i = 0; i < count; i++) ss[i].due = start + (interval_us > 0 ? interval_us * i / count : 0);
  for (;;) {
    double t = now_us();
    if (t >= end) break;
    double next = t + 200e3;
    for (int i = 0; i < count; i++) {
      struct sess *s = &ss[i];
      if (!s->ssl) continue;
      if (!s->waiting && t >= s->due) {
        if (coap_send(s, path, seq++) != 0) err_count++;
      } else if (s->waiting && t - s->sent > 5e6) { /* lost: count it, the next one is due now */
        err_count++;
        s->waiting = 0;
        s->due = t;
      }
      if (!s->waiting && s->due < next) next = s->due;
      pfd[i].fd = s->fd;
      pfd[i].events = POLLIN;
    }
    /* sleep until the next request is due (to the microsecond: a millisecond poll timeout truncated to 0 made the
       paced mode spin a whole core whenever requests were due less than 1 ms apart, taking it from the server) */
    double wait_us = next > t ? next - t : 0;
    struct timespec ts = { (time_t)(wait_us / 1e6), (long)fmod(wait_us, 1e6) * 1000 };
    int r = ppoll(pfd, count, &ts, NULL);
    if (r <= 0) continue;
    for (int i = 0; i < count; i++) {
      struct sess *s = &ss[i];
      if (!s->ssl || !(pfd[i].revents & POLLIN)) continue;
      unsigned char in[2048];
      int n;
      while ((n = SSL_read(s->ssl, in, sizeof in)) > 0) {
        /* the answer to our request: ACK (piggybacked) or CON (separate) with our token */
        unsigned int tok;
        if (n < 8 || (in[0] & 0x0f) != 4) continue;
        memcpy(&tok, in + 4, 4);
        if (tok != s->token || in[1] == 0 || !s->waiting) continue;
        double now = now_us();
        double from = interval_us > 0 ? s->due : s->sent;
        if ((in[1] >> 5) == 2) record(now - from); else err_count++;
        if ((in[0] & 0x30) == 0x00) { /* separate CON response: acknowledge it */
          unsigned char ack[4] = {0x60, 0x00, in[2], in[3]};
          SSL_write(s->ssl, ack, 4);
        }
        s->waiting = 0;
        s->due = interval_us > 0 ? s->due + interval_us : now;
      }
      ERR_clear_error();
    }
  }
  for (int i = 0; i < count; i++)
    if (ss[i].ssl) {
      SSL_shutdown(ss[i].ssl);
      SSL_free(ss[i].ssl);
      close(ss[i].fd);
    }
}

static void idle(SSL_CTX *ctx, double seconds, int count) {
  SSL **ssl = calloc(count, sizeof *ssl);
  int *fd = calloc(count, sizeof *fd);
  for (int i = 0; i < count; i++) {
    ssl[i] = dtls_connect(ctx, &fd[i], NULL);
    if (ssl[i]) ok_count++; else err_count++;
  }
  printf("connected %lu\n", ok_count);
  fflush(stdout);
  usleep((useconds_t)(seconds * 1e6));
  for (int i = 0; i < count; i++)
    if (ssl[i]) {
      SSL_shutdown(ssl[i]);
      SSL_free(ssl[i]);
      close(fd[i]);
    }
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: see the header of dtls-load.c\n");
    return 2;
  }
  memset(&server, 0, sizeof server);
  server.sin_family = AF_INET;
  server.sin_port = htons(atoi(argv[3]));
  inet_pton(AF_INET, argv[2], &server.sin_addr);
  double seconds = atof(argv[4]);
  started_us = now_us();
  srand(getpid() ^ (unsigned)time(NULL));
  if (strcmp(argv[1], "hs") == 0) {
    handshakes(make_ctx(argv, argc, 5), seconds);
  } else if (strcmp(argv[1], "idle") == 0 && argc >= 9) {
    idle(make_ctx(argv, argc, 6), seconds, atoi(argv[5]));
  } else if (strcmp(argv[1], "coap") == 0 && argc >= 11) {
    SSL_CTX *ctx = make_ctx(argv, argc, 6);
    coap_load(ctx, seconds, atoi(argv[5]), argv[7], atoi(argv[9]), argv[10], argc > 11 ? atof(argv[11]) * 1000 : 0);
  } else {
    fprintf(stderr, "usage: see the header of dtls-load.c\n");
    return 2;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  printf("{\"ok\":%lu,\"errors\":%lu,\"cpuMs\":%.0f,\"hist\":[", ok_count, err_count, cpu_ms);
  int first = 1;
  for (int b = 0; b < BUCKETS; b++)
    if (hist[b]) {
      printf("%s[%d,%lu]", first ? "" : ",", b, hist[b]);
      first = 0;
    }
  printf("],\"startMs\":%.0f,\"slow\":[", started_wall_ms);
  first = 1;
  for (int i = 0; i < SLOTS; i++)
    if (slow[i]) {
      printf("%s[%d,%lu]", first ? "" : ",", i, slow[i]);
      first = 0;
    }
  printf("],\"suite\":\"%s\",\"sessions\":%d}\n", suite, sessions_up);
  return 0;
}
