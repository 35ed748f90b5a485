// RowsBehind: rows written behind (Dict::write_counted_behind), as one
// write queued on its client's WritesBehind, and how writes queued one
// after another join into one call.
//
// Two join (Join) when they write the same dict and count in the same
// counter, carry the same leaves in the same order (path, dtype, the shape
// of a row), each selects its rows by one 1-D list of positions, no
// position is in both, and together they carry at most kMaxJoinedBytes.
// Then one write of both lists, one after the other, with each leaf's rows
// in that order, adding both adds, has the effect of the two in turn: no
// row is written twice, so their order does not matter, and the counter
// ends where the two would leave it. Another process sees both land at
// once, where it could have seen the first alone.
//
// A joined call can cross a limit of tdstored's that none of its writes
// crosses alone (--max-indexed-bytes, --max-index-length, --max-call-bytes,
// its memory budget): tdstored refuses it with RESOURCE_EXHAUSTED, having
// written nothing, and Apply then sends the writes one by one. The caps
// (kMaxJoinedBytes, kMaxJoinedPositions) keep that far from tdstored's
// defaults (256 MiB, 16 Mi positions). A joined call holds one more copy
// of its bytes while it is sent, at most kMaxJoinedBytes beyond the
// window's 16 MiB.
#ifndef TDSTORE_CLIENT_CORE_SRC_ROWS_BEHIND_H_
#define TDSTORE_CLIENT_CORE_SRC_ROWS_BEHIND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "client/core/src/writes_behind.h"
#include "tdstore/core.h"

namespace tdstore::core {

class RowsBehind final : public QueuedWrite {
 public:
  static constexpr int64_t kMaxJoinedBytes = 4 << 20;
  static constexpr int64_t kMaxJoinedPositions = 64 << 10;

  // Copies the leaves' bytes and the index: the caller may change its
  // tensors once this returns. `dict` is the view the write goes through
  // (dict.cc, write_counted_behind, says why it does not own the client's
  // state).
  RowsBehind(Dict dict, const std::vector<LeafData>& leaves, const Index& index,
             std::string counter, int64_t add);

  // Dict::write_counted of every part, as one call; if tdstored refuses
  // that call with RESOURCE_EXHAUSTED, of each part in turn.
  void Apply() override;
  bool Join(QueuedWrite& next) override;

  // The leaf bytes this write holds.
  int64_t bytes() const { return bytes_; }

 private:
  // One write as it was queued.
  struct Part {
    std::unique_ptr<char[]> bytes;
    std::vector<LeafData> leaves;  // point into `bytes`
    Index index;
    int64_t add = 0;
  };
  // Whether `part`'s index is one 1-D list of positions (a join's
  // requirement), and those positions if so.
  static const std::vector<int64_t>* PositionsOf(const Part& part);

  Dict dict_;
  std::string counter_;
  std::vector<Part> parts_;
  int64_t bytes_ = 0;
  int64_t add_ = 0;  // the parts' adds, summed
  // Every position the parts select (filled at the first Join), and how
  // many they list, repeats too.
  std::unordered_set<int64_t> taken_;
  int64_t positions_ = 0;
};

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_ROWS_BEHIND_H_
