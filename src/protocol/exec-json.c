/* An exec's result as JSON (exec-json.h): shared by the CLI's --json output and the HTTP API. */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "protocol/exec-json.h"

json_t *exec_base64_json(const void *data, size_t length) {
  size_t n = 4 * ((length + 2) / 3);
  char *text = malloc(n + 1);
  if (!text)
    return NULL;
  /* EVP_EncodeBlock takes an int length: encode in blocks of whole 3-byte groups. */
  size_t done = 0, at = 0;
  while (done < length) {
    size_t chunk = length - done > (size_t)3 << 20 ? (size_t)3 << 20 : length - done;
    at += (size_t)EVP_EncodeBlock((unsigned char *)text + at, (const unsigned char *)data + done,
                                  (int)chunk);
    done += chunk;
  }
  text[at] = 0;
  json_t *s = json_stringn(text, at);
  free(text);
  return s;
}

static int base64_value(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

int exec_base64_decode(const char *text, unsigned char **out, size_t *length) {
  size_t n = strlen(text);
  if (n % 4)
    return -1;
  unsigned char *buf = malloc(n / 4 * 3 + 1);
  if (!buf)
    return -1;
  size_t at = 0;
  for (size_t i = 0; i < n; i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; k++) {
      char c = text[i + k];
      if (c == '=' && i + 4 == n && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        v[k] = 0;
        pad++;
        continue;
      }
      v[k] = pad ? -1 : base64_value(c);
      if (v[k] < 0) {
        free(buf);
        return -1;
      }
    }
    uint32_t word =
        (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    buf[at++] = (unsigned char)(word >> 16);
    if (pad < 2)
      buf[at++] = (unsigned char)(word >> 8);
    if (pad < 1)
      buf[at++] = (unsigned char)word;
  }
  buf[at] = 0;
  *out = buf;
  *length = at;
  return 0;
}

static json_t *text_json(const unsigned char *data, size_t length) {
  json_t *s = json_stringn((const char *)(data ? data : (const unsigned char *)""), length);
  return s ? s : json_null(); /* not UTF-8: the text form carries text only */
}

json_t *exec_result_json(const struct cordon_exec_result *r, bool base64) {
  json_t *out = base64 ? exec_base64_json(r->stdout_data, r->stdout_length)
                       : text_json(r->stdout_data, r->stdout_length);
  json_t *err = base64 ? exec_base64_json(r->stderr_data, r->stderr_length)
                       : text_json(r->stderr_data, r->stderr_length);
  json_t *o = json_pack("{s:i, s:i, s:b, s:o?, s:o?, s:I, s:I, s:b, s:b, s:f, s:b}", "exit_code",
                        r->exit_code, "signal", r->term_signal, "timed_out", r->timed_out, "stdout",
                        out, "stderr", err, "stdout_bytes", (json_int_t)r->stdout_total,
                        "stderr_bytes", (json_int_t)r->stderr_total, "stdout_truncated",
                        r->stdout_truncated, "stderr_truncated", r->stderr_truncated,
                        "duration_seconds", r->duration, "oom_killed", r->oom_killed);
  if (!o)
    return NULL;
  /* Only when the backend could not execve the command: a command that exits 126/127
   * itself has none. */
  if (r->exec_failure == 127 || r->exec_failure == 126)
    json_object_set_new(o, "exec_failure",
                        json_string(r->exec_failure == 127 ? "not_found" : "cannot_execute"));
  return o;
}
