/*
 * auth.c: tags and replay windows for authenticated jobs (auth.h), on
 * libsodium's ChaCha20 and Poly1305.
 */
#include "rt/auth.h"

#include <sodium.h>
#include <string.h>

#include "wire/bytes.h"

int dlcp_auth_init(dlcp_auth *a, const void *secret, size_t len,
                   uint32_t job) {
  static const char label[] = "dlcp job key v1";
  uint8_t salt[sizeof(label) + 4];
  if (len < DLCP_AUTH_SECRET_MIN || sodium_init() < 0) {
    return -1;
  }
  /* key = BLAKE2b-256 keyed by the secret over (label, job).  BLAKE2b
   * takes keys up to 64 bytes; a longer secret is hashed down first. */
  memcpy(salt, label, sizeof(label));
  dlcp_put_u32(salt + sizeof(label), job);
  if (len > crypto_generichash_KEYBYTES_MAX) {
    uint8_t k[crypto_generichash_KEYBYTES_MAX];
    crypto_generichash(k, sizeof(k), secret, len, NULL, 0);
    crypto_generichash(a->key, sizeof(a->key), salt, sizeof(salt), k,
                       sizeof(k));
    sodium_memzero(k, sizeof(k));
  } else {
    crypto_generichash(a->key, sizeof(a->key), salt, sizeof(salt), secret,
                       len);
  }
  return 0;
}

void dlcp_auth_session(dlcp_auth *s, const dlcp_auth *job,
                       const uint8_t salt[DLCP_AUTH_SALT_LEN]) {
  static const char label[] = "dlcp session key v1";
  crypto_generichash_state st;
  crypto_generichash_init(&st, job->key, sizeof(job->key), sizeof(s->key));
  crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label));
  crypto_generichash_update(&st, salt, DLCP_AUTH_SALT_LEN);
  crypto_generichash_final(&st, s->key, sizeof(s->key));
}

void dlcp_auth_forget(dlcp_auth *a) {
  sodium_memzero(a->key, sizeof(a->key));
}

uint64_t dlcp_auth_nonce(void) {
  uint64_t n;
  do {
    randombytes_buf(&n, sizeof(n));
  } while (n == 0);
  return n;
}

void dlcp_auth_salt(uint8_t salt[DLCP_AUTH_SALT_LEN]) {
  randombytes_buf(salt, DLCP_AUTH_SALT_LEN);
}

uint64_t dlcp_auth_stream(dlcp_auth_channel channel, uint32_t from,
                          uint32_t to) {
  return (uint64_t)channel << 48 | (uint64_t)(from & 0xFFFFFFu) << 24 |
         (to & 0xFFFFFFu);
}

/* tag computes the Poly1305 tag of the message under the one-time key of
 * (stream, counter). */
static void tag(const dlcp_auth *a, uint64_t stream, uint64_t counter,
                const struct iovec *iov, int n,
                uint8_t out[crypto_onetimeauth_BYTES]) {
  uint8_t nonce[crypto_stream_xchacha20_NONCEBYTES] = {0};
  uint8_t otk[crypto_onetimeauth_KEYBYTES];
  crypto_onetimeauth_state st;
  /* XChaCha20's 24-byte nonce holds the whole (stream, counter) pair. */
  dlcp_put_u64(nonce, stream);
  dlcp_put_u64(nonce + 8, counter);
  crypto_stream_xchacha20(otk, sizeof(otk), nonce, a->key);
  crypto_onetimeauth_init(&st, otk);
  for (int i = 0; i < n; i++) {
    crypto_onetimeauth_update(&st, iov[i].iov_base, iov[i].iov_len);
  }
  crypto_onetimeauth_final(&st, out);
  sodium_memzero(otk, sizeof(otk));
}

void dlcp_auth_seal(const dlcp_auth *a, uint64_t stream, uint64_t counter,
                    const struct iovec *iov, int n,
                    uint8_t trailer[DLCP_AUTH_TRAILER_LEN]) {
  dlcp_put_u64(trailer, counter);
  tag(a, stream, counter, iov, n, trailer + 8);
}

uint64_t dlcp_auth_check(const dlcp_auth *a, uint64_t stream,
                         const struct iovec *iov, int n,
                         const uint8_t trailer[DLCP_AUTH_TRAILER_LEN]) {
  uint8_t want[crypto_onetimeauth_BYTES];
  uint64_t counter = dlcp_get_u64(trailer);
  if (counter == 0) {
    return 0;
  }
  tag(a, stream, counter, iov, n, want);
  return crypto_verify_16(want, trailer + 8) == 0 ? counter : 0;
}

bool dlcp_replay_accept(dlcp_replay *w, uint64_t counter) {
  uint64_t bit = counter % DLCP_AUTH_WINDOW;
  uint64_t *word = &w->seen[bit / 64];
  uint64_t mask = UINT64_C(1) << (bit % 64);
  if (counter == 0) {
    return false;
  }
  if (counter > w->top) {
    /* Slide: forget the bits of the counters that fall out. */
    uint64_t gap = counter - w->top;
    if (gap >= DLCP_AUTH_WINDOW) {
      memset(w->seen, 0, sizeof(w->seen));
    } else {
      for (uint64_t c = w->top + 1; c < counter; c++) {
        uint64_t b = c % DLCP_AUTH_WINDOW;
        w->seen[b / 64] &= ~(UINT64_C(1) << (b % 64));
      }
    }
    w->top = counter;
    *word |= mask;
    return true;
  }
  if (w->top - counter >= DLCP_AUTH_WINDOW || (*word & mask) != 0) {
    return false;
  }
  *word |= mask;
  return true;
}
