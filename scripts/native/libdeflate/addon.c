/*
 * libdeflate's compressor as a Node-API addon: the native route of Tessera's DEFLATE encoder
 * (shared/raster/libdeflate.ts loads it; scripts/build-libdeflate.ts compiles it with libdeflate's
 * sources into shared/raster/libdeflate-linux-{x64,arm64}.node; docs/geotiff.md).
 *
 * Node-API only (NAPI_VERSION 8), so one binary serves every Node from 22 on. It links no C library:
 * malloc, free and memcpy resolve in the node process that loads it.
 *
 *   zlibCompress(bytes: Uint8Array, level: number): Uint8Array | null   RFC 1950
 *   rawCompress(bytes: Uint8Array, level: number): Uint8Array | null    RFC 1951
 *   version: string                                                     LIBDEFLATE_VERSION_STRING
 *
 * null: the stream did not fit its own bound (libdeflate returned 0), which cannot happen; the loader
 * turns it into a LibdeflateError. One compressor per level and one output buffer per Node environment
 * (main thread or worker), kept for its life and freed with it.
 */
#define NAPI_VERSION 8
#include <node_api.h>
#include <stdlib.h>
#include <string.h>

#include "libdeflate.h"

#define MAX_LEVEL 12

struct state {
  struct libdeflate_compressor *compressors[MAX_LEVEL + 1];
  uint8_t *out;
  size_t out_cap;
};

static void free_state(napi_env env, void *data, void *hint) {
  struct state *s = data;
  (void)env;
  (void)hint;
  for (int i = 0; i <= MAX_LEVEL; i++)
    if (s->compressors[i] != NULL) libdeflate_free_compressor(s->compressors[i]);
  free(s->out);
  free(s);
}

static napi_value fail(napi_env env, const char *message) {
  napi_throw_error(env, "LIBDEFLATE_FAILED", message);
  return NULL;
}

static napi_value compress(napi_env env, napi_callback_info info, int zlib) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2)
    return fail(env, "[libdeflate] expected (bytes, level)");
  bool is_typed = false;
  napi_is_typedarray(env, argv[0], &is_typed);
  if (!is_typed) {
    napi_throw_type_error(env, "LIBDEFLATE_FAILED", "[libdeflate] bytes must be a Uint8Array");
    return NULL;
  }
  napi_typedarray_type type;
  size_t n = 0;
  void *in = NULL;
  if (napi_get_typedarray_info(env, argv[0], &type, &n, &in, NULL, NULL) != napi_ok || type != napi_uint8_array) {
    napi_throw_type_error(env, "LIBDEFLATE_FAILED", "[libdeflate] bytes must be a Uint8Array");
    return NULL;
  }
  int32_t level = -1;
  if (napi_get_value_int32(env, argv[1], &level) != napi_ok || level < 0 || level > MAX_LEVEL) {
    napi_throw_range_error(env, "LIBDEFLATE_LEVEL", "[libdeflate] level must be an integer from 0 to 12");
    return NULL;
  }
  struct state *s = NULL;
  if (napi_get_instance_data(env, (void **)&s) != napi_ok || s == NULL) return fail(env, "[libdeflate] the addon was not initialized");
  struct libdeflate_compressor *c = s->compressors[level];
  if (c == NULL) {
    c = libdeflate_alloc_compressor(level);
    if (c == NULL) return fail(env, "[libdeflate] could not allocate a compressor (out of memory)");
    s->compressors[level] = c;
  }
  static const uint8_t empty[1];
  if (in == NULL) in = (void *)empty;
  size_t bound = zlib ? libdeflate_zlib_compress_bound(c, n) : libdeflate_deflate_compress_bound(c, n);
  if (bound > s->out_cap) {
    /* Round up to 64 KiB to grow rarely; free first, the old contents are not needed. */
    size_t cap = (bound + 65535) & ~(size_t)65535;
    free(s->out);
    s->out = malloc(cap);
    s->out_cap = s->out == NULL ? 0 : cap;
    if (s->out == NULL) return fail(env, "[libdeflate] could not allocate the output buffer (out of memory)");
  }
  size_t written = zlib ? libdeflate_zlib_compress(c, in, n, s->out, bound) : libdeflate_deflate_compress(c, in, n, s->out, bound);
  napi_value result;
  if (written == 0) {
    napi_get_null(env, &result);
    return result;
  }
  void *data = NULL;
  napi_value buffer;
  if (napi_create_arraybuffer(env, written, &data, &buffer) != napi_ok) return fail(env, "[libdeflate] could not allocate the result");
  memcpy(data, s->out, written);
  if (napi_create_typedarray(env, napi_uint8_array, written, buffer, 0, &result) != napi_ok)
    return fail(env, "[libdeflate] could not allocate the result");
  return result;
}

static napi_value zlib_compress(napi_env env, napi_callback_info info) { return compress(env, info, 1); }
static napi_value raw_compress(napi_env env, napi_callback_info info) { return compress(env, info, 0); }

NAPI_MODULE_INIT() {
  struct state *s = calloc(1, sizeof(struct state));
  if (s == NULL) return fail(env, "[libdeflate] could not allocate the addon's state (out of memory)");
  if (napi_set_instance_data(env, s, free_state, NULL) != napi_ok) {
    free(s);
    return fail(env, "[libdeflate] could not attach the addon's state");
  }
  napi_value zlib, raw, version;
  napi_create_function(env, "zlibCompress", NAPI_AUTO_LENGTH, zlib_compress, NULL, &zlib);
  napi_create_function(env, "rawCompress", NAPI_AUTO_LENGTH, raw_compress, NULL, &raw);
  napi_create_string_utf8(env, LIBDEFLATE_VERSION_STRING, NAPI_AUTO_LENGTH, &version);
  napi_set_named_property(env, exports, "zlibCompress", zlib);
  napi_set_named_property(env, exports, "rawCompress", raw);
  napi_set_named_property(env, exports, "version", version);
  return exports;
}
