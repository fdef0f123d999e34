/* HTTP and SOCKS5 request parsers (request.h). Pure and bounded. */
#include "net/request.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* One line of the head: [start, end) without its line ending; next is past it. */
struct line {
  const char *start;
  size_t length;
};

/* Finds the next line in [at, end): false when no line ending is there yet. */
static bool next_line(const char **at, const char *end, struct line *line) {
  const char *newline = memchr(*at, '\n', (size_t)(end - *at));
  if (!newline)
    return false;
  line->start = *at;
  line->length = (size_t)(newline - *at);
  if (line->length && newline[-1] == '\r')
    line->length--;
  *at = newline + 1;
  return true;
}

static bool is_token_char(unsigned char c) {
  return isalnum(c) || strchr("!#$%&'*+-.^_`|~", c);
}

/* "host:port", "[v6]:port", or (default_port != 0) either without the port. */
static bool parse_authority(const char *text, size_t length, uint16_t default_port,
                            struct net_http_request *out) {
  const char *end = text + length, *host_end;
  const char *port = NULL;
  if (length && text[0] == '[') {
    host_end = memchr(text, ']', length);
    if (!host_end)
      return false;
    host_end++;
    if (host_end < end && *host_end != ':')
      return false;
    if (host_end < end)
      port = host_end + 1;
  } else {
    host_end = memchr(text, ':', length);
    if (host_end)
      port = host_end + 1;
    else
      host_end = end;
  }
  size_t host_length = (size_t)(host_end - text);
  if (host_length == 0 || host_length >= sizeof out->host)
    return false;
  for (size_t i = 0; i < host_length; i++)
    if (text[i] <= ' ' || text[i] == '@' || text[i] == '/' || (unsigned char)text[i] >= 0x7f)
      return false;
  memcpy(out->host, text, host_length);
  out->host[host_length] = 0;
  if (!port) {
    out->port = default_port;
    return default_port != 0;
  }
  unsigned long value = 0;
  if (port == end || end - port > 5)
    return false;
  for (const char *p = port; p < end; p++) {
    if (!isdigit((unsigned char)*p))
      return false;
    value = value * 10 + (unsigned long)(*p - '0');
  }
  if (value == 0 || value > 65535)
    return false;
  out->port = (uint16_t)value;
  return true;
}

static bool dropped_header(const char *name, size_t length) {
  return (length >= 6 && strncasecmp(name, "proxy-", 6) == 0) ||
         (length == 10 && strncasecmp(name, "connection", 10) == 0) ||
         (length == 10 && strncasecmp(name, "keep-alive", 10) == 0) ||
         (length == 4 && strncasecmp(name, "host", 4) == 0);
}

static void append(char *buffer, size_t *at, const char *text, size_t length) {
  memcpy(buffer + *at, text, length);
  *at += length;
}

static enum net_parse bad(const char **why, const char *reason) {
  *why = reason;
  return NET_PARSE_BAD;
}

/* The request line: METHOD SP TARGET SP HTTP/1.x. */
static enum net_parse parse_request_line(const struct line *line, struct net_http_request *out,
                                         struct line *method, struct line *path, const char **why) {
  const char *p = line->start, *end = line->start + line->length;
  const char *space = memchr(p, ' ', line->length);
  if (!space || space == p)
    return bad(why, "malformed request line");
  for (const char *c = p; c < space; c++)
    if (!is_token_char((unsigned char)*c))
      return bad(why, "malformed method");
  *method = (struct line){p, (size_t)(space - p)};
  const char *target = space + 1;
  const char *space2 = memchr(target, ' ', (size_t)(end - target));
  if (!space2 || space2 == target)
    return bad(why, "malformed request line");
  const char *version = space2 + 1;
  if (end - version != 8 || memcmp(version, "HTTP/1.", 7) != 0 ||
      (version[7] != '0' && version[7] != '1'))
    return bad(why, "not HTTP/1.0 or HTTP/1.1");
  size_t target_length = (size_t)(space2 - target);
  out->connect = method->length == 7 && memcmp(p, "CONNECT", 7) == 0;
  if (out->connect) {
    if (!parse_authority(target, target_length, 0, out))
      return bad(why, "CONNECT needs host:port");
    return NET_PARSE_DONE;
  }
  if (target_length < 7 || strncasecmp(target, "http://", 7) != 0)
    return bad(why, "only absolute http:// targets are forwarded (use CONNECT for https)");
  const char *authority = target + 7, *target_end = target + target_length;
  const char *slash = authority;
  while (slash < target_end && *slash != '/' && *slash != '?' && *slash != '#')
    slash++;
  if (!parse_authority(authority, (size_t)(slash - authority), 80, out))
    return bad(why, "malformed host in the request target");
  *path = (struct line){slash, (size_t)(target_end - slash)};
  return NET_PARSE_DONE;
}

