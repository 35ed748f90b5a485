// Soak test (issue #6): several clients, each with its own tdstore::Client,
// run a bounded mixed load on one dict of the shared daemon for a fixed time
// — indexed row writes and reads, whole-leaf writes and reads, multi-leaf
// updates — and every row that comes back is verified. At the end one full
// read is compared with the test's ledger of acknowledged writes: nothing
// acknowledged may be lost, nothing may come back corrupt.
//
// How the rows are verified:
//   - Every row written describes itself (soak_rows.h): a reader checks that
//     it is whole (checksum, filler), in its place (its row number) and of
//     its leaf.
//   - Every row has exactly one writer, so the test knows each row's history:
//     the shared leaves s/* are split by row (row r belongs to client
//     r % clients) and are only written by indexed writes of all four s/*
//     leaves at once; the private leaves w<k>/* belong to client k, which
//     replaces them whole (set), replaces both at once (update) and writes
//     rows of them (set_index). Every client reads everything.
//   - The ledger holds, per leaf and row, the sequence number of the last
//     acknowledged write. A read must return for each row a sequence number
//     no older than the ledger held when the read began (older: an
//     acknowledged write was lost, if only for a while — a "stale" row) and
//     no newer than its writer had issued when the read ended.
//   - An indexed read returns the rows of all leaves in one block atomically,
//     so the four s/* leaves must carry the same sequence number in each row
//     it returns (else the row is "torn", counted as corrupt).
//   - After the load, one full read must return exactly the ledger's value
//     of every row. For a row whose last write failed, that write's value is
//     accepted too (whether it landed is unknown); the failure itself is
//     reported and fails the test anyway.
//
// What may fail: only reads that include a private leaf, which its owner
// replaces whole now and then. A whole-leaf read of a leaf being replaced
// ends with ABORTED (docs/protocol.md), and so does an indexed read that
// finds a replaced block twice (the daemon retries once); the client library
// retries every read 3 times on ABORTED, so ABORTED reaches the test only if
// the leaf was replaced under 4 attempts in a row. Nothing else may fail:
// reads of s/* never race a replace, and no write races a replace of its
// leaf (one owner each).
//
// TDSTORE_SOAK_SECONDS (default 8) and TDSTORE_SOAK_CLIENTS (default 4, at
// most 64) make a longer or heavier run; the figures are printed and
// recorded as test properties (--gtest_output=xml:FILE keeps them).
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/soak_rows.h"

namespace tdstore::testing {
namespace {

using Clock = std::chrono::steady_clock;

// ---- The dict -------------------------------------------------------------------

constexpr int64_t kRows = 4000;        // batch shape [4000]
constexpr int64_t kRowsPerBlock = 64;  // 63 blocks, the last of 32 rows
// A whole-leaf read moves one GETRANGE per part, and an indexed write
// patches a block atomically, so a row inside one part always comes back
// whole; a row straddling two parts could legitimately come back half old,
// half new during indexed writes (docs/storage-layout.md, "What is atomic").
// 1440 is a multiple of every row size below, and still cuts most blocks
// into 2 or 3 parts.
constexpr int64_t kPartBytes = 1440;
constexpr int kShared = -1;
constexpr size_t kSharedLeaves = 4;  // leaves 0..3; then two per client

struct LeafDef {
  Key path;
  at::ScalarType dtype;
  std::vector<int64_t> element_shape;
  int owner;  // kShared (rows split among clients), or the owning client
  int64_t row_bytes = 0;
};

std::vector<LeafDef> MakeLeaves(int clients) {
  std::vector<LeafDef> leaves = {
      {Key{"s", "f32"}, at::kFloat, {8}, kShared},
      {Key{"s", "i64"}, at::kLong, {3, 2}, kShared},
      {Key{"s", "u8"}, at::kByte, {20}, kShared},
      {Key{"s", "deep", "bf16"}, at::kBFloat16, {2, 9}, kShared},
  };
  for (int k = 0; k < clients; ++k) {
    const std::string w = "w" + std::to_string(k);
    leaves.push_back({Key{w, "f64"}, at::kDouble, {5}, k});
    leaves.push_back({Key{w, "i16"}, at::kShort, {2, 6}, k});
  }
  for (LeafDef& leaf : leaves) {
    leaf.row_bytes = static_cast<int64_t>(c10::elementSize(leaf.dtype));
    for (int64_t d : leaf.element_shape) leaf.row_bytes *= d;
  }
  return leaves;
}

// The private leaves of client k: indices 4 + 2k and 5 + 2k.
size_t PrivateLeaf(int client, int which) { return kSharedLeaves + 2 * client + which; }

// ---- The ledger: what each row must hold ----------------------------------------

class Ledger {
 public:
  Ledger(size_t leaves, int clients) : acked_(leaves), failed_(leaves), issued_(clients) {
    for (auto& rows : acked_) rows = std::make_unique<std::atomic<uint32_t>[]>(kRows);
    for (auto& rows : failed_) rows.resize(kRows);
  }

  // The next sequence number of `client`'s writes (1, 2, ...). Called before
  // the write is sent, so a reader can bound what it may see.
  uint32_t Issue(int client) { return ++issued_[client]; }
  uint32_t Issued(int client) const { return issued_[client].load(); }

