// How the Redis store keeps a dict's schema: the fields of its meta hash,
// parsing the HGETALL replies of meta, leaves and attrs into a DictSchema
// (docs/storage-layout.md), and the block keys a generation may own.
//
// Pure code, no I/O.
#ifndef TDSTORE_SERVER_REDIS_STORE_SCHEMA_TEXT_H_
#define TDSTORE_SERVER_REDIS_STORE_SCHEMA_TEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/block_layout.h"
#include "server/redis_store/leaf_record_text.h"
#include "server/store/schema.h"

namespace tdstore::store {

// Every block key a generation with this record may own in this dict, as a
// layout: the record's own batch dims (a generation parked before a resize
// keeps its old shape), with dim 0 widened to meta.rows_high (a grow may
// have sized blocks past the record before it failed). For deleting a
// generation, never for reading it.
absl::StatusOr<BlockLayout> GenerationExtent(const DictMeta& meta, const LeafRecord& record);

// Meta hash fields (docs/storage-layout.md).
inline constexpr char kMetaFormat[] = "format";
inline constexpr char kMetaName[] = "name";
inline constexpr char kMetaBatchShape[] = "batch_shape";
inline constexpr char kMetaRowsPerBlock[] = "rows_per_block";
inline constexpr char kMetaPartBytes[] = "part_bytes";
inline constexpr char kMetaVersion[] = "version";
inline constexpr char kMetaNextGen[] = "next_gen";
inline constexpr char kMetaDeleting[] = "deleting";
inline constexpr char kMetaLocked[] = "locked";
inline constexpr char kMetaRowsHigh[] = "rows_high";
inline constexpr char kMetaResizing[] = "resizing";
inline constexpr char kMetaLayout[] = "layout";  // absent: "leaves"

// Builds a schema from the flattened field/value lists of HGETALL meta,
// HGETALL leaves and HGETALL attrs. DATA_LOSS if a record is malformed;
// NOT_FOUND if meta is empty (the dict was deleted).
absl::StatusOr<DictSchema> ParseSchema(std::string id,
                                       const std::vector<std::string>& meta_fields,
                                       const std::vector<std::string>& leaf_fields,
                                       const std::vector<std::string>& attr_fields);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_SCHEMA_TEXT_H_
