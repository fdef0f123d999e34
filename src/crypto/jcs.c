/* Canonical JSON (RFC 8785) over jansson values; see jcs.h for the rules. The number formatter
 * finds the shortest decimal that reads back to the same double by asking glibc's exactly
 * rounded printf for 1..17 significant digits (and the neighbours of each candidate, which
 * matters where the rounding interval is lopsided, at powers of two), then lays the digits
 * out as ECMAScript does. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "crypto/jcs.h"

#define JCS_MAX_DEPTH 4096
#define JCS_MAX_SAFE_INTEGER 9007199254740992LL /* 2^53 */

/* ---- buffer ------------------------------------------------------------------------------- */

int jcs_buf_reserve(struct jcs_buf *b, size_t extra) {
  if (b->length + extra + 1 <= b->capacity)
    return 0;
  if (extra > SIZE_MAX / 2 - b->length)
    return -1;
  size_t cap = b->capacity ? b->capacity : 256;
  while (cap < b->length + extra + 1)
    cap *= 2;
  char *grown = realloc(b->data, cap);
  if (!grown)
    return -1;
  b->data = grown;
  b->capacity = cap;
  return 0;
}

int jcs_buf_append(struct jcs_buf *b, const void *data, size_t length) {
  if (jcs_buf_reserve(b, length) < 0)
    return -1;
  if (length)
    memcpy(b->data + b->length, data, length);
  b->length += length;
  b->data[b->length] = 0;
  return 0;
}

static int buf_putc(struct jcs_buf *b, char c) {
  if (b->length + 2 > b->capacity && jcs_buf_reserve(b, 1) < 0)
    return -1;
  b->data[b->length++] = c;
  b->data[b->length] = 0;
  return 0;
}

void jcs_buf_free(struct jcs_buf *b) {
  free(b->data);
  b->data = NULL;
  b->length = b->capacity = 0;
}

char *jcs_buf_steal(struct jcs_buf *b) {
  if (!b->data && jcs_buf_reserve(b, 0) < 0)
    return NULL;
  char *d = b->data;
  b->data = NULL;
  b->length = b->capacity = 0;
  return d;
}

/* ---- numbers ------------------------------------------------------------------------------ */

static bool reads_back(uint64_t mantissa, int exponent, double value) {
  char text[48];
  snprintf(text, sizeof(text), "%" PRIu64 "e%d", mantissa, exponent);
  return strtod(text, NULL) == value;
}

static uint64_t pow10_u64(int n) {
  uint64_t r = 1;
  while (n-- > 0)
    r *= 10;
  return r;
}

/* The decimal (mantissa, exponent) of p significant digits nearest to value (exactly
 * rounded by glibc). */
static void rounded_decimal(double value, int p, uint64_t *mantissa, int *exponent) {
  char text[48];
  snprintf(text, sizeof(text), "%.*e", p - 1, value);
  uint64_t m = 0;
  const char *c = text;
  for (; *c && *c != 'e'; c++)
    if (*c >= '0' && *c <= '9')
      m = m * 10 + (uint64_t)(*c - '0');
  *mantissa = m;
  *exponent = (*c == 'e' ? atoi(c + 1) : 0) - (p - 1);
}

/* Shortest (mantissa, exponent) with value == mantissa * 10^exponent after rounding to double;
 * value is finite and positive.
 *
 * If some decimal of k <= 15 significant digits reads back to value, it lies within half an ulp
 * of value (at most 2^-53 relative), which is less than half a unit of the 15th digit (at least
 * 5*10^-16 relative); so rounding value to 15 digits gives exactly that decimal padded with
 * zeros. One printf at 15 digits, trailing zeros stripped, therefore finds the shortest form
 * whenever it has 15 digits or fewer. Otherwise 16 digits are tried, with the neighbours of
 * the nearest one (the interval that rounds to value is lopsided at powers of two, and at most
 * one neighbour can read back when the nearest does not), and 17 digits always read back. */