  // Sequence number of the last acknowledged write of the row (0: none).
  uint32_t Acked(size_t leaf, int64_t row) const { return acked_[leaf][row].load(); }
  // The row's owner only: write `seq` of these rows returned OK / failed.
  void Ack(size_t leaf, const std::vector<int64_t>& rows, uint32_t seq) {
    for (int64_t r : rows) {
      acked_[leaf][r].store(seq);
      failed_[leaf][r].clear();
    }
  }
  void Fail(size_t leaf, const std::vector<int64_t>& rows, uint32_t seq) {
    for (int64_t r : rows) failed_[leaf][r].push_back(seq);
  }
  // After the load: did a write that failed since the last ack carry `seq`?
  bool FailedSinceAck(size_t leaf, int64_t row, uint32_t seq) const {
    const std::vector<uint32_t>& f = failed_[leaf][row];
    return std::find(f.begin(), f.end(), seq) != f.end();
  }

 private:
  std::vector<std::unique_ptr<std::atomic<uint32_t>[]>> acked_;
  std::vector<std::vector<std::vector<uint32_t>>> failed_;  // owner thread only during the load
  std::vector<std::atomic<uint32_t>> issued_;
};

// Everything the clients share: read-only except the ledger (thread-safe).
struct Soak {
  std::string dict;
  int clients = 0;
  std::vector<LeafDef> leaves;
  Ledger* ledger = nullptr;
  std::vector<int64_t> all_rows;  // 0 .. kRows-1

  int Owner(size_t leaf, int64_t row) const {
    const int owner = leaves[leaf].owner;
    return owner == kShared ? static_cast<int>(row % clients) : owner;
  }
};

// ---- Figures -------------------------------------------------------------------

struct Stats {
  std::map<std::string, int64_t> calls;   // by kind ("read.index", ...)
  std::map<std::string, int64_t> errors;  // by "<kind>.<CODE>"
  int64_t unexpected_errors = 0;          // any error but ABORTED on a read of a private leaf
  int64_t bytes_written = 0;              // of acknowledged writes
  int64_t bytes_read = 0;
  int64_t rows_verified = 0;
  int64_t rows_corrupt = 0;  // not whole, misplaced, torn across leaves, newer than issued
  int64_t rows_stale = 0;    // older than acknowledged when the read began
  std::vector<std::string> problems;  // the first few, for the failure message

