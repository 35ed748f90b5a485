#include "server/store/memory_store.h"

#include "server/store/record_layout.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/leaf_kind.h"
#include "common/protocol_limits.h"
#include "common/str_cat.h"
#include "server/store/store_checks.h"

namespace tdstore::store {

namespace {

// An indexed write holds its values and, when a value broadcasts, one
// expanded copy: the bytes land in the leaf itself.
constexpr int64_t kWriteCopies = 1;
// A planned indexed write whose dict changed before it could apply is
// planned again this many times in all.
constexpr int kWriteAttempts = 3;
// The schema watch's limit, as the Redis store's (SchemaWatch).
constexpr size_t kMaxWatchers = 100000;


// What the Redis store's stale errors say (redis_store/schema_cache.h).
absl::Status Stale(std::string_view what) {
  return absl::AbortedError(StrCat("stale: ", what, " changed meanwhile; retry"));
}

absl::Status DeletedDuringWrite(std::string_view name) {
  return absl::NotFoundError(StrCat("dict '", name, "' was deleted during the write"));
}

// A path equal to `prefix` or under it.
bool Under(const LeafPath& path, const LeafPath& prefix) {
  return path == prefix || IsPathPrefix(prefix, path);
}

// The dict's one values (the one-value form's bytes) with `written` in place
// of the leaves at their paths: INVALID_ARGUMENT past kMaxOneValueBytesPerDict.
absl::Status CheckOneValues(const DictSchema& schema, const std::vector<Leaf>& written,
                            const LeafPath& path) {
  std::map<std::string, const LeafRecord*> after;
  for (const auto& [key, leaf] : schema.leaves) after[key] = &leaf.record;
  for (const Leaf& leaf : written) after[EncodePath(leaf.path)] = &leaf.record;
  int64_t total = 0;
  for (const auto& [_, r] : after) {
    if (IsOneValue(r->kind, r->shape)) total += static_cast<int64_t>(r->value.size());
  }
  if (total > kMaxOneValueBytesPerDict) {
    return absl::InvalidArgumentError(StrCat(
        "leaf ", QuotedPath(path), ": the dict's one values would add up to ", total,
        " bytes, over the limit of ", kMaxOneValueBytesPerDict, " bytes per dict"));
  }
  return absl::OkStatus();
}

}  // namespace

// --- The whole-leaf write ------------------------------------------------------

// WriteTxn's contract (redis_store/leaf_writer.h) in memory: each leaf is
// checked against the schema read at the start, its bytes are held here,
// and Commit makes every leaf visible in one step under the store's mutex.
class MemoryStore::Write final : public LeafWrite {
 public:
  Write(MemoryStore* store, DictSchema schema)
      : store_(store), schema_(std::move(schema)), bytes_after_(schema_.StoredBytes()) {}
  ~Write() override { Abort(); }

  void RefuseIfLocked() override { refuse_if_locked_ = true; }

  absl::Status BeginLeaf(const LeafPath& path, const LeafRecord& leaf,
                         int64_t byte_size) override {
    if (auto s = CheckReady(); !s.ok()) return s;
    if (auto s = CheckLeafHeader(schema_.meta.batch_shape, path, leaf, byte_size); !s.ok()) {
      return Fail(s);
    }
    std::vector<Leaf> written;
    for (const Pending& other : leaves_) {
      if (auto s = CheckDisjoint(other.leaf.path, path); !s.ok()) return Fail(s);
      written.push_back(other.leaf);
    }
    if (auto s = CheckNesting(schema_, path); !s.ok()) return Fail(s);
    LeafRecord record = leaf;
    record.generation = 0;
    record.in_record = {};  // a whole leaf has rows of its own
    written.push_back({path, record});
    if (auto s = CheckOneValues(schema_, written, path); !s.ok()) return Fail(s);
    const Leaf* replaced = schema_.Find(path);
    if (auto s = CheckNotRecordLeaf(schema_, path, replaced); !s.ok()) return Fail(s);
    if (auto s = CheckLockedLeafWrite(schema_, path, replaced, leaf, refuse_if_locked_);
        !s.ok()) {
      return Fail(s);
    }
    const int64_t after = bytes_after_ + byte_size - (replaced ? RecordBytes(replaced->record) : 0);
    if (auto s = CheckDictQuota(store_->options_, schema_.meta, after); !s.ok()) return Fail(s);
    {
      std::lock_guard<std::mutex> lock(store_->mu_);
      auto dict = store_->dicts_.find(schema_.meta.id);
      if (dict == store_->dicts_.end()) return Fail(DeletedDuringWrite(schema_.meta.name));
      if (auto s = store_->CheckNamespaceLocked(
              byte_size, StrCat("leaf ", QuotedPath(path), " of dict '", schema_.meta.name, "'"));
          !s.ok()) {
        return Fail(s);
      }
      store_->reserved_bytes_ += byte_size;
      reserved_ += byte_size;
      record.generation = dict->second.next_generation++;
    }
    bytes_after_ = after;
    Pending& p = leaves_.emplace_back();
    p.leaf = {path, std::move(record)};
    p.size = byte_size;
    p.bytes = std::make_shared<std::string>();
    p.bytes->reserve(static_cast<size_t>(byte_size));
    return absl::OkStatus();
  }