/* Try p digits: the nearest decimal, then its two neighbours. */
static bool try_digits(double value, int p, uint64_t *mantissa, int *exponent) {
  uint64_t m;
  int q;
  rounded_decimal(value, p, &m, &q);
  uint64_t low = pow10_u64(p - 1), high = pow10_u64(p);
  uint64_t candidates[3] = {m, m + 1 == high ? low : m + 1, m == low ? high - 1 : m - 1};
  int exponents[3] = {q, m + 1 == high ? q + 1 : q, m == low ? q - 1 : q};
  for (int i = 0; i < 3; i++)
    if (candidates[i] > 0 && reads_back(candidates[i], exponents[i], value)) {
      *mantissa = candidates[i];
      *exponent = exponents[i];
      return true;
    }
  return false;
}

static void shortest_decimal(double value, uint64_t *mantissa, int *exponent) {
  if (value < DBL_MIN) {
    /* Subnormal: the ulp is no longer small relative to the value; search from 1 digit. */
    for (int p = 1; p < 17; p++)
      if (try_digits(value, p, mantissa, exponent))
        return;
    rounded_decimal(value, 17, mantissa, exponent);
    return;
  }
  uint64_t m;
  int q;
  rounded_decimal(value, 15, &m, &q);
  if (reads_back(m, q, value)) {
    *mantissa = m;
    *exponent = q;
    return;
  }
  if (!try_digits(value, 16, mantissa, exponent))
    rounded_decimal(value, 17, mantissa, exponent);
}

int jcs_format_double(double value, char *out, size_t size) {
  if (!isfinite(value) || size < 32)
    return -1;
  if (value == 0) { /* also -0 */
    strcpy(out, "0");
    return 1;
  }
  char *o = out;
  if (value < 0) {
    *o++ = '-';
    value = -value;
  }
  uint64_t mantissa;
  int q;
  shortest_decimal(value, &mantissa, &q);
  char digits[24];
  int k = snprintf(digits, sizeof(digits), "%" PRIu64, mantissa);
  while (k > 1 && digits[k - 1] == '0') {
    digits[--k] = 0;
    q++;
  }
  int n = k + q; /* value = 0.digits * 10^n */
  if (k <= n && n <= 21) {
    memcpy(o, digits, (size_t)k);
    o += k;
    for (int i = 0; i < n - k; i++)
      *o++ = '0';
  } else if (0 < n && n <= 21) {
    memcpy(o, digits, (size_t)n);
    o += n;
    *o++ = '.';
    memcpy(o, digits + n, (size_t)(k - n));
    o += k - n;
  } else if (-6 < n && n <= 0) {
    *o++ = '0';
    *o++ = '.';
    for (int i = 0; i < -n; i++)
      *o++ = '0';
    memcpy(o, digits, (size_t)k);
    o += k;
  } else {
    *o++ = digits[0];
    if (k > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)(k - 1));
      o += k - 1;
    }
    o += sprintf(o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
  }
  *o = 0;
  return (int)(o - out);
}

/* ---- strings ------------------------------------------------------------------------------ */

static int put_string(struct jcs_buf *b, const char *s, size_t length) {
  static const char hex[] = "0123456789abcdef";
  if (jcs_buf_reserve(b, length + 2) < 0)
    return -1;
  b->data[b->length++] = '"';
  size_t run = 0;
  for (size_t i = 0; i < length; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    if (jcs_buf_append(b, s + run, i - run) < 0)
      return -1;
    run = i + 1;
    char esc[7] = {'\\', 0};
    size_t n = 2;
    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    default:
      memcpy(esc + 1, "u00", 3);
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      n = 6;
    }
    if (jcs_buf_append(b, esc, n) < 0)
      return -1;
  }
  if (jcs_buf_append(b, s + run, length - run) < 0)
    return -1;
  return buf_putc(b, '"');
}

