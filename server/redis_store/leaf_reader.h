// Whole-leaf reads: stream leaves' bytes out of Redis in order.
//
// The bytes of all the leaves of a read are fetched on one pipeline as
// GETRANGE windows of at most options.window_bytes, at most
// options.pipeline_depth in flight, so the next leaf's first window is on
// the wire while the last one's arrive. They reach the sink in leaf order,
// one window at a time, each as the Redis reply it came in (no copy): the
// sink may keep it as long as it holds its owner.
//
// With `probe`, the pipeline starts with the schema probe
// (schema_cache.h): nothing reaches the sink before it proves `schema`
// current, and a stale schema fails the read with IsStale() before any
// sink call, so the caller may load the schema again and redo the read.
//
// A generation can be replaced (or its leaf deleted) while it is read: its
// blocks are deleted after the commit that replaced it. A window that comes
// back short then fails the read with ABORTED ("replaced during the read");
// bytes already handed to the sink are of the old generation and the caller
// must discard them (the client library retries the whole read).
//
// Errors: ABORTED as above; NOT_FOUND when the probe finds the dict gone;
// UNAVAILABLE when Redis fails; the sink's own error is returned as is and
// stops the read.
//
// Thread-safe as far as the store is; one call per thread.
#ifndef TDSTORE_SERVER_REDIS_STORE_LEAF_READER_H_
#define TDSTORE_SERVER_REDIS_STORE_LEAF_READER_H_

#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/redis_store/dict_store.h"
#include "server/store/schema.h"
#include "server/store/shared_bytes.h"

namespace tdstore::store {

absl::Status ReadLeaves(const DictStore& store, const DictSchema& schema,
                        const std::vector<const Leaf*>& leaves, bool probe, LeafSink& sink);

// One leaf, no probe, bytes only (tools and tests).
using ByteSink = std::function<absl::Status(std::string_view bytes)>;
absl::Status ReadLeaf(const DictStore& store, const DictSchema& schema, const Leaf& leaf,
                      const ByteSink& sink);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_LEAF_READER_H_