  absl::Status Append(std::string bytes) override {
    if (done_) return absl::FailedPreconditionError("write transaction already finished");
    if (leaves_.empty()) {
      return Fail(absl::InvalidArgumentError("data arrived before any leaf header"));
    }
    Pending& cur = leaves_.back();
    if (static_cast<int64_t>(cur.bytes->size() + bytes.size()) > cur.size) {
      return Fail(absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(cur.leaf.path),
                                                    ": more data than the ", cur.size,
                                                    " bytes its header announced")));
    }
    if (cur.bytes->empty()) {
      *cur.bytes = std::move(bytes);
    } else {
      cur.bytes->append(bytes);
    }
    return absl::OkStatus();
  }

  // The current leaf's bytes are `bytes`, whole and shared (a copy's).
  absl::Status Adopt(Bytes bytes) {
    if (leaves_.empty() || !leaves_.back().bytes->empty()) {
      return Fail(absl::InternalError("Adopt needs a fresh leaf"));
    }
    if (static_cast<int64_t>(bytes->size()) != leaves_.back().size) {
      return Fail(absl::InternalError("Adopt of a leaf of another size"));
    }
    leaves_.back().bytes = std::move(bytes);
    return absl::OkStatus();
  }

  absl::StatusOr<CommitResult> Commit() override {
    if (done_) return absl::FailedPreconditionError("write transaction already finished");
    if (leaves_.empty()) {
      return Fail(absl::InvalidArgumentError("the write stream carried no leaf"));
    }
    if (auto s = CheckComplete(leaves_.back()); !s.ok()) return Fail(s);
    std::lock_guard<std::mutex> lock(store_->mu_);
    auto it = store_->dicts_.find(schema_.meta.id);
    if (it == store_->dicts_.end()) return FailLocked(DeletedDuringWrite(schema_.meta.name));
    Dict& dict = it->second;
    DictSchema& now = dict.schema;
    // The checks commit_leaves.lua makes, against the dict as it is now.
    if (now.meta.locked) {
      for (const Pending& p : leaves_) {
        const Leaf* old = now.Find(p.leaf.path);
        if (refuse_if_locked_ || old == nullptr || !SameLeafSchema(old->record, p.leaf.record)) {
          return FailLocked(LockedError(now.meta.name,
                                        StrCat(refuse_if_locked_ ? "replace leaf "
                                                                 : "add or reshape leaf ",
                                               QuotedPath(p.leaf.path))));
        }
      }
    }
    for (const Pending& p : leaves_) {
      if (!HasPrefix(p.leaf.record.shape, now.meta.batch_shape)) {
        return FailLocked(Stale(StrCat("the batch size of dict '", now.meta.name,
                                       "' (resized during the write)")));
      }
    }
    for (const Pending& p : leaves_) {
      if (auto s = CheckNesting(now, p.leaf.path); !s.ok()) return FailLocked(s);
    }
    const int64_t before = now.StoredBytes();
    CommitResult result;
    for (Pending& p : leaves_) {
      const std::string key = EncodePath(p.leaf.path);
      now.leaves[key] = p.leaf;
      dict.data[key] = std::move(p.bytes);
      result.written.push_back(p.leaf);
    }
    result.version = ++now.meta.version;
    store_->used_bytes_ += now.StoredBytes() - before;
    store_->reserved_bytes_ -= std::exchange(reserved_, 0);
    store_->ChangedLocked(now.meta.id);
    done_ = true;
    leaves_.clear();
    return result;
  }

 private:
  struct Pending {
    Leaf leaf;
    int64_t size = 0;
    Bytes bytes;
  };

  absl::Status CheckComplete(const Pending& p) const {
    if (static_cast<int64_t>(p.bytes->size()) == p.size) return absl::OkStatus();
    return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(p.leaf.path), ": header announced ",
                                             p.size, " bytes but ", p.bytes->size(), " arrived"));
  }
  absl::Status CheckReady() {
    if (done_) return absl::FailedPreconditionError("write transaction already finished");
    if (!leaves_.empty()) {
      if (auto s = CheckComplete(leaves_.back()); !s.ok()) return Fail(s);
    }
    return absl::OkStatus();
  }
  // Aborts: nothing was visible, and the reservation goes back.
  absl::Status Fail(absl::Status status) {
    Abort();
    return status;
  }
  absl::Status FailLocked(absl::Status status) {
    store_->reserved_bytes_ -= std::exchange(reserved_, 0);
    done_ = true;
    leaves_.clear();
    return status;
  }
  void Abort() {
    if (done_) return;
    std::lock_guard<std::mutex> lock(store_->mu_);
    FailLocked(absl::OkStatus()).IgnoreError();
  }

  MemoryStore* const store_;
  const DictSchema schema_;
  std::vector<Pending> leaves_;
  int64_t bytes_after_;    // what the dict stores once this commits
  int64_t reserved_ = 0;   // of the namespace, for leaves_
  bool refuse_if_locked_ = false;
  bool done_ = false;
};

// --- The store -------------------------------------------------------------

MemoryStore::MemoryStore(StoreOptions options)
    : options_(std::move(options)),
      budget_(options_.memory_budget_bytes, options_.memory_budget_wait),
      notifier_([this] { Notify(); }) {}

MemoryStore::~MemoryStore() { Stop(); }

void MemoryStore::Stop() {
  std::map<uint64_t, Watcher> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    ended.swap(watchers_);
  }
  due_changed_.notify_all();
  notifier_.join();
  // On this thread, once the notifier is done: still one listener at a time.
  const absl::Status why = absl::UnavailableError("tdstored is shutting down");
  for (const auto& [_, w] : ended) (*w.listener)(why);
}

Health MemoryStore::Ping() const { return Health{kBackend, 0, true}; }

int64_t MemoryStore::IndexedWriteLease(int64_t value_bytes, bool first_value) const {
  return (1 + kWriteCopies) * value_bytes + (first_value ? kIndexAllowance : 0);
}