/* ---- ordering ----------------------------------------------------------------------------- */

int jcs_compare_keys(const char *a, size_t a_length, const char *b, size_t b_length) {
  size_t n = a_length < b_length ? a_length : b_length;
  for (size_t i = 0; i < n; i++) {
    unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
    if (x == y)
      continue;
    /* Equal prefixes put both at the same position within a character. UTF-8 byte order is
     * code point order, which is UTF-16 order except that characters above U+FFFF (lead byte
     * F0..F4, surrogates D800..DBFF in UTF-16) sort before U+E000..U+FFFF (lead EE, EF). */
    if (x >= 0xF0 && (y == 0xEE || y == 0xEF))
      return -1;
    if (y >= 0xF0 && (x == 0xEE || x == 0xEF))
      return 1;
    return x < y ? -1 : 1;
  }
  return a_length < b_length ? -1 : a_length > b_length ? 1 : 0;
}

struct member {
  const char *key;
  size_t key_length;
  json_t *value;
};

static int compare_members(const void *pa, const void *pb) {
  const struct member *a = pa, *b = pb;
  return jcs_compare_keys(a->key, a->key_length, b->key, b->key_length);
}

static void sort_members(struct member *m, size_t n) {
  if (n > 16) {
    qsort(m, n, sizeof(*m), compare_members);
    return;
  }
  for (size_t i = 1; i < n; i++) {
    struct member t = m[i];
    size_t j = i;
    while (j > 0 && compare_members(&m[j - 1], &t) > 0) {
      m[j] = m[j - 1];
      j--;
    }
    m[j] = t;
  }
}

/* ---- values ------------------------------------------------------------------------------- */

static int serialize(const json_t *v, struct jcs_buf *b, int depth, struct cordon_error **err);

static int oom(struct cordon_error **err) {
  return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "canonical JSON");
}

/* Members of object in canonical order; *heap is set when they had to be allocated. */
static int collect_members(const json_t *object, struct member *stack, size_t stack_n,
                           struct member **out, size_t *count, struct cordon_error **err) {
  size_t n = json_object_size(object);
  struct member *m = stack;
  if (n > stack_n && !(m = calloc(n, sizeof(*m))))
    return oom(err);
  size_t i = 0;
  const char *key;
  size_t key_length;
  json_t *value;
  json_object_keylen_foreach((json_t *)object, key, key_length, value) {
    m[i].key = key;
    m[i].key_length = key_length;
    m[i].value = value;
    i++;
  }
  sort_members(m, i);
  *out = m;
  *count = i;
  return 0;
}

static int serialize_object(const json_t *object, struct jcs_buf *b, int depth,
                            const char *skip_key, size_t *skip_offset, bool *skip_first,
                            struct cordon_error **err) {
  struct member stack[32];
  struct member *m = NULL;
  size_t n = 0;
  if (collect_members(object, stack, ARRAY_SIZE(stack), &m, &n, err) < 0)
    return -1;
  int r = -1;
  bool found = false, first = true;
  if (buf_putc(b, '{') < 0)
    goto out_oom;
  for (size_t i = 0; i < n; i++) {
    if (skip_key && !found && m[i].key_length == strlen(skip_key) &&
        !memcmp(m[i].key, skip_key, m[i].key_length)) {
      found = true;
      *skip_offset = b->length;
      *skip_first = first;
      continue;
    }
    if (!first && buf_putc(b, ',') < 0)
      goto out_oom;
    first = false;
    if (put_string(b, m[i].key, m[i].key_length) < 0 || buf_putc(b, ':') < 0)
      goto out_oom;
    if (serialize(m[i].value, b, depth + 1, err) < 0)
      goto out;
  }
  if (buf_putc(b, '}') < 0)
    goto out_oom;
  if (skip_key && !found) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "canonical JSON: member \"%s\" missing", skip_key);
    goto out;
  }
  r = 0;
  goto out;