  void Problem(const std::string& what) {
    if (problems.size() < 12) problems.push_back(what);
  }
  void Merge(const Stats& o) {
    for (const auto& [k, n] : o.calls) calls[k] += n;
    for (const auto& [k, n] : o.errors) errors[k] += n;
    unexpected_errors += o.unexpected_errors;
    bytes_written += o.bytes_written;
    bytes_read += o.bytes_read;
    rows_verified += o.rows_verified;
    rows_corrupt += o.rows_corrupt;
    rows_stale += o.rows_stale;
    for (const std::string& p : o.problems) Problem(p);
  }
};

// Runs one call and counts it under `kind`. A tdstore::Error is counted by
// code; it is expected only as ABORTED of a read that includes a private
// leaf (`may_abort`). Returns whether the call succeeded.
bool Attempt(Stats* stats, const std::string& kind, bool may_abort,
             const std::function<void()>& call) {
  ++stats->calls[kind];
  try {
    call();
    return true;
  } catch (const Error& e) {
    ++stats->errors[kind + "." + StatusCodeName(e.code())];
    if (!(may_abort && e.code() == StatusCode::kAborted)) {
      ++stats->unexpected_errors;
      stats->Problem(kind + ": " + e.what());
    }
  } catch (const std::exception& e) {
    ++stats->errors[kind + ".EXCEPTION"];
    ++stats->unexpected_errors;
    stats->Problem(kind + ": " + e.what());
  }
  return false;
}

// ---- Verifying what a read returned -----------------------------------------------

constexpr uint32_t kBadRow = UINT32_MAX;  // in the seqs CheckRows returns

// Checks `value`, the rows `rows` of leaf `leaf` in that order, against
// `at_least` (the ledger's acks for those rows when the read began) and the
// writers' issued counts now. Returns each row's sequence number (kBadRow
// where the row is corrupt).
std::vector<uint32_t> CheckRows(const Soak& soak, size_t leaf, const at::Tensor& value,
                                const std::vector<int64_t>& rows,
                                const std::vector<uint32_t>& at_least, Stats* stats) {
  const LeafDef& def = soak.leaves[leaf];
  std::vector<uint32_t> seqs(rows.size(), kBadRow);
  const at::Tensor t = value.contiguous();
  if (t.scalar_type() != def.dtype ||
      static_cast<int64_t>(t.nbytes()) != static_cast<int64_t>(rows.size()) * def.row_bytes) {
    stats->rows_corrupt += static_cast<int64_t>(rows.size());
    stats->Problem(def.path.str() + ": wrong dtype or size " + std::to_string(t.nbytes()));
    return seqs;
  }
  const char* data = static_cast<const char*>(t.data_ptr());
  for (size_t i = 0; i < rows.size(); ++i) {
    ++stats->rows_verified;
    const int64_t row = rows[i];
    const int owner = soak.Owner(leaf, row);
    RowStamp stamp;
    std::string why;
    const RowState state = DecodeRow(data + i * def.row_bytes, def.row_bytes, &stamp, &why);
    const std::string where = def.path.str() + " row " + std::to_string(row) + ": ";
    if (state == RowState::kCorrupt) {
      ++stats->rows_corrupt;
      stats->Problem(where + why);
    } else if (state == RowState::kWhole &&
               (stamp.row != row || stamp.leaf != static_cast<uint16_t>(leaf) ||
                stamp.writer != static_cast<uint16_t>(owner))) {
      ++stats->rows_corrupt;
      stats->Problem(where + "holds row " + std::to_string(stamp.row) + " of leaf " +
                     std::to_string(stamp.leaf) + " by client " + std::to_string(stamp.writer));
    } else if (stamp.seq > soak.ledger->Issued(owner)) {
      ++stats->rows_corrupt;
      stats->Problem(where + "seq " + std::to_string(stamp.seq) + " was never issued");
    } else if (stamp.seq < at_least[i]) {
      ++stats->rows_stale;
      seqs[i] = stamp.seq;
      stats->Problem(where + "seq " + std::to_string(stamp.seq) + " but " +
                     std::to_string(at_least[i]) + " was acknowledged before the read");
    } else {
      seqs[i] = stamp.seq;
    }
  }
  return seqs;
}

// The ledger's acks for `rows` of every leaf in `leaves`, now.
std::vector<std::vector<uint32_t>> AckedNow(const Soak& soak, const std::vector<size_t>& leaves,
                                            const std::vector<int64_t>& rows) {
  std::vector<std::vector<uint32_t>> acked;
  for (size_t leaf : leaves) {
    std::vector<uint32_t>& a = acked.emplace_back(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) a[i] = soak.ledger->Acked(leaf, rows[i]);
  }
  return acked;
}

// Checks a read of `leaves` at `rows` (`keeps_dim`: the batch dim is kept; a
// single-int index removes it). `indexed`: the read was td.index(...), whose
// rows of one block are atomic across leaves.
void CheckRead(const Soak& soak, const LocalDict& got, const std::vector<size_t>& leaves,
               const std::vector<int64_t>& rows, bool keeps_dim,
               const std::vector<std::vector<uint32_t>>& at_least, bool indexed, Stats* stats) {
  if (got.leaves.size() != leaves.size()) {
    stats->rows_corrupt += static_cast<int64_t>(rows.size() * leaves.size());
    stats->Problem("a read returned " + std::to_string(got.leaves.size()) + " leaves, expected " +
                   std::to_string(leaves.size()));
    return;
  }
  std::map<size_t, std::vector<uint32_t>> seqs;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const LeafDef& def = soak.leaves[leaves[i]];
    auto it = got.leaves.find(def.path);
    std::vector<int64_t> shape = def.element_shape;
    if (keeps_dim) shape.insert(shape.begin(), static_cast<int64_t>(rows.size()));
    if (it == got.leaves.end() || it->second.sizes().vec() != shape) {
      stats->rows_corrupt += static_cast<int64_t>(rows.size());
      stats->Problem(def.path.str() + ": missing or of the wrong shape");
      continue;
    }
    stats->bytes_read += static_cast<int64_t>(it->second.nbytes());
    seqs[leaves[i]] = CheckRows(soak, leaves[i], it->second, rows, at_least[i], stats);
  }
  if (!indexed) return;
  for (size_t leaf = 1; leaf < kSharedLeaves; ++leaf) {
    if (!seqs.count(0) || !seqs.count(leaf)) return;
  }
  // One torn row counts once, however many leaves disagree.
  for (size_t i = 0; i < rows.size(); ++i) {
    const uint32_t a = seqs[0][i];
    for (size_t leaf = 1; leaf < kSharedLeaves; ++leaf) {
      const uint32_t b = seqs[leaf][i];
      if (a != kBadRow && b != kBadRow && a != b) {
        ++stats->rows_corrupt;
        stats->Problem("row " + std::to_string(rows[i]) + " torn across s/* leaves: seq " +
                       std::to_string(a) + " vs " + std::to_string(b));
        break;
      }
    }
  }
}

// ---- Indices --------------------------------------------------------------------

// An index and the rows of batch dim 0 it selects, in result order.
struct Selection {
  Index index{Ellipsis{}};
  std::vector<int64_t> rows;
  bool keeps_dim = true;  // false for a single int: the batch dim is gone
};

at::Tensor Positions(const std::vector<int64_t>& rows) {
  return at::tensor(at::ArrayRef<int64_t>(rows), at::TensorOptions().dtype(at::kLong));
}

int64_t Below(std::mt19937_64& rng, int64_t n) { return static_cast<int64_t>(rng() % n); }

// Distinct rows among first, first + stride, ... (< kRows), in every form an
// index can take: positions in random order, a strided slice, a mask, one
// int (positive or negative). For writes: no row twice.
Selection DistinctRows(std::mt19937_64& rng, int64_t first, int64_t stride) {
  const int64_t candidates = (kRows - first + stride - 1) / stride;
  Selection s;
  switch (Below(rng, 4)) {
    case 0: {
      std::set<int64_t> seen;
      const int64_t k = 1 + Below(rng, std::min<int64_t>(48, candidates));
      while (static_cast<int64_t>(seen.size()) < k) {
        const int64_t row = first + stride * Below(rng, candidates);
        if (seen.insert(row).second) s.rows.push_back(row);
      }
      s.index = Index(Positions(s.rows));
      break;
    }
    case 1: {
      const int64_t start = first + stride * Below(rng, candidates);
      const int64_t stop = start + stride * (1 + Below(rng, 48));  // may run past the end
      for (int64_t r = start; r < std::min(stop, kRows); r += stride) s.rows.push_back(r);
      s.index = Index(Slice(start, stop, stride));
      break;
    }
    case 2: {
      at::Tensor mask = at::zeros({kRows}, at::TensorOptions().dtype(at::kBool));
      bool* m = mask.data_ptr<bool>();
      for (int64_t r = first; r < kRows; r += stride) {
        if (Below(rng, 24) == 0) m[r] = true;
      }
      m[first + stride * Below(rng, candidates)] = true;  // at least one
      for (int64_t r = 0; r < kRows; ++r) {
        if (m[r]) s.rows.push_back(r);
      }
      s.index = Index(mask);
      break;
    }
    default: {
      const int64_t row = first + stride * Below(rng, candidates);
      s.rows = {row};
      s.index = Index(Below(rng, 2) == 0 ? row : row - kRows);
      s.keeps_dim = false;
      break;
    }
  }
  return s;
}

// Any rows, for reads: repeated positions, slices from either end, masks,
// ints, everything.
Selection AnyRows(std::mt19937_64& rng) {
  Selection s;
  switch (Below(rng, 6)) {
    case 0: {  // positions, duplicates allowed
      const int64_t k = 1 + Below(rng, 256);
      for (int64_t i = 0; i < k; ++i) s.rows.push_back(Below(rng, kRows));
      s.index = Index(Positions(s.rows));
      break;
    }
    case 1: {  // a slice with a step
      const int64_t steps[] = {1, 2, 3, 7, 64};
      const int64_t step = steps[Below(rng, 5)];
      const int64_t start = Below(rng, kRows);
      const int64_t stop = start + 1 + Below(rng, 400);
      for (int64_t r = start; r < std::min(stop, kRows); r += step) s.rows.push_back(r);
      s.index = Index(Slice(start, stop, step));
      break;
    }
    case 2: {  // the last rows, by a negative start
      const int64_t k = 1 + Below(rng, 150);
      for (int64_t r = kRows - k; r < kRows; ++r) s.rows.push_back(r);
      s.index = Index(Slice(-k, std::nullopt));
      break;
    }
    case 3:  // every row, now and then
      if (Below(rng, 4) == 0) {
        s.rows.resize(kRows);
        for (int64_t r = 0; r < kRows; ++r) s.rows[r] = r;
        s.index = Index(Ellipsis{});
        break;
      }
      [[fallthrough]];
    default:  // a mask, one int
      s = DistinctRows(rng, 0, 1);
      break;
  }
  return s;
}

// The value to write at `rows` of `leaf`: every row stamped (writer, seq).
at::Tensor EncodeValue(const Soak& soak, size_t leaf, const std::vector<int64_t>& rows,
                       bool keeps_dim, int writer, uint32_t seq) {
  const LeafDef& def = soak.leaves[leaf];
  std::vector<int64_t> shape = def.element_shape;
  if (keeps_dim) shape.insert(shape.begin(), static_cast<int64_t>(rows.size()));
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(def.dtype));
  char* out = static_cast<char*>(t.data_ptr());
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowStamp stamp{static_cast<uint32_t>(rows[i]), static_cast<uint16_t>(writer),
                         static_cast<uint16_t>(leaf), seq};
    EncodeRow(stamp, out + i * def.row_bytes, static_cast<size_t>(def.row_bytes));
  }
  return t;
}