absl::StatusOr<MemoryStore::Dict*> MemoryStore::FindLocked(const DictRef& ref) const {
  if (auto s = ValidateDictName(ref.name); !s.ok()) return s;
  auto name = names_.find(ref.name);
  if (name == names_.end() || (!ref.id.empty() && name->second != ref.id)) {
    return DictNotFound(ref);
  }
  return &dicts_.at(name->second);
}

void MemoryStore::ChangedLocked(const std::string& id) {
  if (watchers_.empty()) return;
  due_.insert(id);
  due_changed_.notify_all();
}

absl::Status MemoryStore::CheckNamespaceLocked(int64_t bytes, std::string_view what) const {
  const int64_t quota = options_.namespace_quota_bytes;
  const int64_t used = used_bytes_ + reserved_bytes_;
  if (quota <= 0 || bytes <= 0 || used + bytes <= quota) return absl::OkStatus();
  return NamespaceQuotaError(options_, used, bytes, what);
}

absl::StatusOr<std::vector<Leaf>> MemoryStore::CreateZeroLeavesLocked(
    Dict& dict, const std::vector<ZeroLeaf>& leaves) {
  DictSchema& schema = dict.schema;
  std::vector<Leaf> made;
  for (const ZeroLeaf& z : leaves) {
    if (schema.Find(z.path) == nullptr) made.push_back({z.path, {z.dtype, z.shape, 0, z.kind, z.value}});
  }
  if (made.empty()) return made;
  // The dict's first leaves with rows form its record; a leaf made after
  // it formed keeps rows of its own (record_layout.h).
  int64_t stride = 0;
  std::vector<Leaf> own = made;
  std::vector<Leaf> fields;
  if (FormsRecord(schema)) {
    RecordSplit split = SplitForRecord(made);
    own = std::move(split.own);
    if (!split.fields.empty()) {
      auto placed = PlaceRecord(schema.meta.batch_shape[0], std::move(split.fields));
      if (!placed.ok()) return placed.status();
      stride = placed->stride;
      fields = std::move(placed->fields);
    }
  }
  if (schema.meta.locked) {
    return LockedError(schema.meta.name, stride > 0 ? std::string("add leaves")
                                                    : StrCat("add leaf ", QuotedPath(made[0].path)));
  }
  const int64_t record_generation = stride > 0 ? dict.next_generation++ : 0;
  DictSchema after = schema;
  made.clear();
  for (Leaf& leaf : fields) {
    leaf.record.generation = record_generation;
    made.push_back(leaf);
  }
  for (Leaf& leaf : own) {
    leaf.record.generation = dict.next_generation++;
    made.push_back(leaf);
  }
  for (const Leaf& leaf : made) after.leaves[EncodePath(leaf.path)] = leaf;
  const int64_t added = after.StoredBytes() - schema.StoredBytes();
  if (auto s = CheckDictQuota(options_, schema.meta, after.StoredBytes()); !s.ok()) return s;
  if (auto s = CheckNamespaceLocked(
          added, stride > 0 ? StrCat("the record of dict '", schema.meta.name, "'")
                            : StrCat("leaf ", QuotedPath(made[0].path), " of dict '",
                                     schema.meta.name, "'"));
      !s.ok()) {
    return s;
  }
  for (const Leaf& leaf : made) {
    dict.data[EncodePath(leaf.path)] =
        std::make_shared<std::string>(static_cast<size_t>(RecordBytes(leaf.record)), '\0');
  }
  after.meta.version += 1;
  schema = std::move(after);
  used_bytes_ += added;
  ChangedLocked(schema.meta.id);
  return made;
}