out_oom:
  oom(err);
out:
  if (m != stack)
    free(m);
  return r;
}

static int serialize(const json_t *v, struct jcs_buf *b, int depth, struct cordon_error **err) {
  if (depth > JCS_MAX_DEPTH)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "canonical JSON: nested too deeply");
  char number[40];
  int n;
  switch (json_typeof(v)) {
  case JSON_NULL: return jcs_buf_append(b, "null", 4) < 0 ? oom(err) : 0;
  case JSON_TRUE: return jcs_buf_append(b, "true", 4) < 0 ? oom(err) : 0;
  case JSON_FALSE: return jcs_buf_append(b, "false", 5) < 0 ? oom(err) : 0;
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(v);
    if (i > JCS_MAX_SAFE_INTEGER || i < -JCS_MAX_SAFE_INTEGER)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "canonical JSON: integer %" JSON_INTEGER_FORMAT
                              " is beyond ±2^53 and has no exact double",
                              i);
    n = snprintf(number, sizeof(number), "%" JSON_INTEGER_FORMAT, i);
    return jcs_buf_append(b, number, (size_t)n) < 0 ? oom(err) : 0;
  }
  case JSON_REAL:
    n = jcs_format_double(json_real_value(v), number, sizeof(number));
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "canonical JSON: NaN and infinities have no JSON form");
    return jcs_buf_append(b, number, (size_t)n) < 0 ? oom(err) : 0;
  case JSON_STRING:
    return put_string(b, json_string_value(v), json_string_length(v)) < 0 ? oom(err) : 0;
  case JSON_ARRAY: {
    if (buf_putc(b, '[') < 0)
      return oom(err);
    size_t count = json_array_size(v);
    for (size_t i = 0; i < count; i++) {
      if (i && buf_putc(b, ',') < 0)
        return oom(err);
      if (serialize(json_array_get(v, i), b, depth + 1, err) < 0)
        return -1;
    }
    return buf_putc(b, ']') < 0 ? oom(err) : 0;
  }
  case JSON_OBJECT: return serialize_object(v, b, depth, NULL, NULL, NULL, err);
  }
  return cordon_error_set(err, CORDON_ERR_INVALID, 0, "canonical JSON: unknown value type");
}

int jcs_serialize(const json_t *value, struct jcs_buf *out, struct cordon_error **err) {
  if (!value)
    return cordon_error_set(err, CORDON_ERR_INVALID, EINVAL, "canonical JSON: no value");
  return serialize(value, out, 0, err);
}

int jcs_serialize_without(const json_t *object, const char *skip_key, struct jcs_buf *out,
                          size_t *skip_offset, bool *skip_first, struct cordon_error **err) {
  if (!json_is_object(object))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "canonical JSON: not an object");
  bool first = false;
  size_t offset = 0;
  if (serialize_object(object, out, 0, skip_key, &offset, &first, err) < 0)
    return -1;
  if (skip_offset)
    *skip_offset = offset;
  if (skip_first)
    *skip_first = first;
  return 0;
}

int jcs_dump(const json_t *value, char **out, size_t *length, struct cordon_error **err) {
  struct jcs_buf b = {0};
  if (jcs_serialize(value, &b, err) < 0) {
    jcs_buf_free(&b);
    return -1;
  }
  if (length)
    *length = b.length;
  if (!(*out = jcs_buf_steal(&b)))
    return oom(err);
  return 0;
}

/* ---- parsing ------------------------------------------------------------------------------ */

int jcs_parse(const void *text, size_t length, size_t max_length, const char *label, json_t **out,
              struct cordon_error **err) {
  if (!max_length)
    max_length = JCS_DEFAULT_MAX_INPUT;
  if (!label)
    label = "JSON";
  if (length > max_length)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: larger than %zu bytes", label,
                            max_length);
  json_error_t jerr;
  json_t *v = json_loadb(
      text, length,
      JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &jerr);
  if (!v)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: invalid JSON at byte %d: %s", label,
                            jerr.position, jerr.text);
  *out = v;
  return 0;
}

