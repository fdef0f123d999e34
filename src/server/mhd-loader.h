/* libmicrohttpd, loaded when `cordon serve` starts.
 *
 * Linking libmicrohttpd made every `cordon` start-up load it and its ten dependencies (GnuTLS,
 * p11-kit, nettle, gmp, libunistring, ...) and run GnuTLS's and p11-kit's constructors: about
 * 10 ms of CPU at every invocation, most of a cold `cordon run`, for a library only `serve`
 * uses. So the server calls it through this table, filled by dlopen() of its soname, as the
 * docker backend does libcurl (backends/docker/curl-loader.h). The names below send the
 * server's calls (MHD_queue_response(...)) through the table, so the routes read as usual. */
#ifndef CORDON_SERVER_MHD_LOADER_H
#define CORDON_SERVER_MHD_LOADER_H

#include <microhttpd.h>

#include <cordon/error.h>

#define MHD_LOADER_FUNCTIONS(X)        \
  X(MHD_start_daemon)                  \
  X(MHD_stop_daemon)                   \
  X(MHD_queue_response)                \
  X(MHD_destroy_response)              \
  X(MHD_add_response_header)           \
  X(MHD_create_response_from_buffer)   \
  X(MHD_create_response_from_callback) \
  X(MHD_get_connection_info)           \
  X(MHD_lookup_connection_value)

struct mhd_api {
#define MHD_LOADER_FIELD(name) __typeof__(&name) name;
  MHD_LOADER_FUNCTIONS(MHD_LOADER_FIELD)
#undef MHD_LOADER_FIELD
};

/* Filled by mhd_api_load(); every call below goes through it. */
extern struct mhd_api mhd_api;

/* Loads libmicrohttpd once (thread-safe); 0, or -1 with *err naming what is missing. Call it
 * before the first MHD_ call. */
int mhd_api_load(struct cordon_error **err);

/* mhd-loader.c itself names the functions as they are. */
#ifndef MHD_LOADER_NO_REDIRECT
#define MHD_start_daemon mhd_api.MHD_start_daemon
#define MHD_stop_daemon mhd_api.MHD_stop_daemon
#define MHD_queue_response mhd_api.MHD_queue_response
#define MHD_destroy_response mhd_api.MHD_destroy_response
#define MHD_add_response_header mhd_api.MHD_add_response_header
#define MHD_create_response_from_buffer mhd_api.MHD_create_response_from_buffer
#define MHD_create_response_from_callback mhd_api.MHD_create_response_from_callback
#define MHD_get_connection_info mhd_api.MHD_get_connection_info
#define MHD_lookup_connection_value mhd_api.MHD_lookup_connection_value
#endif

#endif