absl::StatusOr<DictSchema> MemoryStore::CreateDict(const NewDict& spec) {
  const bool copy = spec.copy_from.has_value();
  if (copy && (!spec.batch_shape.empty() || !spec.leaves.empty())) {
    return absl::InvalidArgumentError(
        "a dict created as a copy takes the source's batch shape and leaves: give neither");
  }
  if (copy && spec.layout == DictLayout::kRecord) {
    return absl::InvalidArgumentError(
        "a copy is made in the default layout: create a record dict with the leaves and "
        "write its rows (td[:] = source) instead");
  }
  // Every leaf is checked before anything is created.
  std::vector<ZeroLeaf> leaves;
  int64_t schema_bytes = 0;
  for (const NewDict::Leaf& leaf : spec.leaves) {
    Shape shape = spec.batch_shape;
    shape.insert(shape.end(), leaf.element_shape.begin(), leaf.element_shape.end());
    auto bytes = CheckNewLeaf(spec.batch_shape, leaf.path, LeafRecord{leaf.dtype, shape, 0, leaf.kind});
    if (!bytes.ok()) return bytes.status();
    for (const ZeroLeaf& other : leaves) {
      if (auto s = CheckDisjoint(other.path, leaf.path); !s.ok()) return s;
    }
    schema_bytes += *bytes;
    leaves.push_back({leaf.path, leaf.dtype, std::move(shape), leaf.kind});
  }

  std::lock_guard<std::mutex> lock(mu_);
  // A copy's leaves: the source's records at new generations, sharing the
  // source's bytes (writes copy bytes a reader or another leaf still holds).
  Shape batch_shape = spec.batch_shape;
  int64_t rows_per_block = spec.rows_per_block;
  int64_t part_bytes = spec.part_bytes;
  std::vector<std::pair<Leaf, Bytes>> copied;
  if (copy) {
    const CopySource& source = *spec.copy_from;
    auto from = FindLocked(source.dict);
    if (!from.ok()) return from.status();
    const DictSchema& src = (*from)->schema;
    auto selected = src.Select(source.from.empty() ? std::vector<LeafPath>{}
                                                   : std::vector<LeafPath>{source.from});
    if (!selected.ok()) return selected.status();
    for (const Leaf* leaf : *selected) {
      LeafPath target(leaf->path.begin() + static_cast<std::ptrdiff_t>(source.from.size()),
                      leaf->path.end());
      if (target.empty()) {
        return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(leaf->path),
                                                 " needs a target path to be copied to"));
      }
      LeafRecord record = leaf->record;
      record.in_record = {};
      copied.push_back({{target, record}, (*from)->data.at(EncodePath(leaf->path))});
      schema_bytes += RecordBytes(record);
    }
    batch_shape = src.meta.batch_shape;
    if (rows_per_block == 0 && part_bytes == 0) {
      rows_per_block = src.meta.rows_per_block;
      part_bytes = src.meta.part_bytes;
    }
  }
  if (auto s = CheckNewDict(options_, spec.name, batch_shape, spec.layout, &rows_per_block,
                           &part_bytes);
      !s.ok()) {
    return s;
  }
  Dict dict;
  DictMeta& meta = dict.schema.meta;
  meta.name = std::string(spec.name);
  meta.batch_shape = batch_shape;
  meta.rows_per_block = rows_per_block;
  meta.part_bytes = part_bytes;
  meta.layout = spec.layout;
  if (auto s = CheckDictQuota(options_, meta, schema_bytes); !s.ok()) return s;
  if (auto s = CheckNamespaceLocked(schema_bytes, StrCat("the schema of dict '", spec.name, "'"));
      !s.ok()) {
    return s;
  }
  if (static_cast<int64_t>(names_.size()) >= options_.max_dicts) {
    return MaxDictsError(options_, static_cast<int64_t>(names_.size()));
  }
  if (names_.count(spec.name) != 0) {
    return absl::AlreadyExistsError(StrCat("dict '", spec.name, "' already exists"));
  }
  meta.id = StrCat(next_id_++);
  if (!copied.empty()) {
    for (auto& [leaf, bytes] : copied) {
      leaf.record.generation = dict.next_generation++;
      const std::string key = EncodePath(leaf.path);
      dict.schema.leaves[key] = leaf;
      dict.data[key] = std::move(bytes);
    }
    meta.version = 1;  // the copy's commit
    used_bytes_ += dict.schema.StoredBytes();
  }
  if (!leaves.empty()) {
    auto made = CreateZeroLeavesLocked(dict, leaves);
    if (!made.ok()) return made.status();
  }
  const std::string id = meta.id;
  names_.emplace(spec.name, id);
  auto [it, _] = dicts_.emplace(id, std::move(dict));
  return it->second.schema;
}

absl::StatusOr<DictSchema> MemoryStore::Describe(const DictRef& ref) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto dict = FindLocked(ref);
  if (!dict.ok()) return dict.status();
  return (*dict)->schema;
}

absl::StatusOr<SchemaVersionSeen> MemoryStore::SchemaVersion(const DictRef& ref) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto dict = FindLocked(ref);
  if (!dict.ok()) return dict.status();
  return SchemaVersionSeen{(*dict)->schema.meta.id, (*dict)->schema.meta.version};
}

absl::StatusOr<std::vector<std::string>> MemoryStore::ListDicts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, _] : names_) names.push_back(name);
  return names;  // the map keeps them sorted
}

absl::Status MemoryStore::DeleteDict(const DictRef& ref) {
  std::lock_guard<std::mutex> lock(mu_);
  auto dict = FindLocked(ref);
  if (!dict.ok()) return dict.status();
  const std::string id = (*dict)->schema.meta.id;
  used_bytes_ -= (*dict)->schema.StoredBytes();
  names_.erase(names_.find(ref.name));
  dicts_.erase(id);
  ChangedLocked(id);
  return absl::OkStatus();
}

