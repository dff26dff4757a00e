/*
 * A CoAP-over-DTLS device as a cellular module would run it: mbedTLS (Debian's libmbedtls-dev, 2.28), DTLS 1.2,
 * PSK with TLS-PSK-WITH-AES-128-CCM-8 only. Sends one CoAP message given as hex and prints the payload of the
 * response to stdout; its type and code go to stderr as "type=ACK code=c.dd". An empty ACK (a separate response
 * is coming) is reported as "empty-ack" and skipped, and the Confirmable response that follows is ACKed.
 *
 *   mbedtls-coap-client <host> <port> <psk-identity> <psk-hex> <coap-message-hex>
 *
 * Built by test/coap/support.ts: gcc -o <out> mbedtls-coap-client.c -lmbedtls -lmbedx509 -lmbedcrypto
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <mbedtls/timing.h>

static int hex_decode(const char *hex, unsigned char *out, size_t max) {
    size_t n = strlen(hex);
    if (n % 2 != 0 || n / 2 > max) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned int byte;
        if (sscanf(hex + 2 * i, "%2x", &byte) != 1) return -1;
        out[i] = (unsigned char)byte;
    }
    return (int)(n / 2);
}

static int fail(const char *what, int ret) {
    char buf[200];
    mbedtls_strerror(ret, buf, sizeof buf);
    fprintf(stderr, "%s failed: -0x%04x %s\n", what, (unsigned int)-ret, buf);
    return 1;
}

/* Offset of the payload in a CoAP message, or len when there is none. */
static size_t payload_offset(const unsigned char *m, size_t len) {
    size_t i = 4 + (m[0] & 0x0f);
    while (i < len) {
        unsigned char b = m[i++];
        if (b == 0xff) return i;
        unsigned int delta = b >> 4, olen = b & 0x0f;
        i += delta == 13 ? 1 : delta == 14 ? 2 : 0;
        if (olen == 13) { if (i >= len) return len; olen = m[i] + 13; i += 1; }
        else if (olen == 14) { if (i + 1 >= len) return len; olen = ((m[i] << 8) | m[i + 1]) + 269; i += 2; }
        i += olen;
    }
    return len;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s host port psk-identity psk-hex coap-message-hex\n", argv[0]);
        return 2;
    }
    unsigned char psk[64], request[2048], response[2048];
    int psk_len = hex_decode(argv[4], psk, sizeof psk);
    int request_len = hex_decode(argv[5], request, sizeof request);
    if (psk_len <= 0 || request_len < 4) {
        fprintf(stderr, "bad hex argument\n");
        return 2;
    }
    static const int suites[] = { MBEDTLS_TLS_PSK_WITH_AES_128_CCM_8, 0 };
    mbedtls_net_context net;
    mbedtls_ssl_context ssl;
    mbedtls_ssl_config conf;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_timing_delay_context timer;
    int ret;

    mbedtls_net_init(&net);
    mbedtls_ssl_init(&ssl);
    mbedtls_ssl_config_init(&conf);
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    if ((ret = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, (const unsigned char *)"coap", 4)) != 0) return fail("ctr_drbg_seed", ret);
    if ((ret = mbedtls_net_connect(&net, argv[1], argv[2], MBEDTLS_NET_PROTO_UDP)) != 0) return fail("net_connect", ret);
    if ((ret = mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_DATAGRAM, MBEDTLS_SSL_PRESET_DEFAULT)) != 0) return fail("config_defaults", ret);
    mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, &drbg);
    mbedtls_ssl_conf_ciphersuites(&conf, suites);
    mbedtls_ssl_conf_min_version(&conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_read_timeout(&conf, 10000);
    if ((ret = mbedtls_ssl_conf_psk(&conf, psk, (size_t)psk_len, (const unsigned char *)argv[3], strlen(argv[3]))) != 0) return fail("conf_psk", ret);
    if ((ret = mbedtls_ssl_setup(&ssl, &conf)) != 0) return fail("ssl_setup", ret);
    mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, mbedtls_net_recv, mbedtls_net_recv_timeout);
    mbedtls_ssl_set_timer_cb(&ssl, &timer, mbedtls_timing_set_delay, mbedtls_timing_get_delay);

    while ((ret = mbedtls_ssl_handshake(&ssl)) != 0) {
        if (ret != MBEDTLS_ERR_SSL_WANT_READ && ret != MBEDTLS_ERR_SSL_WANT_WRITE) return fail("handshake", ret);
    }
    fprintf(stderr, "suite=%s\n", mbedtls_ssl_get_ciphersuite(&ssl));
    while ((ret = mbedtls_ssl_write(&ssl, request, (size_t)request_len)) <= 0) {
        if (ret != MBEDTLS_ERR_SSL_WANT_READ && ret != MBEDTLS_ERR_SSL_WANT_WRITE) return fail("write", ret);
    }
    for (;;) {
        do ret = mbedtls_ssl_read(&ssl, response, sizeof response);
        while (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE);
        if (ret <= 0) return fail("read", ret);
        size_t len = (size_t)ret;
        if (len < 4) continue;
        int type = (response[0] >> 4) & 3;
        if (type == 2 && response[1] == 0) { /* empty ACK: the answer follows separately */
            fprintf(stderr, "empty-ack\n");
            continue;
        }
        if (type == 0) { /* a Confirmable (separate) response: ACK it */
            unsigned char ack[4] = { 0x60, 0, response[2], response[3] };
            mbedtls_ssl_write(&ssl, ack, sizeof ack);
        }
        fprintf(stderr, "type=%s code=%d.%02d\n", type == 0 ? "CON" : type == 1 ? "NON" : "ACK", response[1] >> 5, response[1] & 0x1f);
        size_t off = payload_offset(response, len);
        fwrite(response + off, 1, len - off, stdout);
        break;
    }
    mbedtls_ssl_close_notify(&ssl);
    mbedtls_net_free(&net);
    mbedtls_ssl_free(&ssl);
    mbedtls_ssl_config_free(&conf);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    return 0;
}