int jcs_canonicalize(const void *text, size_t length, size_t max_length, const char *label,
                     char **out, size_t *out_length, struct cordon_error **err) {
  json_t *v = NULL;
  if (jcs_parse(text, length, max_length, label, &v, err) < 0)
    return -1;
  int r = jcs_dump(v, out, out_length, err);
  json_decref(v);
  if (r < 0)
    return cordon_error_prefix(err, "%s", label ? label : "JSON");
  return 0;
}

/* ---- checking canonical bytes ------------------------------------------------------------- */

struct scanner {
  const char *p;
  size_t n, i;
  int depth;
  const char *reason;
};

static int scan_fail(struct scanner *s, const char *reason) {
  s->reason = reason;
  return -1;
}

static bool is_lower_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int hex_digit(char c) {
  return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* The next decoded byte of a canonical string's raw bytes; escapes there always stand for a
 * single byte below 0x80. */
static unsigned char next_decoded(const char *raw, size_t *i) {
  char c = raw[*i];
  if (c != '\\') {
    (*i)++;
    return (unsigned char)c;
  }
  char e = raw[*i + 1];
  *i += 2;
  switch (e) {
  case 'b': return '\b';
  case 'f': return '\f';
  case 'n': return '\n';
  case 'r': return '\r';
  case 't': return '\t';
  case 'u': {
    unsigned char v = (unsigned char)(hex_digit(raw[*i + 2]) << 4 | hex_digit(raw[*i + 3]));
    *i += 4;
    return v;
  }
  default: return (unsigned char)e; /* '"' or '\\' */
  }
}

size_t jcs_decode_string(const char *raw, size_t raw_length, char *out) {
  size_t i = 0, o = 0;
  while (i < raw_length)
    out[o++] = (char)next_decoded(raw, &i);
  return o;
}

/* jcs_compare_keys over raw canonical bytes (escapes decoded on the fly). */
static int compare_raw_keys(const char *a, size_t a_length, const char *b, size_t b_length) {
  size_t i = 0, j = 0;
  while (i < a_length && j < b_length) {
    unsigned char x = next_decoded(a, &i), y = next_decoded(b, &j);
    if (x == y)
      continue;
    if (x >= 0xF0 && (y == 0xEE || y == 0xEF))
      return -1;
    if (y >= 0xF0 && (x == 0xEE || x == 0xEF))
      return 1;
    return x < y ? -1 : 1;
  }
  return i < a_length ? 1 : j < b_length ? -1 : 0;
}

static int scan_string(struct scanner *s, bool is_key) {
  const unsigned char *p = (const unsigned char *)s->p;
  s->i++; /* the opening quote */
  for (;;) {
    if (s->i >= s->n)
      return scan_fail(s, "unterminated string");
    unsigned char c = p[s->i];
    if (c == '"') {
      s->i++;
      return 0;
    }
    if (c == '\\') {
      if (s->i + 1 >= s->n)
        return scan_fail(s, "unterminated string");
      switch (p[s->i + 1]) {
      case '"':
      case '\\':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't': s->i += 2; continue;
      case 'u':
        /* Only control characters without a short form are written as \u00xx, lowercase. */
        if (s->i + 5 >= s->n || p[s->i + 2] != '0' || p[s->i + 3] != '0' ||
            (p[s->i + 4] != '0' && p[s->i + 4] != '1') || !is_lower_hex((char)p[s->i + 5]))
          return scan_fail(s, "escape that canonical JSON does not use");
        {
          int v = hex_digit((char)p[s->i + 4]) << 4 | hex_digit((char)p[s->i + 5]);
          if (v == '\b' || v == '\t' || v == '\n' || v == '\f' || v == '\r')
            return scan_fail(s, "\\u escape for a character with a short escape");
          if (v == 0 && is_key)
            return scan_fail(s, "NUL in a member name");
        }
        s->i += 6;
        continue;
      default: return scan_fail(s, "escape that canonical JSON does not use");
      }
    }
    if (c < 0x20)
      return scan_fail(s, "unescaped control character");
    if (c < 0x80) {
      s->i++;
      continue;
    }
    /* UTF-8, strictly: no overlong forms, no surrogates, nothing above U+10FFFF. */
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
      need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0)
        lo = 0xA0;
      else if (c == 0xED)
        hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0)
        lo = 0x90;
      else if (c == 0xF4)
        hi = 0x8F;
    } else {
      return scan_fail(s, "invalid UTF-8");
    }
    if (s->i + need >= s->n)
      return scan_fail(s, "invalid UTF-8");
    if (p[s->i + 1] < lo || p[s->i + 1] > hi)
      return scan_fail(s, "invalid UTF-8");
    for (size_t k = 2; k <= need; k++)
      if ((p[s->i + k] & 0xC0) != 0x80)
        return scan_fail(s, "invalid UTF-8");
    s->i += need + 1;
  }
}

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static int scan_number(struct scanner *s) {
  size_t start = s->i;
  const char *p = s->p;
  if (s->i < s->n && p[s->i] == '-')
    s->i++;
  if (s->i >= s->n || !is_digit(p[s->i]))
    return scan_fail(s, "invalid number");
  if (p[s->i] == '0')
    s->i++;
  else
    while (s->i < s->n && is_digit(p[s->i]))
      s->i++;
  if (s->i < s->n && p[s->i] == '.') {
    s->i++;
    if (s->i >= s->n || !is_digit(p[s->i]))
      return scan_fail(s, "invalid number");
    while (s->i < s->n && is_digit(p[s->i]))
      s->i++;
  }
  if (s->i < s->n && (p[s->i] == 'e' || p[s->i] == 'E')) {
    s->i++;
    if (s->i < s->n && (p[s->i] == '+' || p[s->i] == '-'))
      s->i++;
    if (s->i >= s->n || !is_digit(p[s->i]))
      return scan_fail(s, "invalid number");
    while (s->i < s->n && is_digit(p[s->i]))
      s->i++;
  }
  /* The canonical spelling is the ECMAScript one of the double the text reads as. Integers of
   * up to 15 digits are exact doubles spelled as they are (but "-0" is 0). */
  size_t length = s->i - start;
  size_t digits = length - (p[start] == '-');
  bool integer = true;
  for (size_t k = start + (p[start] == '-'); k < s->i && integer; k++)
    integer = is_digit(p[k]);
  if (integer && digits <= 15) {
    if (length == 2 && p[start] == '-' && p[start + 1] == '0') {
      s->i = start;
      return scan_fail(s, "number not in canonical form");
    }
    return 0;
  }
  char token[40], canonical[40];
  if (length >= sizeof(token)) {
    s->i = start;
    return scan_fail(s, "number not in canonical form");
  }
  memcpy(token, p + start, length);
  token[length] = 0;
  double value = strtod(token, NULL);
  int n = jcs_format_double(value, canonical, sizeof(canonical));
  if (n < 0) {
    s->i = start;
    return scan_fail(s, "number out of range");
  }
  if ((size_t)n != length || memcmp(canonical, token, length)) {
    s->i = start;
    return scan_fail(s, "number not in canonical form");
  }
  return 0;
}

