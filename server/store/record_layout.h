// The record layout (DictLayout::kRecord; docs/storage-layout.md, *Record
// dicts*), its rules in one place: which leaves form a record dict's
// record, where each one's row sits in it, and what the shared record
// stores. Every store forms records by these rules; how a store keeps the
// record's bytes is its own (the Redis store: one uint8 [rows, stride]
// generation, leaf_writer.h's BeginRecord).
//
// A record is formed once, by the dict's first leaves that have row bytes
// (a leaf of a dict without batch dims has none, and neither has an empty
// element): each leaf's row at the next free byte offset of the record, in
// the order given, the record's stride the sum of their row bytes. Once
// formed, a record never widens: a leaf made later keeps rows of its own
// beside it, as in a default dict (widening would rewrite every row of
// every leaf for one new key).
//
// Pure code, no I/O.
#ifndef TDSTORE_SERVER_STORE_RECORD_LAYOUT_H_
#define TDSTORE_SERVER_STORE_RECORD_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/store/leaf_record.h"
#include "server/store/schema.h"

namespace tdstore::store {

// Whether new leaves written into `schema`'s dict now form its record: a
// record dict whose record is not formed yet.
bool FormsRecord(const DictSchema& schema);

// New leaves split into those that go into the record (row bytes > 0, in
// the order given) and those that keep rows of their own.
struct RecordSplit {
  std::vector<Leaf> fields;
  std::vector<Leaf> own;
};
RecordSplit SplitForRecord(const std::vector<Leaf>& leaves);

// `fields` placed in one record: each one's in_record set to {offset,
// stride}, its generation cleared. INVALID_ARGUMENT if the record's size
// ([rows, stride] bytes) overflows.
struct PlacedRecord {
  std::vector<Leaf> fields;
  int64_t stride = 0;
  int64_t bytes = 0;  // rows x stride
};
absl::StatusOr<PlacedRecord> PlaceRecord(int64_t rows, std::vector<Leaf> fields);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_RECORD_LAYOUT_H_
