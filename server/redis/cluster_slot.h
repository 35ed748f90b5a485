// Redis Cluster's key -> hash slot function.
//
// slot = CRC16(key) mod 16384, where CRC16 is the XMODEM variant (poly
// 0x1021, init 0, no reflection) and, when the key holds a non-empty "{tag}"
// (the first '{' and the first '}' after it, with something in between),
// only the tag is hashed. That is how every key of one dict's metadata, or of
// one block of every leaf, lands in one slot (docs/storage-layout.md).
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_SERVER_REDIS_CLUSTER_SLOT_H_
#define TDSTORE_SERVER_REDIS_CLUSTER_SLOT_H_

#include <cstdint>
#include <string_view>

namespace tdstore {

inline constexpr int kClusterSlots = 16384;

// CRC16/XMODEM of `data`.
uint16_t Crc16Xmodem(std::string_view data);

// The part of `key` that decides its slot: the hash tag if there is one,
// else the whole key.
std::string_view HashTagOf(std::string_view key);

// The cluster slot of `key`, 0..16383.
int KeySlot(std::string_view key);

}  // namespace tdstore

#endif  // TDSTORE_SERVER_REDIS_CLUSTER_SLOT_H_
