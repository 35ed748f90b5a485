// The sessions every Store offers, written once on its virtual calls: a
// whole-leaf write with write-behind, an indexed write received value by
// value, and an append stream's batches.
#include "server/store/store.h"

#include <algorithm>
#include <utility>

#include "common/str_cat.h"
#include "server/store/write_behind.h"

namespace tdstore::store {
namespace {

// LeafWrite with WriteBehind: small puts run each step on the caller's
// thread. From the first large data chunk on, the steps run on a worker
// while the caller receives the next chunk, when the memory budget has room
// for the worker's queue right now (no room, no worker: the put runs as
// before).
class BufferedLeafWrite final : public LeafWrite {
 public:
  BufferedLeafWrite(std::unique_ptr<LeafWrite> write, MemoryBudget& budget)
      : write_(std::move(write)), budget_(budget) {}
  // `behind_` is destroyed first (declared last): its worker stops before
  // the write it appends to aborts.

  void RefuseIfLocked() override { write_->RefuseIfLocked(); }
  void ExpectLeaves(int count) override { write_->ExpectLeaves(count); }

  absl::Status BeginLeaf(const LeafPath& path, const LeafRecord& record,
                         int64_t byte_size) override {
    if (!behind_) return write_->BeginLeaf(path, record, byte_size);
    return behind_->Push(
        [w = write_.get(), path, record, byte_size] { return w->BeginLeaf(path, record, byte_size); },
        0);
  }

  absl::Status Append(std::string bytes) override {
    const auto size = static_cast<int64_t>(bytes.size());
    if (!behind_ && size >= kWriteBehindMinChunkBytes) {
      behind_lease_ = budget_.TryAcquire(kWriteBehindQueueBytes);
      if (behind_lease_) behind_.emplace(kWriteBehindQueueBytes);
    }
    if (!behind_) return write_->Append(std::move(bytes));
    return behind_->Push(
        [w = write_.get(), b = std::move(bytes)]() mutable { return w->Append(std::move(b)); },
        size);
  }

  // Lent bytes hold no memory of ours: written behind in their turn if a
  // worker runs, else at once, never copied.
  absl::Status AppendLent(std::string_view bytes) override {
    if (!behind_) return write_->AppendLent(bytes);
    return behind_->Push([w = write_.get(), bytes] { return w->AppendLent(bytes); }, 0);
  }

  // Borrowed bytes must be used up before this returns: in their turn
  // behind what is queued, then waited for.
  absl::Status AppendBorrowed(std::string_view bytes) override {
    if (!behind_) return write_->AppendBorrowed(bytes);
    if (auto s = behind_->Push([w = write_.get(), bytes] { return w->AppendBorrowed(bytes); }, 0);
        !s.ok()) {
      return s;
    }
    return behind_->Wait();
  }

  absl::StatusOr<CommitResult> Commit() override {
    if (behind_) {
      if (auto s = behind_->Wait(); !s.ok()) return s;
    }
    return write_->Commit();
  }

 private:
  std::unique_ptr<LeafWrite> write_;
  MemoryBudget& budget_;
  std::optional<MemoryBudget::Lease> behind_lease_;
  std::optional<WriteBehind> behind_;
};

class ValueByValueWrite final : public IndexedWrite {
 public:
  ValueByValueWrite(Store* store, const DictRef& ref, std::optional<plan::IndexSpec> index,
                    RingAppend ring)
      : store_(store),
        name_(ref.name),
        id_(ref.id),
        index_(std::move(index)),
        ring_(std::move(ring)),
        held_(store->budget().Empty()) {}

  absl::Status BeginValue(Value value) override {
    // Refused before buffering: the selection limit bounds what is held.
    announced_ += value.byte_size;
    if (announced_ > store_->max_indexed_bytes()) {
      return absl::ResourceExhaustedError(StrCat("an indexed write may carry at most ",
                                                 store_->max_indexed_bytes(),
                                                 " bytes (--max-indexed-bytes)"));
    }
    if (value.kind != LeafKind::kRagged && !value.value.empty()) {
      return absl::InvalidArgumentError(StrCat("leaf '", PathToDisplay(value.path),
                                               "': a one-value leaf is written whole, not by rows"));
    }
    // While this waits for the budget the caller reads nothing more, so
    // gRPC's flow control stops the client instead of letting its data
    // pile up in tdstored.
    if (auto s = held_.Grow(store_->IndexedWriteLease(value.byte_size, values_.empty()),
                            "an indexed write");
        !s.ok()) {
      return s;
    }
    IndexedWriteValue& v = values_.emplace_back();
    v.bytes.reserve(static_cast<size_t>(value.byte_size));
    v.path = std::move(value.path);
    v.dtype = value.dtype;
    v.shape = std::move(value.shape);
    v.kind = value.kind;
    v.value = std::move(value.value);  // a ragged leaf's cell dtype, checked against the leaf's
    return absl::OkStatus();
  }

  absl::Status Append(std::string_view bytes) override {
    if (values_.empty()) return absl::InvalidArgumentError("indexed-write data before its value");
    values_.back().bytes.append(bytes);
    return absl::OkStatus();
  }

  absl::StatusOr<IndexedWriteResult> Commit() override {
    const DictRef ref{name_, id_};
    if (!index_) {
      auto appended = store_->AppendToRing(ref, ring_, values_, held_);
      if (!appended.ok()) return appended.status();
      return IndexedWriteResult{std::move(appended->written), appended->version, appended->start,
                                appended->count_value};
    }
    return store_->WriteIndexed(ref, *index_, values_, held_);
  }