// ---- One client -------------------------------------------------------------------

class SoakClient {
 public:
  SoakClient(const Soak& soak, int me, const std::string& address)
      : soak_(soak), me_(me), rng_(0x50a4'0000u + me), client_(address) {}

  Stats Run(Clock::time_point deadline) {
    Dict td = client_.open(soak_.dict);
    // Weights: rows of s/*, rows of a private leaf, replace a private leaf,
    // update both, indexed read, whole-leaf read, get_many, to_local.
    std::discrete_distribution<int> pick({24, 10, 8, 5, 22, 16, 10, 5});
    while (Clock::now() < deadline) {
      switch (pick(rng_)) {
        case 0: WriteSharedRows(td); break;
        case 1: WritePrivateRows(td); break;
        case 2: ReplaceLeaf(td); break;
        case 3: UpdateLeaves(td); break;
        case 4: ReadIndexed(td); break;
        case 5: ReadLeaf(td); break;
        case 6: ReadMany(td); break;
        default: ReadDict(td); break;
      }
    }
    return stats_;
  }

 private:
  // Writes `values` (leaf -> value) at `sel` (whole leaves when `whole`) as
  // one call, and records the outcome in the ledger.
  void Write(const std::string& kind, const Selection& sel, const std::vector<size_t>& leaves,
             bool whole, Dict& td) {
    const uint32_t seq = soak_.ledger->Issue(me_);
    std::map<Key, at::Tensor> values;
    int64_t bytes = 0;
    for (size_t leaf : leaves) {
      at::Tensor v = EncodeValue(soak_, leaf, sel.rows, sel.keeps_dim, me_, seq);
      bytes += static_cast<int64_t>(v.nbytes());
      values.emplace(soak_.leaves[leaf].path, std::move(v));
    }
    const bool ok = Attempt(&stats_, kind, false, [&] {
      if (!whole) {
        td.set_index(sel.index, values);
      } else if (values.size() == 1) {
        td.set(values.begin()->first, values.begin()->second);
      } else {
        td.update(values);
      }
    });
    for (size_t leaf : leaves) {
      if (ok) {
        soak_.ledger->Ack(leaf, sel.rows, seq);
      } else {
        soak_.ledger->Fail(leaf, sel.rows, seq);
      }
    }
    if (ok) stats_.bytes_written += bytes;
  }

  Selection Whole() const {
    Selection s;
    s.rows = soak_.all_rows;
    return s;
  }

  void WriteSharedRows(Dict& td) {
    Write("write.rows.shared", DistinctRows(rng_, me_, soak_.clients), {0, 1, 2, 3}, false, td);
  }
  void WritePrivateRows(Dict& td) {
    Write("write.rows.private", DistinctRows(rng_, 0, 1), {PrivateLeaf(me_, Below(rng_, 2))},
          false, td);
  }
  void ReplaceLeaf(Dict& td) {
    Write("write.leaf", Whole(), {PrivateLeaf(me_, Below(rng_, 2))}, true, td);
  }
  void UpdateLeaves(Dict& td) {
    Write("write.update", Whole(), {PrivateLeaf(me_, 0), PrivateLeaf(me_, 1)}, true, td);
  }

  // Reads `leaves` (by `call`) at `sel`, and checks what came back.
  void Read(const std::string& kind, const Selection& sel, const std::vector<size_t>& leaves,
            bool indexed, const std::function<LocalDict()>& call) {
    bool may_abort = false;
    for (size_t leaf : leaves) may_abort |= soak_.leaves[leaf].owner != kShared;
    const auto at_least = AckedNow(soak_, leaves, sel.rows);
    LocalDict got;
    if (!Attempt(&stats_, kind, may_abort, [&] { got = call(); })) return;
    CheckRead(soak_, got, leaves, sel.rows, sel.keeps_dim, at_least, indexed, &stats_);
  }

  // Some leaves and the paths that name them: everything, s/*, one client's
  // w<k>/*, or one leaf.
  std::pair<std::vector<Key>, std::vector<size_t>> SomeLeaves() {
    std::vector<size_t> leaves;
    switch (Below(rng_, 4)) {
      case 0:
        for (size_t i = 0; i < soak_.leaves.size(); ++i) leaves.push_back(i);
        return {{}, leaves};
      case 1:
        return {{Key("s")}, {0, 1, 2, 3}};
      case 2: {
        const int k = static_cast<int>(Below(rng_, soak_.clients));
        return {{Key("w" + std::to_string(k))}, {PrivateLeaf(k, 0), PrivateLeaf(k, 1)}};
      }
      default: {
        const size_t leaf = static_cast<size_t>(Below(rng_, soak_.leaves.size()));
        return {{soak_.leaves[leaf].path}, {leaf}};
      }
    }
  }

  void ReadIndexed(Dict& td) {
    const Selection sel = AnyRows(rng_);
    const std::pair<std::vector<Key>, std::vector<size_t>> some = SomeLeaves();
    Read("read.index", sel, some.second, true, [&] { return td.index(sel.index, some.first); });
  }
  void ReadLeaf(Dict& td) {
    const size_t leaf = static_cast<size_t>(Below(rng_, soak_.leaves.size()));
    Read("read.leaf", Whole(), {leaf}, false, [&] {
      LocalDict got;
      got.leaves.emplace(soak_.leaves[leaf].path, td.get(soak_.leaves[leaf].path));
      return got;
    });
  }
  void ReadMany(Dict& td) {
    // get_many with no paths reads nothing: ask for s and one w<k> instead.
    std::vector<Key> paths = SomeLeaves().first;
    if (paths.empty()) paths = {Key("s"), Key("w" + std::to_string(Below(rng_, soak_.clients)))};
    std::vector<size_t> leaves;
    for (size_t i = 0; i < soak_.leaves.size(); ++i) {
      const std::vector<std::string>& parts = soak_.leaves[i].path.parts();
      for (const Key& p : paths) {
        if (p.parts().size() <= parts.size() &&
            std::equal(p.parts().begin(), p.parts().end(), parts.begin())) {
          leaves.push_back(i);
        }
      }
    }
    Read("read.many", Whole(), leaves, false, [&] { return td.get_many(paths); });
  }
  void ReadDict(Dict& td) {
    std::vector<size_t> leaves;
    for (size_t i = 0; i < soak_.leaves.size(); ++i) leaves.push_back(i);
    Read("read.dict", Whole(), leaves, false, [&] { return td.to_local(); });
  }

  const Soak& soak_;
  const int me_;
  std::mt19937_64 rng_;
  Client client_;
  Stats stats_;
};

// ---- After the load ---------------------------------------------------------------

struct FinalTally {
  int64_t rows = 0;
  int64_t lost_rows = 0;   // older than the last acknowledged write
  int64_t lost_bytes = 0;
  int64_t corrupt = 0;     // not whole, misplaced, or a value nobody wrote last
  int64_t uncertain = 0;   // hold the value of a write that failed (accepted)
};

// Every row of `all` (one full read) against the ledger.
FinalTally CheckFinal(const Soak& soak, const LocalDict& all, Stats* problems) {
  FinalTally tally;
  for (size_t leaf = 0; leaf < soak.leaves.size(); ++leaf) {
    const LeafDef& def = soak.leaves[leaf];
    auto it = all.leaves.find(def.path);
    if (it == all.leaves.end() || it->second.size(0) != kRows) {
      tally.lost_rows += kRows;
      tally.lost_bytes += kRows * def.row_bytes;
      problems->Problem(def.path.str() + ": missing from the final read");
      continue;
    }
    const at::Tensor t = it->second.contiguous();
    const char* data = static_cast<const char*>(t.data_ptr());
    for (int64_t row = 0; row < kRows; ++row) {
      ++tally.rows;
      RowStamp stamp;
      std::string why;
      const RowState state = DecodeRow(data + row * def.row_bytes, def.row_bytes, &stamp, &why);
      const uint32_t acked = soak.ledger->Acked(leaf, row);
      const std::string where = def.path.str() + " row " + std::to_string(row) + ": ";
      if (state == RowState::kCorrupt) {
        ++tally.corrupt;
        problems->Problem(where + why);
      } else if (state == RowState::kWhole &&
                 (stamp.row != row || stamp.leaf != static_cast<uint16_t>(leaf) ||
                  stamp.writer != static_cast<uint16_t>(soak.Owner(leaf, row)))) {
        ++tally.corrupt;
        problems->Problem(where + "holds another row");
      } else if (stamp.seq == acked) {
        // as acknowledged
      } else if (soak.ledger->FailedSinceAck(leaf, row, stamp.seq)) {
        ++tally.uncertain;
      } else if (stamp.seq < acked) {
        ++tally.lost_rows;
        tally.lost_bytes += def.row_bytes;
        problems->Problem(where + "seq " + std::to_string(stamp.seq) + ", last acknowledged " +
                          std::to_string(acked));
      } else {
        ++tally.corrupt;
        problems->Problem(where + "seq " + std::to_string(stamp.seq) +
                          " from no acknowledged or failed write");
      }
    }
  }
  return tally;
}

// Data keys a dict of `leaves` must have: one per part of every block.
size_t ExpectedDataKeys(const std::vector<LeafDef>& leaves) {
  size_t keys = 0;
  for (const LeafDef& leaf : leaves) {
    for (int64_t first = 0; first < kRows; first += kRowsPerBlock) {
      const int64_t bytes = std::min(kRowsPerBlock, kRows - first) * leaf.row_bytes;
      keys += static_cast<size_t>((bytes + kPartBytes - 1) / kPartBytes);
    }
  }
  return keys;
}

int EnvInt(const char* name, int fallback, int lo, int hi) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < lo || value > hi) {
    ADD_FAILURE() << name << "=" << text << ": expected an integer in [" << lo << ", " << hi
                  << "]";
    return fallback;
  }
  return static_cast<int>(value);
}