absl::StatusOr<DictSchema> MemoryStore::RenameDict(const DictRef& ref,
                                                   std::string_view new_name) {
  if (auto s = ValidateDictName(ref.name); !s.ok()) return s;
  if (auto s = ValidateDictName(new_name); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto dict = FindLocked(ref);
  if (!dict.ok()) return dict.status();
  if (ref.name == new_name) return (*dict)->schema;
  if (names_.count(new_name) != 0) {
    return absl::AlreadyExistsError(StrCat("dict '", new_name, "' already exists"));
  }
  const std::string id = (*dict)->schema.meta.id;
  names_.erase(names_.find(ref.name));
  names_.emplace(new_name, id);
  (*dict)->schema.meta.name = std::string(new_name);
  ChangedLocked(id);
  return (*dict)->schema;
}

absl::StatusOr<RemovedLeaves> MemoryStore::DeleteLeaves(const DictRef& ref,
                                                       const std::vector<LeafPath>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no paths to delete");
  for (const LeafPath& p : paths) {
    if (auto s = ValidatePath(p); !s.ok()) return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto found = FindLocked(ref);
  if (!found.ok()) return found.status();
  Dict& dict = **found;
  DictSchema& schema = dict.schema;
  if (schema.meta.locked) return LockedError(ref.name, "delete leaves");
  std::set<std::string> doomed;
  for (const LeafPath& p : paths) {
    std::vector<const Leaf*> hit = schema.Under(p);
    if (hit.empty()) {
      return absl::NotFoundError(
          StrCat("dict '", ref.name, "' has no leaf or sub-dict ", QuotedPath(p)));
    }
    for (const Leaf* leaf : hit) doomed.insert(EncodePath(leaf->path));
  }
  const int64_t before = schema.StoredBytes();
  RemovedLeaves removed;
  for (const std::string& key : doomed) {
    removed.paths.push_back(schema.leaves.at(key).path);
    schema.leaves.erase(key);
    dict.data.erase(key);
  }
  std::sort(removed.paths.begin(), removed.paths.end());
  removed.version = ++schema.meta.version;
  used_bytes_ += schema.StoredBytes() - before;
  ChangedLocked(schema.meta.id);
  return removed;
}

absl::StatusOr<RenamedLeaves> MemoryStore::RenameLeaves(const DictRef& ref, const LeafPath& from,
                                                       const LeafPath& to, bool replace) {
  if (auto s = ValidatePath(from); !s.ok()) return s;
  if (auto s = ValidatePath(to); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto found = FindLocked(ref);
  if (!found.ok()) return found.status();
  Dict& dict = **found;
  DictSchema& schema = dict.schema;
  const std::string_view name = ref.name;
  if (schema.meta.locked) return LockedError(name, "rename leaves");
  auto conflict = [&](const LeafPath& with) {
    return absl::FailedPreconditionError(StrCat(
        "cannot rename ", QuotedPath(from), " to ", QuotedPath(to), ": it conflicts with ",
        QuotedPath(with), " (a path cannot be both a leaf and a sub-dict, nor move into itself)"));
  };
  if (Under(to, from) || Under(from, to)) return conflict(to);
  std::vector<std::string> moving, replaced;
  for (const auto& [key, leaf] : schema.leaves) {
    if (Under(leaf.path, from)) {
      moving.push_back(key);
    } else if (Under(leaf.path, to)) {
      if (!replace) {
        return absl::AlreadyExistsError(StrCat("cannot rename ", QuotedPath(from), " to ",
                                               QuotedPath(to), ": dict '", name, "' has leaf ",
                                               QuotedPath(leaf.path),
                                               " there (replace it, or pick another name)"));
      }
      replaced.push_back(key);
    } else if (Under(to, leaf.path)) {
      return conflict(leaf.path);
    }
  }
  if (moving.empty()) {
    return absl::NotFoundError(
        StrCat("dict '", name, "' has no leaf or sub-dict ", QuotedPath(from)));
  }
  const int64_t before = schema.StoredBytes();
  RenamedLeaves renamed;
  for (const std::string& key : replaced) {
    renamed.replaced.push_back(schema.leaves.at(key).path);
    schema.leaves.erase(key);
    dict.data.erase(key);
  }
  std::vector<std::pair<Leaf, Bytes>> moved;
  for (const std::string& key : moving) {
    moved.push_back({schema.leaves.at(key), dict.data.at(key)});
    schema.leaves.erase(key);
    dict.data.erase(key);
  }
  for (auto& [leaf, bytes] : moved) {
    LeafPath target = to;
    target.insert(target.end(), leaf.path.begin() + static_cast<std::ptrdiff_t>(from.size()),
                  leaf.path.end());
    renamed.moved.emplace_back(leaf.path, target);
    leaf.path = target;
    const std::string key = EncodePath(target);
    schema.leaves[key] = std::move(leaf);
    dict.data[key] = std::move(bytes);
  }
  renamed.version = ++schema.meta.version;
  used_bytes_ += schema.StoredBytes() - before;
  ChangedLocked(schema.meta.id);
  return renamed;
}

absl::StatusOr<std::unique_ptr<LeafWrite>> MemoryStore::OpenLeafWrite(const DictRef& ref) {
  std::lock_guard<std::mutex> lock(mu_);
  auto dict = FindLocked(ref);
  if (!dict.ok()) return dict.status();
  return std::make_unique<Write>(this, (*dict)->schema);
}

absl::StatusOr<CommitResult> MemoryStore::CopyLeaves(const DictRef& src, const LeafPath& from,
                                                     const DictRef& dst, const LeafPath& to) {
  if (!from.empty()) {
    if (auto s = ValidatePath(from); !s.ok()) return s;
  }
  if (!to.empty()) {
    if (auto s = ValidatePath(to); !s.ok()) return s;
  }
  auto opened = OpenLeafWrite(dst);
  if (!opened.ok()) return opened.status();
  auto& write = static_cast<Write&>(**opened);
  // The source's leaves and bytes as of one moment.
  std::vector<std::pair<Leaf, Bytes>> leaves;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto dict = FindLocked(src);
    if (!dict.ok()) return dict.status();
    const DictSchema& schema = (*dict)->schema;
    auto selected =
        schema.Select(from.empty() ? std::vector<LeafPath>{} : std::vector<LeafPath>{from});
    if (!selected.ok()) return selected.status();
    if (selected->empty()) {
      return absl::NotFoundError(StrCat("dict '", schema.meta.name, "' has no leaf to copy"));
    }
    for (const Leaf* leaf : *selected) {
      leaves.push_back({*leaf, (*dict)->data.at(EncodePath(leaf->path))});
    }
  }
  for (auto& [leaf, bytes] : leaves) {
    LeafPath target = to;
    target.insert(target.end(), leaf.path.begin() + static_cast<std::ptrdiff_t>(from.size()),
                  leaf.path.end());
    if (target.empty()) {
      return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(leaf.path),
                                               " needs a target path to be copied to"));
    }
    if (auto s = write.BeginLeaf(target, leaf.record, RecordBytes(leaf.record)); !s.ok()) return s;
    if (auto s = write.Adopt(std::move(bytes)); !s.ok()) return s;
  }
  return write.Commit();
}

