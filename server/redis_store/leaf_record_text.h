// Text encodings of the leaf records (server/store/leaf_record.h) tdstore
// keeps in Redis hashes.
//
// Leaf record (field of <ns>:{id}:leaves, keyed by encoded path):
//   "dtype=float32;shape=100,84;gen=7"
// and for a value leaf (common/leaf_kind.h) its kind, and for one of the
// one-value form the value in lower-case hex:
//   "dtype=uint8;shape=100,64;gen=8;kind=text"
//   "dtype=uint8;shape=100,0;gen=9;kind=json;value=7b7d"
// and for a leaf of a record dict (layout=record, docs/storage-layout.md)
// where its rows sit in the shared record: byte offset and record size.
//   "dtype=float32;shape=100,84;gen=7;rec=0/365"
// Pending-write record (field of <ns>:{id}:pending, keyed by generation):
//   "expires_ms=1764480000000;dtype=float32;shape=100,84;gen=7"
// Formats are `key=value` pairs joined by ';' so they are readable in
// redis-cli and extensible: decoders ignore keys they do not know.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_SERVER_REDIS_STORE_LEAF_RECORD_TEXT_H_
#define TDSTORE_SERVER_REDIS_STORE_LEAF_RECORD_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/leaf_kind.h"
#include "common/shape.h"
#include "server/store/leaf_record.h"

namespace tdstore {


std::string EncodeLeafRecord(const LeafRecord& record);
// DATA_LOSS for a malformed record (Redis holds something we did not write).
absl::StatusOr<LeafRecord> DecodeLeafRecord(std::string_view text);

struct PendingRecord {
  int64_t expires_ms = 0;  // unix time after which a sweeper may delete it
  LeafRecord leaf;
};

std::string EncodePendingRecord(const PendingRecord& record);
absl::StatusOr<PendingRecord> DecodePendingRecord(std::string_view text);

}  // namespace tdstore

#endif  // TDSTORE_SERVER_REDIS_STORE_LEAF_RECORD_TEXT_H_