 private:
  Store* const store_;
  const std::string name_;
  const std::string id_;
  const std::optional<plan::IndexSpec> index_;
  const RingAppend ring_;
  // Declared before the values, so that it is returned after they are freed.
  MemoryBudget::Lease held_;
  std::vector<IndexedWriteValue> values_;
  int64_t announced_ = 0;
};

// One leaf an append stream carries, as the stream's start found it.
struct AppendedLeaf {
  LeafPath path;
  DType dtype = DType::kUnspecified;
  // A value leaf's rows are appended as whole slots.
  LeafKind kind = LeafKind::kTensor;
  std::string value;  // a ragged leaf's cell dtype
  Shape element_shape;
  int64_t row_bytes = 0;
};

class BatchAppend final : public RowAppend {
 public:
  BatchAppend(Store* store, const DictRef& ref, std::vector<AppendedLeaf> leaves,
              int64_t rows_in_dict)
      : store_(store),
        name_(ref.name),
        id_(ref.id),
        leaves_(std::move(leaves)),
        rows_in_dict_(rows_in_dict) {}

  absl::Status Append(int64_t start, int64_t rows, std::vector<std::string> leaf_rows) override {
    if (rows < 1) return absl::InvalidArgumentError("a row batch needs at least one row");
    if (start < 0 || start > rows_in_dict_ - rows) {
      return absl::OutOfRangeError(StrCat("rows [", start, ", ", start + rows,
                                          ") are outside batch dim 0 of size ", rows_in_dict_));
    }
    if (leaf_rows.size() != leaves_.size()) {
      return absl::InvalidArgumentError(StrCat("a row batch carries ", leaf_rows.size(),
                                               " leaves; the stream's AppendBegin named ",
                                               leaves_.size()));
    }
    std::vector<IndexedWriteValue> values(leaves_.size());
    int64_t bytes = 0;
    for (size_t i = 0; i < leaves_.size(); ++i) {
      const AppendedLeaf& leaf = leaves_[i];
      if (static_cast<int64_t>(leaf_rows[i].size()) != rows * leaf.row_bytes) {
        return absl::InvalidArgumentError(StrCat("leaf '", PathToDisplay(leaf.path), "': ",
                                                 leaf_rows[i].size(), " bytes for ", rows,
                                                 " rows of ", leaf.row_bytes, " bytes"));
      }
      bytes += static_cast<int64_t>(leaf_rows[i].size());
      IndexedWriteValue& v = values[i];
      v.path = leaf.path;
      v.dtype = leaf.dtype;
      v.kind = leaf.kind;
      v.value = leaf.value;
      v.shape = {rows};
      v.shape.insert(v.shape.end(), leaf.element_shape.begin(), leaf.element_shape.end());
      v.bytes = std::move(leaf_rows[i]);
    }
    MemoryBudget::Lease held = store_->budget().Empty();
    if (auto s = held.Grow(store_->IndexedWriteLease(bytes, true), "an appended row batch");
        !s.ok()) {
      return s;
    }
    const plan::IndexSpec index = {plan::IndexTerm::Slice(start, start + rows, 1)};
    return store_->WriteIndexed({name_, id_}, index, values, held).status();
  }

 private:
  Store* const store_;
  const std::string name_;
  const std::string id_;
  const std::vector<AppendedLeaf> leaves_;
  const int64_t rows_in_dict_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LeafWrite>> Store::BeginWrite(const DictRef& ref) {
  auto write = OpenLeafWrite(ref);
  if (!write.ok()) return write.status();
  return std::make_unique<BufferedLeafWrite>(*std::move(write), budget());
}

std::unique_ptr<IndexedWrite> Store::BeginIndexedWrite(const DictRef& ref,
                                                       std::optional<plan::IndexSpec> index,
                                                       RingAppend ring) {
  return std::make_unique<ValueByValueWrite>(this, ref, std::move(index), std::move(ring));
}

absl::StatusOr<std::unique_ptr<RowAppend>> Store::OpenAppend(const DictRef& ref,
                                                            const std::vector<LeafPath>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("AppendBegin names no leaf");
  auto schema = Describe(ref);
  if (!schema.ok()) return schema.status();
  const Shape& batch_shape = schema->meta.batch_shape;
  if (batch_shape.empty()) {
    return absl::InvalidArgumentError(
        StrCat("dict '", ref.name, "' has no batch dim to append rows along"));
  }
  // Each leaf's dtype and row size, from the schema at the stream's start.
  // A leaf replaced later by one of another dtype or shape fails the
  // batches that follow (the indexed write checks them), never silently.
  std::vector<AppendedLeaf> leaves;
  for (const LeafPath& path : paths) {
    const Leaf* leaf = schema->Find(path);
    if (leaf == nullptr) {
      return absl::NotFoundError(StrCat("dict '", ref.name, "' has no leaf '",
                                        PathToDisplay(path), "' to append to"));
    }
    AppendedLeaf& a = leaves.emplace_back();
    a.path = path;
    a.dtype = leaf->record.dtype;
    a.kind = leaf->record.kind;
    if (a.kind == LeafKind::kRagged) a.value = leaf->record.value;
    a.element_shape.assign(leaf->record.shape.begin() + 1, leaf->record.shape.end());
    a.row_bytes = RecordBytes(leaf->record) / std::max<int64_t>(1, batch_shape[0]);
  }
  return std::make_unique<BatchAppend>(this, ref, std::move(leaves), batch_shape[0]);
}

}  // namespace tdstore::store