absl::StatusOr<int64_t> MemoryStore::FillLeaves(const DictRef& ref, const std::vector<Fill>& fills,
                                                const plan::IndexSpec* index) {
  auto schema = Describe(ref);
  if (!schema.ok()) return schema.status();
  if (auto s = CheckFills(*schema, fills); !s.ok()) return s;
  const DictRef by_id{ref.name, schema->meta.id};
  if (index != nullptr) {
    std::vector<IndexedWriteValue> values;
    int64_t value_bytes = 0;
    for (const Fill& fill : fills) {
      values.push_back({fill.path, fill.dtype, {}, fill.element});
      value_bytes += static_cast<int64_t>(fill.element.size());
    }
    MemoryBudget::Lease lease = budget_.Empty();
    if (auto s = lease.Grow(IndexedWriteLease(value_bytes, true), "an indexed write"); !s.ok()) {
      return s;
    }
    auto written = WriteIndexed(by_id, *index, values, lease);
    if (!written.ok()) return written.status();
    return schema->meta.version;
  }
  // Whole leaves: new generations of the same dtype and shape, in one commit.
  Write write(this, *schema);
  for (const Fill& fill : fills) {
    const Leaf& leaf = *schema->Find(fill.path);
    const int64_t bytes = RecordBytes(leaf.record);
    if (auto s = write.BeginLeaf(leaf.path, LeafRecord{leaf.record.dtype, leaf.record.shape, 0},
                                 bytes);
        !s.ok()) {
      return s;
    }
    std::string filled;
    filled.reserve(static_cast<size_t>(bytes));
    while (static_cast<int64_t>(filled.size()) < bytes) filled += fill.element;
    if (auto s = write.Append(std::move(filled)); !s.ok()) return s;
  }
  auto result = write.Commit();
  if (!result.ok()) return result.status();
  return result->version;
}

absl::StatusOr<DictSchema> MemoryStore::Resize(const DictRef& ref, int64_t rows) {
  if (rows < 0) return absl::InvalidArgumentError(StrCat("cannot resize to ", rows, " rows"));
  std::lock_guard<std::mutex> lock(mu_);
  auto found = FindLocked(ref);
  if (!found.ok()) return found.status();
  Dict& dict = **found;
  const DictMeta& meta = dict.schema.meta;
  if (meta.batch_shape.empty()) {
    return absl::InvalidArgumentError(
        StrCat("dict '", meta.name, "' has no batch dims: there is no dim 0 to resize"));
  }
  if (meta.locked) return LockedError(meta.name, "resize it");
  const int64_t old_rows = meta.batch_shape[0];
  if (rows == old_rows) return dict.schema;
  DictSchema after = dict.schema;
  after.meta.batch_shape[0] = rows;
  if (auto s = ValidateShape(after.meta.batch_shape, "batch shape"); !s.ok()) return s;
  for (auto& [_, leaf] : after.leaves) {
    leaf.record.shape[0] = rows;
    if (auto bytes = ByteSize(leaf.record.shape, DTypeSize(leaf.record.dtype)); !bytes.ok()) {
      return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(leaf.path), " at ", rows,
                                               " rows: ", bytes.status().message()));
    }
  }
  const int64_t added = after.StoredBytes() - dict.schema.StoredBytes();
  if (added > 0) {
    if (auto s = CheckDictQuota(options_, meta, after.StoredBytes()); !s.ok()) return s;
    if (auto s = CheckNamespaceLocked(
            added, StrCat("growing dict '", meta.name, "' to ", rows, " rows"));
        !s.ok()) {
      return s;
    }
  }
  // Rows both sizes have keep their bytes (dim 0 is outermost: a prefix);
  // new rows are zeros.
  for (auto& [key, bytes] : dict.data) {
    const Leaf& leaf = after.leaves.at(key);
    const auto size = static_cast<size_t>(RecordBytes(leaf.record));
    auto resized = std::make_shared<std::string>(size, '\0');
    std::memcpy(resized->data(), bytes->data(), std::min(size, bytes->size()));
    bytes = std::move(resized);
  }
  after.meta.rows_high = std::max({after.meta.rows_high, old_rows, rows});
  after.meta.version += 1;
  dict.schema = std::move(after);
  used_bytes_ += added;
  ChangedLocked(dict.schema.meta.id);
  return dict.schema;
}

