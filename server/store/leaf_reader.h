// Whole-leaf reads: stream a leaf's bytes out of Redis in order.
//
// The bytes are fetched as pipelined GETRANGE windows of at most
// options.window_bytes, at most options.pipeline_depth in flight, and handed
// to `sink` one window at a time, in leaf order. The view passed to the sink
// is valid only during the call.
//
// A generation can be replaced (or its leaf deleted) while it is read: its
// blocks are deleted after the commit that replaced it. A window that comes
// back short then fails the read with ABORTED ("replaced during the read");
// bytes already handed to the sink are of the old generation and the caller
// must discard them (the client library retries the whole read).
//
// Errors: ABORTED as above; UNAVAILABLE when Redis fails; the sink's own
// error is returned as is and stops the read.
//
// Thread-safe as far as the store is; one call per thread.
#ifndef TDSTORE_SERVER_STORE_LEAF_READER_H_
#define TDSTORE_SERVER_STORE_LEAF_READER_H_

#include <functional>
#include <string_view>

#include "absl/status/status.h"
#include "server/store/dict_store.h"
#include "server/store/schema.h"

namespace tdstore::store {

using ByteSink = std::function<absl::Status(std::string_view bytes)>;

absl::Status ReadLeaf(const DictStore& store, const DictSchema& schema, const Leaf& leaf,
                      const ByteSink& sink);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_LEAF_READER_H_