static int scan_literal(struct scanner *s, const char *word) {
  size_t n = strlen(word);
  if (s->n - s->i < n || memcmp(s->p + s->i, word, n))
    return scan_fail(s, "invalid literal");
  s->i += n;
  return 0;
}

static int scan_value(struct scanner *s, char *type, struct jcs_span *members, size_t max,
                      size_t *count);

static int scan_object(struct scanner *s, struct jcs_span *members, size_t max, size_t *count) {
  if (++s->depth > JSON_PARSER_MAX_DEPTH)
    return scan_fail(s, "nested too deeply");
  s->i++;
  if (s->i < s->n && s->p[s->i] == '}') {
    s->i++;
    s->depth--;
    return 0;
  }
  size_t prev_start = 0, prev_length = 0;
  bool have_prev = false;
  for (;;) {
    if (s->i >= s->n || s->p[s->i] != '"')
      return scan_fail(s, "expected a member name");
    size_t key_start = s->i;
    if (scan_string(s, true) < 0)
      return -1;
    size_t key_length = s->i - key_start - 2;
    if (have_prev) {
      int order =
          compare_raw_keys(s->p + prev_start + 1, prev_length, s->p + key_start + 1, key_length);
      if (order >= 0) {
        s->i = key_start;
        return scan_fail(s, order == 0 ? "duplicate member name" : "members out of order");
      }
    }
    prev_start = key_start;
    prev_length = key_length;
    have_prev = true;
    if (s->i >= s->n || s->p[s->i] != ':')
      return scan_fail(s, "expected ':'");
    s->i++;
    size_t value_start = s->i;
    char type;
    if (scan_value(s, &type, NULL, 0, NULL) < 0)
      return -1;
    if (count) {
      if (members && *count < max)
        members[*count] = (struct jcs_span){key_start, key_length, value_start, s->i, type};
      (*count)++;
    }
    if (s->i < s->n && s->p[s->i] == ',') {
      s->i++;
      continue;
    }
    if (s->i < s->n && s->p[s->i] == '}') {
      s->i++;
      s->depth--;
      return 0;
    }
    return scan_fail(s, "expected ',' or '}'");
  }
}

