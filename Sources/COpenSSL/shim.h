#ifndef OSCAR_COPENSSL_SHIM_H
#define OSCAR_COPENSSL_SHIM_H

/* OpenSSL 3 (Debian's libssl-dev), for the transport's TLS. Only
   Sources/OscarRemote's TLS files import this module. Several of OpenSSL's
   entry points are function-like macros or variadic functions, which Swift
   cannot call; each gets a one-line inline wrapper here, and nothing more. */

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/evp.h>
#include <openssl/bn.h>

static inline int oscar_ssl_ctx_set_tls13_only(SSL_CTX *ctx) {
    return SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) && SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
}

/* An intermediate certificate sent after the leaf (takes its own reference). */
static inline int oscar_ssl_ctx_add_chain_certificate(SSL_CTX *ctx, X509 *cert) {
    return (int)SSL_CTX_add1_chain_cert(ctx, cert);
}

/* The server name (SNI) a client sends; names only, never an IP address. */
static inline int oscar_ssl_set_host_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }

/* The bytes a memory BIO holds, without copying them. */
static inline long oscar_bio_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

/* A name in RFC 2253 form (the flag is a macro of casts). */
static inline int oscar_x509_name_print_rfc2253(BIO *bio, const X509_NAME *name) {
    return X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253);
}

/* A new EC key on P-256 (EVP_EC_gen is a macro over a variadic function). */
static inline EVP_PKEY *oscar_ec_p256_key(void) { return EVP_EC_gen("P-256"); }

/* GENERAL_NAMES is a typed OpenSSL stack; its accessors are macros. */
static inline GENERAL_NAMES *oscar_general_names_new(void) { return sk_GENERAL_NAME_new_null(); }
static inline int oscar_general_names_push(GENERAL_NAMES *names, GENERAL_NAME *name) {
    return sk_GENERAL_NAME_push(names, name);
}
static inline int oscar_general_names_count(const GENERAL_NAMES *names) { return sk_GENERAL_NAME_num(names); }
static inline GENERAL_NAME *oscar_general_names_at(const GENERAL_NAMES *names, int i) {
    return sk_GENERAL_NAME_value(names, i);
}

/* Adds one X.509 v3 extension given in OpenSSL's configuration syntax (a
   constant such as "critical,CA:TRUE"); X509V3_set_ctx_nodb is a macro. */
static inline int oscar_x509_add_extension(X509 *cert, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL) return 0;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

#endif