absl::Status MemoryStore::Read(const DictRef& ref, const std::vector<LeafPath>& paths,
                               LeafSink& sink) const {
  DictSchema schema;
  std::vector<const Leaf*> selected;
  std::vector<Bytes> bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto dict = FindLocked(ref);
    if (!dict.ok()) return dict.status();
    schema = (*dict)->schema;
    auto chosen = schema.Select(paths);
    if (!chosen.ok()) return chosen.status();
    selected = *std::move(chosen);
    for (const Leaf* leaf : selected) bytes.push_back((*dict)->data.at(EncodePath(leaf->path)));
  }
  // Streamed without the mutex: the bytes taken above are every leaf at one
  // generation, whatever is written meanwhile.
  if (auto s = sink.Begin(schema, selected); !s.ok()) return s;
  const auto window = static_cast<size_t>(std::max<int64_t>(1, options_.window_bytes));
  for (size_t i = 0; i < selected.size(); ++i) {
    if (auto s = sink.BeginLeaf(*selected[i]); !s.ok()) return s;
    const std::string& data = *bytes[i];
    for (size_t at = 0; at < data.size(); at += window) {
      const std::string_view part(data.data() + at, std::min(window, data.size() - at));
      if (auto s = sink.Data({part, bytes[i]}); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<IndexedReadResult> MemoryStore::ReadIndexed(
    const DictRef& ref, const plan::IndexSpec& index, const std::vector<LeafPath>& paths) const {
  DictSchema schema;
  std::map<std::string, Bytes> data;  // the bytes of that schema's leaves
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto dict = FindLocked(ref);
    if (!dict.ok()) return dict.status();
    schema = (*dict)->schema;
    data = (*dict)->data;
  }
  // The bytes were taken with this schema under the lock: its version is
  // the one the read saw, and none later can have changed what it returns.
  auto resolved = plan::ResolveIndex(index, schema.meta.batch_shape,
                                     MaxIndexCells(options_.max_indexed_bytes));
  if (!resolved.ok()) return resolved.status();
  auto leaves = schema.Select(paths);
  if (!leaves.ok()) return leaves.status();
  const auto cells = static_cast<int64_t>(resolved->cells.size());
  int64_t total = 0;
  for (const Leaf* leaf : *leaves) total += CellBytes(schema, leaf->record) * cells;
  if (auto s = CheckIndexedSize(options_.max_indexed_bytes, total); !s.ok()) return s;
  auto lease = budget_.Acquire(total + IndexMemory(*resolved), "an indexed read's selection");
  if (!lease.ok()) return lease.status();
  IndexedReadResult result;
  result.result_shape = resolved->result_shape;
  for (const Leaf* leaf : *leaves) {
    const int64_t cell = CellBytes(schema, leaf->record);
    std::string out(static_cast<size_t>(cell * cells), '\0');
    const std::string& from = *data.at(EncodePath(leaf->path));
    for (const plan::ByteRun& run : plan::PlanRuns(*resolved, cell)) {
      std::memcpy(out.data() + run.result_offset, from.data() + run.leaf_offset,
                  static_cast<size_t>(run.length));
    }
    result.leaves.push_back(
        {*leaf, IndexedShape(schema, leaf->record, resolved->result_shape), std::move(out)});
  }
  result.lease = *std::move(lease);
  result.version_after = SchemaVersionSeen{schema.meta.id, schema.meta.version};
  return result;
}

absl::StatusOr<IndexedWriteResult> MemoryStore::WriteIndexed(
    const DictRef& ref, const plan::IndexSpec& index,
    const std::vector<IndexedWriteValue>& values, MemoryBudget::Lease& lease) {
  if (values.empty()) return absl::InvalidArgumentError("an indexed write needs a value");
  for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
    // Planned (and the budget waited for) without the mutex, against the
    // schema as read; applied under it only if the schema is still that.
    auto given = Describe(ref);
    if (!given.ok()) return given.status();
    auto resolved = plan::ResolveIndex(index, given->meta.batch_shape,
                                       MaxIndexCells(options_.max_indexed_bytes));
    if (!resolved.ok()) return resolved.status();
    auto planned = PlanValues(*given, *resolved, values, options_.max_indexed_bytes,
                              kWriteCopies, lease);
    if (!planned.ok()) return planned.status();

    std::lock_guard<std::mutex> lock(mu_);
    auto found = FindLocked(ref);
    if (!found.ok()) return found.status();
    Dict& dict = **found;
    if (dict.schema.meta.id != given->meta.id ||
        dict.schema.meta.version != given->meta.version) {
      continue;  // changed since planned: plan again
    }
    std::vector<ZeroLeaf> missing;
    for (const PlannedValue& p : *planned) {
      if (p.create) missing.push_back(*p.create);
    }
    if (!missing.empty()) {
      if (auto made = CreateZeroLeavesLocked(dict, missing); !made.ok()) return made.status();
    }
    IndexedWriteResult result;
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string key = EncodePath(values[i].path);
      const Leaf& leaf = dict.schema.leaves.at(key);
      Bytes& bytes = dict.data.at(key);
      // A reader (or a copy) may hold these bytes: it keeps them, we write
      // a copy. Counted under the mutex, so no holder can appear meanwhile.
      if (bytes.use_count() > 1) bytes = std::make_shared<std::string>(*bytes);
      const std::string_view value = (*planned)[i].bytes();
      // Runs in result order: where a cell is selected twice, the last wins.
      for (const plan::ByteRun& run : plan::PlanRuns(*resolved, CellBytes(dict.schema, leaf.record))) {
        std::memcpy(bytes->data() + run.leaf_offset, value.data() + run.result_offset,
                    static_cast<size_t>(run.length));
      }
      result.written.push_back(leaf);
    }
    result.version = dict.schema.meta.version;
    result.version_after = SchemaVersionSeen{dict.schema.meta.id, dict.schema.meta.version};
    return result;
  }
  return absl::AbortedError(
      StrCat("dict '", ref.name, "' kept changing during the indexed write; retry"));
}

absl::StatusOr<RingAppendResult> MemoryStore::AppendToRing(
    const DictRef& ref, const RingAppend& ring, const std::vector<IndexedWriteValue>& values,
    MemoryBudget::Lease& lease) {
  if (!ring.count.empty()) {
    if (auto s = CheckStateName("counter", ring.count); !s.ok()) return s;
  }
  if (values.empty()) return absl::InvalidArgumentError("a ring append needs a value");
  if (auto s = CheckStateName("counter", ring.cursor); !s.ok()) return s;
  // The reservation, atomic with reading the ring's size (reserve_ring.lua).
  int64_t size = 0;
  RingAppendResult result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = FindLocked(ref);
    if (!found.ok()) return found.status();
    Dict& dict = **found;
    const Shape& batch = dict.schema.meta.batch_shape;
    size = batch.empty() ? 0 : batch[0];
    if (size == 0 || ring.rows < 1 || ring.rows > size) {
      return RingSizeError(ref.name, size, ring.rows);
    }
    auto reserved = CounterLocked(dict, ref, {CounterOp::Kind::kAdd, ring.cursor, ring.rows});
    if (!reserved.ok()) return reserved.status();
    result.start = reserved->value - ring.rows;
  }
  const int64_t end = result.start + ring.rows;
  auto written = WriteIndexed(ref, RingRows(result.start, ring.rows, size), values, lease);
  if (!written.ok()) {
    // The rows go back if no one reserved after them.
    (void)Counter(ref, {CounterOp::Kind::kCas, ring.cursor, 0, end, result.start});
    return written.status();
  }
  result.written = std::move(written->written);
  result.version = written->version;
  if (!ring.count.empty()) {
    auto counted = Counter(ref, {CounterOp::Kind::kAdd, ring.count, ring.rows});
    if (!counted.ok()) {
      return absl::Status(counted.status().code(),
                          StrCat("rows ", result.start, "..", end - 1,
                                 " of the ring were written, but not counted: ",
                                 counted.status().message()));
    }
    result.count_value = counted->value;
  }
  return result;
}