enum net_parse net_http_parse(const uint8_t *data, size_t length, struct net_http_request *out,
                              const char **why) {
  memset(out, 0, sizeof *out);
  const char *begin = (const char *)data, *at = begin;
  size_t window = length < NET_HEAD_MAX ? length : NET_HEAD_MAX;
  const char *end = begin + window;
  struct line request_line, line, method = {0}, path = {0};
  if (!next_line(&at, end, &request_line))
    return length >= NET_HEAD_MAX ? bad(why, "request head over 16 KiB") : NET_PARSE_MORE;
  /* The blank line first: nothing is decided on a head that is not whole. */
  const char *headers = at;
  bool whole = false;
  while (next_line(&at, end, &line))
    if (line.length == 0) {
      whole = true;
      break;
    }
  if (!whole)
    return length >= NET_HEAD_MAX ? bad(why, "request head over 16 KiB") : NET_PARSE_MORE;
  out->consumed = (size_t)(at - begin);
  enum net_parse r = parse_request_line(&request_line, out, &method, &path, why);
  if (r != NET_PARSE_DONE)
    return r;
  /* The rewritten head is never longer than the old one plus the Host and Connection lines
   * and a "/" for an empty path. */
  size_t room = out->consumed + sizeof out->host + 64;
  char *forward = out->connect ? NULL : malloc(room);
  if (!out->connect && !forward)
    return bad(why, "out of memory");
  size_t written = 0;
  if (forward) {
    append(forward, &written, method.start, method.length);
    append(forward, &written, " ", 1);
    if (path.length == 0 || path.start[0] != '/')
      append(forward, &written, "/", 1);
    append(forward, &written, path.start, path.length);
    append(forward, &written, " HTTP/1.1\r\n", 11);
  }
  const char *h = headers;
  while (next_line(&h, end, &line) && line.length) {
    const char *colon = memchr(line.start, ':', line.length);
    if (!colon || colon == line.start) {
      free(forward);
      return bad(why, "malformed header line");
    }
    for (const char *c = line.start; c < colon; c++)
      if (!is_token_char((unsigned char)*c)) {
        free(forward);
        return bad(why, "malformed header name");
      }
    if (forward && !dropped_header(line.start, (size_t)(colon - line.start))) {
      append(forward, &written, line.start, line.length);
      append(forward, &written, "\r\n", 2);
    }
  }
  if (forward) {
    char tail[NET_HOST_MAX + 64];
    int n = out->port == 80
                ? snprintf(tail, sizeof tail, "Host: %s\r\nConnection: close\r\n\r\n", out->host)
                : snprintf(tail, sizeof tail, "Host: %s:%u\r\nConnection: close\r\n\r\n", out->host,
                           out->port);
    append(forward, &written, tail, (size_t)n);
    out->forward = forward;
    out->forward_length = written;
  }
  return NET_PARSE_DONE;
}

void net_http_request_clear(struct net_http_request *request) {
  free(request->forward);
  request->forward = NULL;
  request->forward_length = 0;
}

enum net_parse net_socks5_greeting(const uint8_t *data, size_t length, size_t *consumed,
                                   const char **why) {
  *consumed = 0;
  if (length < 1)
    return NET_PARSE_MORE;
  if (data[0] != 5)
    return bad(why, "not SOCKS5");
  if (length < 2)
    return NET_PARSE_MORE;
  size_t methods = data[1];
  if (length < 2 + methods)
    return NET_PARSE_MORE;
  *consumed = 2 + methods;
  for (size_t i = 0; i < methods; i++)
    if (data[2 + i] == 0)
      return NET_PARSE_DONE;
  return bad(why, "SOCKS5 client offers no 'no authentication' method");
}

enum net_parse net_socks5_parse(const uint8_t *data, size_t length, struct net_socks5_request *out,
                                const char **why) {
  memset(out, 0, sizeof *out);
  out->refusal = NET_SOCKS5_GENERAL_FAILURE;
  if (length < 5)
    return NET_PARSE_MORE;
  if (data[0] != 5 || data[2] != 0)
    return bad(why, "malformed SOCKS5 request");
  size_t address_length;
  switch (data[3]) {
  case 1: address_length = 4; break;
  case 3: address_length = 1 + (size_t)data[4]; break;
  case 4: address_length = 16; break;
  default:
    out->refusal = NET_SOCKS5_ADDRESS_UNSUPPORTED;
    return bad(why, "SOCKS5 address type unsupported");
  }
  if (length < 4 + address_length + 2)
    return NET_PARSE_MORE;
  /* The command is judged once the request is whole, so the reply follows the request. */
  if (data[1] != 1) {
    out->refusal = NET_SOCKS5_COMMAND_UNSUPPORTED;
    return bad(why, "SOCKS5 command other than CONNECT");
  }
  const uint8_t *address = data + 4;
  if (data[3] == 3) {
    size_t n = data[4];
    if (n == 0 || memchr(address + 1, 0, n))
      return bad(why, "malformed SOCKS5 name");
    memcpy(out->host, address + 1, n);
    out->host[n] = 0;
  } else {
    inet_ntop(data[3] == 1 ? AF_INET : AF_INET6, address, out->host, sizeof out->host);
  }
  out->port = (uint16_t)(address[address_length] << 8 | address[address_length + 1]);
  if (out->port == 0)
    return bad(why, "SOCKS5 port 0");
  out->consumed = 4 + address_length + 2;
  return NET_PARSE_DONE;
}

void net_socks5_reply(uint8_t code, uint8_t out[10]) {
  memset(out, 0, 10);
  out[0] = 5;
  out[1] = code;
  out[3] = 1;
}
