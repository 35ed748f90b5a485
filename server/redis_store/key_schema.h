// Names of every Redis key tdstore uses. docs/storage-layout.md describes
// each one; keep the two in step.
//
//   <ns>:catalog                 hash  dict name -> dict id
//   <ns>:next_dict_id            string counter for dict ids
//   <ns>:used_bytes              string bytes of every stored generation (quota)
//   <ns>:{<id>}:meta             hash  batch shape, block layout, version, ...
//   <ns>:{<id>}:leaves           hash  encoded path -> leaf record
//   <ns>:{<id>}:pending          hash  generation -> pending-write record
//   <ns>:{<id>}:attrs            hash  attribute name -> value
//   <ns>:{<id>}:counters         hash  counter name -> decimal int64
//   <ns>:{<id>}:at_once_hold     string  only inside one MULTI/EXEC of a write at once
//   <ns>:{<id>.<b>}:g<G>:<p>     string  part p of block b of generation G
//
// The braces are Redis Cluster hash tags: metadata of a dict shares one slot,
// block b of every leaf shares another, and different blocks spread over the
// cluster.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_SERVER_REDIS_STORE_KEY_SCHEMA_H_
#define TDSTORE_SERVER_REDIS_STORE_KEY_SCHEMA_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace tdstore {

class KeySchema {
 public:
  // ns: the namespace prefix, e.g. "td". Must be non-empty and brace-free.
  explicit KeySchema(std::string ns) : ns_(std::move(ns)) {}

  const std::string& ns() const { return ns_; }

  std::string Catalog() const;
  std::string DictIdCounter() const;
  // The namespace's stored-bytes counter (server/redis_store/dict_store.h, quotas).
  std::string UsedBytes() const;
  std::string Meta(std::string_view dict_id) const;
  std::string Leaves(std::string_view dict_id) const;
  std::string Pending(std::string_view dict_id) const;
  // What claim_generations.lua holds for write_at_once.lua inside one
  // MULTI ... EXEC; never there outside one.
  std::string AtOnceHold(std::string_view dict_id) const;
  // The dict's attributes (name -> value) and counters (name -> integer).
  std::string Attrs(std::string_view dict_id) const;
  std::string Counters(std::string_view dict_id) const;
  std::string BlockPart(std::string_view dict_id, int64_t block, int64_t generation,
                        int64_t part) const;
  // The pub/sub channel (not a key) on which every script that changes a
  // dict's schema publishes the dict's id (server/redis_store/schema_watch.h).
  std::string SchemaChannel() const;
  // Glob matching every data key of one dict (for SCAN in tests and tools).
  std::string DataPattern(std::string_view dict_id) const;

 private:
  std::string ns_;
};

}  // namespace tdstore

#endif  // TDSTORE_SERVER_REDIS_STORE_KEY_SCHEMA_H_
