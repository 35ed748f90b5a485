// RowsBehind (rows_behind.h).
#include "client/core/src/rows_behind.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace tdstore::core {

RowsBehind::RowsBehind(Dict dict, const std::vector<LeafData>& leaves, const Index& index,
                       std::string counter, int64_t add)
    : dict_(std::move(dict)), counter_(std::move(counter)) {
  Part part;
  for (const LeafData& leaf : leaves) bytes_ += leaf.byte_size;
  part.bytes.reset(new char[static_cast<size_t>(std::max<int64_t>(bytes_, 1))]);
  part.leaves = leaves;
  int64_t at = 0;
  for (LeafData& leaf : part.leaves) {
    if (leaf.byte_size > 0) std::memcpy(part.bytes.get() + at, leaf.data, leaf.byte_size);
    leaf.data = part.bytes.get() + at;
    at += leaf.byte_size;
  }
  part.index = index;
  part.add = add;
  add_ = add;
  parts_.push_back(std::move(part));
  if (const std::vector<int64_t>* p = PositionsOf(parts_[0])) {
    positions_ = static_cast<int64_t>(p->size());
  }
}

const std::vector<int64_t>* RowsBehind::PositionsOf(const Part& part) {
  if (part.index.size() != 1) return nullptr;
  const IndexTerm& term = part.index[0];
  if (term.kind() != IndexTerm::Kind::kPositions || term.shape().size() != 1) return nullptr;
  return &term.values();
}

bool RowsBehind::Join(QueuedWrite& next) {
  auto* other = dynamic_cast<RowsBehind*>(&next);
  if (other == nullptr || other->parts_.size() != 1) return false;
  if (other->dict_.id() != dict_.id() || other->dict_.name() != dict_.name() ||
      other->counter_ != counter_ || bytes_ + other->bytes_ > kMaxJoinedBytes) {
    return false;
  }
  const Part& first = parts_.front();
  const Part& part = other->parts_.front();
  const std::vector<int64_t>* mine = PositionsOf(first);
  const std::vector<int64_t>* theirs = PositionsOf(part);
  int64_t add = 0;
  if (mine == nullptr || theirs == nullptr || part.leaves.size() != first.leaves.size() ||
      positions_ + static_cast<int64_t>(theirs->size()) > kMaxJoinedPositions ||
      __builtin_add_overflow(add_, part.add, &add)) {
    return false;
  }
  for (size_t i = 0; i < first.leaves.size(); ++i) {
    const LeafData& a = first.leaves[i];
    const LeafData& b = part.leaves[i];
    if (!(a.path == b.path) || a.dtype != b.dtype || a.kind != LeafKind::kTensor ||
        b.kind != LeafKind::kTensor || a.shape.empty() || b.shape.empty() ||
        !std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1, b.shape.end())) {
      return false;
    }
  }
  if (taken_.empty()) taken_.insert(mine->begin(), mine->end());
  for (int64_t p : *theirs) {
    if (taken_.count(p) != 0) return false;  // a row written twice: their order matters
  }
  taken_.insert(theirs->begin(), theirs->end());
  bytes_ += other->bytes_;
  positions_ += static_cast<int64_t>(theirs->size());
  add_ = add;
  parts_.push_back(std::move(other->parts_.front()));
  other->parts_.clear();
  return true;
}

void RowsBehind::Apply() {
  WriteOptions options;
  if (parts_.size() == 1) {
    options.index = &parts_[0].index;
    (void)dict_.write_counted(parts_[0].leaves, options, counter_, parts_[0].add);
    return;
  }
  // One write: the parts' positions one after the other, and each leaf's
  // rows in the same order, all in one buffer.
  std::vector<int64_t> positions;
  for (const Part& part : parts_) {
    const std::vector<int64_t>& p = *PositionsOf(part);
    positions.insert(positions.end(), p.begin(), p.end());
  }
  std::unique_ptr<char[]> bytes(new char[static_cast<size_t>(std::max<int64_t>(bytes_, 1))]);
  std::vector<LeafData> leaves = parts_[0].leaves;
  int64_t at = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    LeafData& leaf = leaves[i];
    leaf.data = bytes.get() + at;
    leaf.byte_size = 0;
    for (const Part& part : parts_) {
      const LeafData& piece = part.leaves[i];
      if (piece.byte_size > 0) std::memcpy(bytes.get() + at, piece.data, piece.byte_size);
      at += piece.byte_size;
      leaf.byte_size += piece.byte_size;
    }
    leaf.shape[0] = static_cast<int64_t>(positions.size());
  }
  const int64_t rows = static_cast<int64_t>(positions.size());
  const Index index{IndexTerm::Positions(std::move(positions), {rows})};
  options.index = &index;
  try {
    (void)dict_.write_counted(leaves, options, counter_, add_);
    return;
  } catch (const Error& e) {
    // A limit the joined call crossed and no part alone would: tdstored
    // refused it before writing anything. (A count refused after the rows
    // were written is RESOURCE_EXHAUSTED too, when the dict has no room
    // for a new counter; the parts then write the same rows again, still
    // before this write returns, and the first of them fails the same way.)
    if (e.code() != StatusCode::kResourceExhausted) throw;
  }
  bytes.reset();
  for (const Part& part : parts_) {
    WriteOptions one;
    one.index = &part.index;
    (void)dict_.write_counted(part.leaves, one, counter_, part.add);
  }
}

}  // namespace tdstore::core