static int scan_array(struct scanner *s) {
  if (++s->depth > JSON_PARSER_MAX_DEPTH)
    return scan_fail(s, "nested too deeply");
  s->i++;
  if (s->i < s->n && s->p[s->i] == ']') {
    s->i++;
    s->depth--;
    return 0;
  }
  for (;;) {
    char type;
    if (scan_value(s, &type, NULL, 0, NULL) < 0)
      return -1;
    if (s->i < s->n && s->p[s->i] == ',') {
      s->i++;
      continue;
    }
    if (s->i < s->n && s->p[s->i] == ']') {
      s->i++;
      s->depth--;
      return 0;
    }
    return scan_fail(s, "expected ',' or ']'");
  }
}

static int scan_value(struct scanner *s, char *type, struct jcs_span *members, size_t max,
                      size_t *count) {
  if (s->i >= s->n)
    return scan_fail(s, "expected a value");
  switch (s->p[s->i]) {
  case '{': *type = 'o'; return scan_object(s, members, max, count);
  case '[': *type = 'a'; return scan_array(s);
  case '"': *type = 's'; return scan_string(s, false);
  case 't': *type = 't'; return scan_literal(s, "true");
  case 'f': *type = 'f'; return scan_literal(s, "false");
  case 'n': *type = 'z'; return scan_literal(s, "null");
  default:
    *type = 'n';
    if (s->p[s->i] == '-' || is_digit(s->p[s->i]))
      return scan_number(s);
    return scan_fail(s, "expected a value");
  }
}

int jcs_check_canonical(const char *text, size_t length, struct jcs_span *members,
                        size_t max_members, struct jcs_check *check) {
  struct scanner s = {.p = text, .n = length};
  memset(check, 0, sizeof(*check));
  size_t count = 0;
  int r = scan_value(&s, &check->type, members, max_members, &count);
  if (r == 0 && s.i != length)
    r = scan_fail(&s, "bytes after the value");
  check->n_members = count;
  if (r < 0) {
    check->error_offset = s.i;
    check->reason = s.reason;
  }
  return r;
}