std::string Mb(int64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << bytes / 1e6 << " MB";
  return out.str();
}

TEST(E2eSoak, MixedLoadLosesAndCorruptsNothing) {
  const int seconds = EnvInt("TDSTORE_SOAK_SECONDS", 8, 1, 7 * 24 * 3600);
  const int clients = EnvInt("TDSTORE_SOAK_CLIENTS", 4, 1, 64);

  Soak soak;
  soak.dict = UniqueDictName();
  soak.clients = clients;
  soak.leaves = MakeLeaves(clients);
  for (int64_t r = 0; r < kRows; ++r) soak.all_rows.push_back(r);
  for (const LeafDef& leaf : soak.leaves) {
    ASSERT_GE(leaf.row_bytes, static_cast<int64_t>(kMinRowBytes)) << leaf.path.str();
    ASSERT_EQ(kPartBytes % leaf.row_bytes, 0) << leaf.path.str() << ": a row would straddle parts";
  }
  Ledger ledger(soak.leaves.size(), clients);
  soak.ledger = &ledger;

  // Every leaf exists (zero-filled) from the start: the first reads find
  // unwritten rows, which the ledger expects (seq 0).
  Client admin(DaemonAddress());
  std::vector<Client::LeafSpec> schema;
  for (const LeafDef& leaf : soak.leaves) {
    schema.push_back({leaf.path, leaf.dtype, leaf.element_shape});
  }
  Dict td = admin.create(soak.dict, {kRows}, schema, CreateOptions{kRowsPerBlock, kPartBytes});

  // Each client its own Client (own channel); half over TCP, half over the
  // unix socket.
  std::vector<std::unique_ptr<SoakClient>> load;
  for (int k = 0; k < clients; ++k) {
    load.push_back(std::make_unique<SoakClient>(
        soak, k, k % 2 == 0 ? DaemonAddress() : DaemonUnixAddress()));
  }
  std::vector<Stats> per_client(clients);
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(seconds);
  std::vector<std::thread> threads;
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&, k] { per_client[k] = load[k]->Run(deadline); });
  }
  // Meanwhile, requests for 32 GiB of zeros (the shared daemon's namespace
  // quota is 8 GiB): each must be refused with RESOURCE_EXHAUSTED, before
  // it allocates anything, while the load above loses nothing.
  std::map<std::string, int64_t> oversized;  // outcome -> count
  const std::string big_name = soak.dict + ".big";
  threads.emplace_back([&] {
    ClientOptions options;
    options.retry_for = std::chrono::milliseconds(0);
    Client attacker(DaemonAddress(), options);
    const int64_t rows = int64_t{1} << 33;  // float32: 32 GiB
    Dict big = attacker.create(big_name, {rows});
    for (int i = 0; Clock::now() < deadline; ++i) {
      const std::string outcome = [&]() -> std::string {
        try {
          if (i % 2 == 0) {
            attacker.create(big_name + ".schema", {rows}, {{Key("zeros"), at::kFloat, {}}});
          } else {
            big.set_index(Index{i}, "zeros", at::zeros({}));  // creates the leaf zero-filled
          }
          return "accepted";
        } catch (const Error& e) {
          return e.code() == StatusCode::kResourceExhausted ? "refused" : e.what();
        }
      }();
      ++oversized[outcome];
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  for (std::thread& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  Stats total;
  for (const Stats& s : per_client) total.Merge(s);

  // The final read, and the Redis keys: exactly the blocks of the current
  // generations, and no write pending.
  LocalDict all;
  Stats final_problems;
  Attempt(&final_problems, "read.final", false, [&] { all = td.to_local(); });
  const FinalTally tally = CheckFinal(soak, all, &final_problems);
  const std::string id = td.describe().id;
  const size_t data_keys = SharedRedis().Keys("e2e:{" + id + ".*}:g*").size();
  const std::string pending = SharedRedis().Command({"HLEN", "e2e:{" + id + "}:pending"}).at(0);

  // ---- The report ----
  int64_t calls = 0;
  for (const auto& [kind, n] : total.calls) calls += n;
  int64_t errors = 0;
  for (const auto& [kind, n] : total.errors) errors += n;
  std::ostringstream report;
  report << "soak: " << clients << " clients, " << std::fixed << std::setprecision(1) << elapsed
         << " s, " << soak.leaves.size() << " leaves x " << kRows << " rows ("
         << (kRows + kRowsPerBlock - 1) / kRowsPerBlock << " blocks of " << kRowsPerBlock
         << " rows), back end " << SharedRedis().backend() << "\n  calls: " << calls << " ("
         << std::setprecision(0) << calls / elapsed << "/s)";
  for (const auto& [kind, n] : total.calls) report << ", " << kind << " " << n;
  report << "\n  errors: " << errors;
  for (const auto& [kind, n] : total.errors) report << ", " << kind << " " << n;
  report << "\n  bytes written " << Mb(total.bytes_written) << ", read " << Mb(total.bytes_read)
         << "\n  rows verified: " << total.rows_verified << " during the load, " << tally.rows
         << " at the end (" << tally.uncertain << " from failed writes)"
         << "\n  lost: " << tally.lost_rows << " rows, " << tally.lost_bytes
         << " bytes; corrupt: " << total.rows_corrupt + tally.corrupt
         << " rows; stale reads: " << total.rows_stale << " rows"
         << "\n  Redis: " << data_keys << " data keys (expected " << ExpectedDataKeys(soak.leaves)
         << "), " << pending << " pending writes\n";
  std::cout << report.str();
  for (const auto& [kind, n] : total.calls) RecordProperty("calls." + kind, std::to_string(n));
  for (const auto& [kind, n] : total.errors) RecordProperty("errors." + kind, std::to_string(n));
  RecordProperty("seconds", std::to_string(elapsed));
  RecordProperty("clients", clients);
  RecordProperty("calls_per_second", std::to_string(calls / elapsed));
  RecordProperty("bytes_written", std::to_string(total.bytes_written));
  RecordProperty("bytes_read", std::to_string(total.bytes_read));
  RecordProperty("rows_verified", std::to_string(total.rows_verified + tally.rows));
  RecordProperty("rows_lost", std::to_string(tally.lost_rows));
  RecordProperty("bytes_lost", std::to_string(tally.lost_bytes));
  RecordProperty("rows_corrupt", std::to_string(total.rows_corrupt + tally.corrupt));
  RecordProperty("rows_stale", std::to_string(total.rows_stale));

  // ---- The verdict ----
  std::string problems;
  for (const std::string& p : total.problems) problems += "\n  " + p;
  for (const std::string& p : final_problems.problems) problems += "\n  " + p;
  EXPECT_EQ(total.unexpected_errors + final_problems.unexpected_errors, 0) << problems;
  EXPECT_EQ(tally.lost_bytes, 0) << problems;
  EXPECT_EQ(total.rows_corrupt + tally.corrupt, 0) << problems;
  EXPECT_EQ(total.rows_stale, 0) << problems;
  EXPECT_EQ(tally.rows, static_cast<int64_t>(soak.leaves.size()) * kRows);
  // The load really was mixed: every kind of call ran (and read something).
  for (const char* kind : {"write.rows.shared", "write.rows.private", "write.leaf", "write.update",
                           "read.index", "read.leaf", "read.many", "read.dict"}) {
    EXPECT_GT(total.calls[kind], 0) << kind;
  }
  EXPECT_GT(total.rows_verified, 0);
  // Every oversized request was refused, and left nothing.
  EXPECT_GT(oversized["refused"], 0);
  EXPECT_EQ(oversized.size(), 1u) << "an oversized request was not refused: "
                                  << oversized.begin()->first;
  std::cout << "  oversized requests refused: " << oversized["refused"] << "\n";
  RecordProperty("oversized_refused", std::to_string(oversized["refused"]));
  EXPECT_TRUE(admin.open(big_name).keys().empty());
  const std::vector<std::string> names = admin.list();
  EXPECT_EQ(std::count(names.begin(), names.end(), big_name + ".schema"), 0);
  admin.drop(big_name);
  // Nothing leaked: replaced generations deleted, no write left pending.
  EXPECT_EQ(data_keys, ExpectedDataKeys(soak.leaves));
  EXPECT_EQ(pending, "0");
  admin.drop(soak.dict);
}

// ---- The checks themselves: a soak that cannot fail proves nothing ----------------

TEST(E2eSoak, RowFormatDetectsDamage) {
  constexpr size_t kBytes = 36;
  char row[kBytes], other[kBytes], zero[kBytes] = {};
  EncodeRow({7, 2, 3, 41}, row, kBytes);
  EncodeRow({7, 2, 3, 42}, other, kBytes);
  RowStamp stamp;
  std::string why;
  ASSERT_EQ(DecodeRow(row, kBytes, &stamp, &why), RowState::kWhole) << why;
  EXPECT_EQ(stamp.row, 7u);
  EXPECT_EQ(stamp.writer, 2u);
  EXPECT_EQ(stamp.leaf, 3u);
  EXPECT_EQ(stamp.seq, 41u);
  EXPECT_EQ(DecodeRow(zero, kBytes, &stamp, &why), RowState::kUnwritten);
  EXPECT_EQ(stamp.seq, 0u);
  // Any one bit flipped anywhere.
  for (size_t byte = 0; byte < kBytes; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      char damaged[kBytes];
      std::copy(row, row + kBytes, damaged);
      damaged[byte] ^= static_cast<char>(1 << bit);
      EXPECT_EQ(DecodeRow(damaged, kBytes, &stamp, &why), RowState::kCorrupt) << byte << "/" << bit;
    }
  }
  // Half of one write and half of the next, cut anywhere (the two share
  // their first 8 bytes: cuts there give back a whole row).
  int spliced_rows = 0;
  for (size_t cut = 1; cut < kBytes; ++cut) {
    char spliced[kBytes];
    std::copy(row, row + cut, spliced);
    std::copy(other + cut, other + kBytes, spliced + cut);
    if (std::equal(spliced, spliced + kBytes, row) || std::equal(spliced, spliced + kBytes, other)) {
      continue;
    }
    ++spliced_rows;
    EXPECT_EQ(DecodeRow(spliced, kBytes, &stamp, &why), RowState::kCorrupt) << cut;
  }
  EXPECT_GE(spliced_rows, 26);
}

TEST(E2eSoak, VerifierCatchesLostStaleTornAndCorruptRows) {
  Soak soak;
  soak.dict = UniqueDictName();
  soak.clients = 1;
  soak.leaves = MakeLeaves(1);  // s/f32 s/i64 s/u8 s/deep/bf16 w0/f64 w0/i16
  for (int64_t r = 0; r < kRows; ++r) soak.all_rows.push_back(r);
  Ledger ledger(soak.leaves.size(), 1);
  soak.ledger = &ledger;
  Client client(DaemonAddress());
  std::vector<Client::LeafSpec> schema;
  for (const LeafDef& leaf : soak.leaves) {
    schema.push_back({leaf.path, leaf.dtype, leaf.element_shape});
  }
  Dict td = client.create(soak.dict, {kRows}, schema, CreateOptions{kRowsPerBlock, kPartBytes});

  // Every row of every leaf written twice; the ledger holds seq 2.
  for (int round = 0; round < 2; ++round) {
    const uint32_t seq = ledger.Issue(0);
    std::map<Key, at::Tensor> values;
    for (size_t leaf = 0; leaf < soak.leaves.size(); ++leaf) {
      values[soak.leaves[leaf].path] = EncodeValue(soak, leaf, soak.all_rows, true, 0, seq);
    }
    td.update(values);
    for (size_t leaf = 0; leaf < soak.leaves.size(); ++leaf) ledger.Ack(leaf, soak.all_rows, seq);
  }
  // Then, behind the ledger's back, one row of a leaf each (td[row] = value):
  auto overwrite = [&](size_t leaf, int64_t row, const at::Tensor& value) {
    td.set_index(Index(row), soak.leaves[leaf].path, value);
  };
  overwrite(0, 5, EncodeValue(soak, 0, {5}, false, 0, 1));  // s/f32 row 5 back at seq 1: lost
  at::Tensor flipped = EncodeValue(soak, 1, {6}, false, 0, 2);
  static_cast<char*>(flipped.data_ptr())[20] ^= 1;
  overwrite(1, 6, flipped);                                  // s/i64 row 6: a bit flipped
  overwrite(2, 7, EncodeValue(soak, 2, {8}, false, 0, 2));  // s/u8 row 7 holds row 8
  overwrite(4, 9, EncodeValue(soak, 4, {9}, false, 0, 9));  // w0/f64 row 9: seq 9 never issued
  // w0/i16 row 10: a write that failed as far as the ledger knows; its
  // value is accepted.
  const uint32_t failed = ledger.Issue(0);
  ledger.Fail(5, {10}, failed);
  overwrite(5, 10, EncodeValue(soak, 5, {10}, false, 0, failed));

  // The final check.
  Stats problems;
  const FinalTally tally = CheckFinal(soak, td.to_local(), &problems);
  EXPECT_EQ(tally.rows, static_cast<int64_t>(soak.leaves.size()) * kRows);
  EXPECT_EQ(tally.lost_rows, 1);
  EXPECT_EQ(tally.lost_bytes, 32);  // one float32 [8] row
  EXPECT_EQ(tally.corrupt, 3);      // flipped, misplaced, never issued
  EXPECT_EQ(tally.uncertain, 1);
  EXPECT_EQ(problems.problems.size(), 4u);

  // The checks of a read during the load, on an indexed read of rows 5..10
  // of every leaf: row 5 is stale in s/f32 and torn across s/*.
  std::vector<size_t> leaves;
  for (size_t leaf = 0; leaf < soak.leaves.size(); ++leaf) leaves.push_back(leaf);
  const std::vector<int64_t> rows = {5, 6, 7, 8, 9, 10};
  const auto at_least = AckedNow(soak, leaves, rows);
  Stats stats;
  CheckRead(soak, td.index(Slice(5, 11)), leaves, rows, true, at_least, true, &stats);
  EXPECT_EQ(stats.rows_verified, static_cast<int64_t>(rows.size() * leaves.size()));
  EXPECT_EQ(stats.rows_stale, 1);
  EXPECT_EQ(stats.rows_corrupt, 4);  // flipped, misplaced, never issued, torn row 5
  // A whole-leaf read does not check across leaves: no torn row there.
  Stats whole;
  LocalDict got;
  got.leaves.emplace(soak.leaves[0].path, td.get(soak.leaves[0].path));
  CheckRead(soak, got, {0}, soak.all_rows, true, AckedNow(soak, {0}, soak.all_rows), false,
            &whole);
  EXPECT_EQ(whole.rows_stale, 1);
  EXPECT_EQ(whole.rows_corrupt, 0);
  client.drop(soak.dict);
}

}  // namespace
}  // namespace tdstore::testing