absl::StatusOr<DictSchema> MemoryStore::SetLocked(const DictRef& ref, bool locked) {
  std::lock_guard<std::mutex> lock(mu_);
  auto dict = FindLocked(ref);
  if (!dict.ok()) return dict.status();
  DictMeta& meta = (*dict)->schema.meta;
  if (meta.locked != locked) {
    meta.locked = locked;
    meta.version += 1;
    ChangedLocked(meta.id);
  }
  return (*dict)->schema;
}

absl::StatusOr<DictSchema> MemoryStore::UpdateAttrs(const DictRef& ref, const AttrsUpdate& update) {
  if (auto s = CheckAttrsUpdate(update); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto dict = FindLocked(ref);
  if (!dict.ok()) return dict.status();
  DictSchema& schema = (*dict)->schema;
  std::map<std::string, std::string> attrs = schema.attrs;
  for (const std::string& name : update.remove) attrs.erase(name);
  for (const auto& [name, value] : update.set) attrs[name] = value;
  if (attrs.size() > static_cast<size_t>(kMaxAttrs)) {
    return TooManyAttrs(ref.name, static_cast<int64_t>(attrs.size()));
  }
  schema.attrs = std::move(attrs);
  schema.meta.version += 1;
  ChangedLocked(schema.meta.id);
  return schema;
}

absl::StatusOr<CounterResult> MemoryStore::CounterLocked(Dict& dict, const DictRef& ref,
                                                         const CounterOp& op) {
  auto it = dict.counters.find(op.name);
  const int64_t current = it == dict.counters.end() ? 0 : it->second;
  // A counter that does not exist yet may be created only below the limit.
  auto room = [&]() -> absl::Status {
    if (it != dict.counters.end() || dict.counters.size() < static_cast<size_t>(kMaxCounters)) {
      return absl::OkStatus();
    }
    return TooManyCounters(ref.name, static_cast<int64_t>(dict.counters.size()), op.name);
  };
  switch (op.kind) {
    case CounterOp::Kind::kGet:
      return CounterResult{current, false};
    case CounterOp::Kind::kAdd: {
      if (auto s = room(); !s.ok()) return s;
      int64_t sum = 0;
      if (__builtin_add_overflow(current, op.delta, &sum)) return CounterOverflow(op.name, op.delta);
      dict.counters[op.name] = sum;
      return CounterResult{sum, false};
    }
    case CounterOp::Kind::kCas:
      if (current != op.expected) return CounterResult{current, false};
      if (auto s = room(); !s.ok()) return s;
      dict.counters[op.name] = op.new_value;
      return CounterResult{op.new_value, true};
  }
  return absl::InvalidArgumentError("no counter operation");
}

absl::StatusOr<CounterResult> MemoryStore::Counter(const DictRef& ref, const CounterOp& op) {
  if (auto s = CheckStateName("counter", op.name); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto dict = FindLocked(ref);
  if (!dict.ok()) return dict.status();
  auto result = CounterLocked(**dict, ref, op);
  if (result.ok()) {
    result->version_after = SchemaVersionSeen{(*dict)->schema.meta.id, (*dict)->schema.meta.version};
  }
  return result;
}

// --- Watch -----------------------------------------------------------------

absl::StatusOr<uint64_t> MemoryStore::Watch(const DictRef& ref, SchemaListener listener) {
  if (ref.id.empty()) return absl::InvalidArgumentError("a schema watch needs the dict's id");
  if (auto s = ValidateDictName(ref.name); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return absl::UnavailableError("tdstored is shutting down");
  if (watchers_.size() >= kMaxWatchers) {
    return absl::ResourceExhaustedError("this tdstored watches its limit of schemas");
  }
  const uint64_t token = next_token_++;
  watchers_.emplace(token, Watcher{std::string(ref.name), std::string(ref.id),
                                   std::make_shared<const SchemaListener>(std::move(listener))});
  // Told the schema at once (or NOT_FOUND, if the ref names no dict now).
  due_.insert(std::string(ref.id));
  due_changed_.notify_all();
  return token;
}

void MemoryStore::Unwatch(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  watchers_.erase(token);
}

void MemoryStore::Notify() {
  for (;;) {
    std::set<std::string> due;
    {
      std::unique_lock<std::mutex> lock(mu_);
      due_changed_.wait(lock, [&] { return stopped_ || !due_.empty(); });
      if (stopped_) return;
      due.swap(due_);
    }
    for (const std::string& id : due) {
      // The watchers of this id by the name they opened it under: what a
      // name means decides what each is told.
      std::map<std::string, std::vector<std::pair<uint64_t, std::shared_ptr<const SchemaListener>>>>
          by_name;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [token, w] : watchers_) {
          if (w.id == id) by_name[w.name].emplace_back(token, w.listener);
        }
      }
      for (const auto& [name, listeners] : by_name) {
        const absl::StatusOr<DictSchema> schema = Describe({name, id});
        for (const auto& [token, listener] : listeners) {
          {
            // Unwatched (or stopped) meanwhile: not told any more.
            std::lock_guard<std::mutex> lock(mu_);
            if (watchers_.count(token) == 0) continue;
          }
          (*listener)(schema);
          if (!schema.ok()) Unwatch(token);
        }
      }
    }
  }
}

}  // namespace tdstore::store
