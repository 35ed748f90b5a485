// record-layout-eval: what a row-major ("record") block layout would buy,
// measured on raw Redis before building it into tdstore (issue #13 item 3).
//
// tdstore stores each leaf in blocks of its own (a block of `obs` holds
// rows_per_block rows of obs only). A record layout would keep all leaves
// of a row together: a block holds rows_per_block records of
// sum(row bytes) each. Both layouts of the replay buffer of
// scenario_replay.cc (obs [84] f32, action [6] f32, reward f32, done bool;
// 1,000,000 rows, 16,384 rows per block) are written to the same Redis and
// read back the way tdstored would read them, with a hiredis client and no
// tdstored in between: the ideal of each layout. Interleaved rounds,
// medians:
//
//   sample     256 random rows of all 4 leaves: per block, one MULTI of
//              GETRANGEs, one per (leaf, row) or one per row;
//   leaf       a whole leaf: GETRANGE windows of its own blocks, or every
//              record block read and the leaf's column copied out;
//   row write  one row of all 4 leaves: a SETRANGE per leaf, or one.
//
// Usage: record-layout-eval redis://127.0.0.1:6379 [--rows N] [--rounds R]
// It writes keys under "rle:" and deletes them at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/bench/raw_client.h"

namespace tdstore::bench {
namespace {

constexpr int64_t kRowsPerBlock = 16384;
constexpr int64_t kWindow = 1 << 20;
const char* const kNames[] = {"obs", "action", "reward", "done"};
constexpr int64_t kRowBytes[] = {84 * 4, 6 * 4, 4, 1};
constexpr int kLeaves = 4;
constexpr int64_t kRecordBytes = 84 * 4 + 6 * 4 + 4 + 1;

template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(v.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(v);
}
void Must(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string LeafKey(int leaf, int64_t block) {
  return "rle:{L" + std::to_string(block) + "}:" + kNames[leaf];
}
std::string RecordKey(int64_t block) { return "rle:{R" + std::to_string(block) + "}"; }

struct Eval {
  RawRedis& redis;
  int64_t rows;
  int64_t blocks() const { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }
  int64_t rows_in(int64_t b) const { return std::min(kRowsPerBlock, rows - b * kRowsPerBlock); }

  // Sends `count` commands built by `send(i, argv, storage)`, at most
  // `depth` in flight, and hands each reply to `got(i, reply)`.
  template <typename Send, typename Got>
  void Windowed(size_t count, int depth, Send send, Got got) {
    RawPipeline pipe(redis);
    size_t sent = 0, received = 0;
    std::vector<std::string> storage;
    Argv argv;
    while (received < count) {
      while (sent < count && pipe.outstanding() < depth) {
        argv.Clear();
        storage.clear();
        std::string key = send(sent, argv, storage);
        Must(pipe.Send(key, argv), "send");
        ++sent;
      }
      RawReply r = Must(pipe.Receive(), "receive");
      if (r->type == REDIS_REPLY_ERROR) {
        std::fprintf(stderr, "redis: %s\n", r->str);
        std::exit(1);
      }
      got(received++, r.get());
    }
  }

  void Fill() {
    std::mt19937_64 rng(5);
    for (int64_t b = 0; b < blocks(); ++b) {
      std::string record(static_cast<size_t>(rows_in(b) * kRecordBytes), '\0');
      for (char& c : record) c = static_cast<char>(rng());
      Must(redis.KeyCommand(RecordKey(b), {"SET", RecordKey(b), record}), "fill");
      // The leaf blocks hold the same bytes, column by column.
      int64_t col = 0;
      for (int l = 0; l < kLeaves; ++l) {
        std::string leaf(static_cast<size_t>(rows_in(b) * kRowBytes[l]), '\0');
        for (int64_t r = 0; r < rows_in(b); ++r) {
          std::memcpy(&leaf[r * kRowBytes[l]], &record[r * kRecordBytes + col], kRowBytes[l]);
        }
        Must(redis.KeyCommand(LeafKey(l, b), {"SET", LeafKey(l, b), leaf}), "fill");
        col += kRowBytes[l];
      }
    }
  }

  void Clean() {
    for (int64_t b = 0; b < blocks(); ++b) {
      (void)redis.KeyCommand(RecordKey(b), {"UNLINK", RecordKey(b)});
      for (int l = 0; l < kLeaves; ++l) (void)redis.KeyCommand(LeafKey(l, b), {"UNLINK", LeafKey(l, b)});
    }
  }

  // Rows grouped by block, as tdstored plans an indexed read.
  std::map<int64_t, std::vector<int64_t>> ByBlock(const std::vector<int64_t>& rows_wanted) {
    std::map<int64_t, std::vector<int64_t>> out;
    for (int64_t r : rows_wanted) out[r / kRowsPerBlock].push_back(r % kRowsPerBlock);
    return out;
  }

  // One MULTI ... EXEC per block: GETRANGEs, then the EXEC's array.
  void Sample(const std::vector<int64_t>& rows_wanted, bool record, std::vector<std::string>& out) {
    auto groups = ByBlock(rows_wanted);
    std::vector<std::pair<int64_t, std::vector<int64_t>>> list(groups.begin(), groups.end());
    for (int l = 0; l < kLeaves; ++l) out[l].resize(rows_wanted.size() * kRowBytes[l]);
    // Commands: MULTI, the GETRANGEs, EXEC for each block, in order.
    struct Cmd {
      size_t block;
      int kind;  // 0 MULTI, 1 GETRANGE, 2 EXEC
      int leaf;
      int64_t row;
    };
    std::vector<Cmd> cmds;
    for (size_t i = 0; i < list.size(); ++i) {
      cmds.push_back({i, 0, 0, 0});
      for (int64_t row : list[i].second) {
        if (record) {
          cmds.push_back({i, 1, -1, row});
        } else {
          for (int l = 0; l < kLeaves; ++l) cmds.push_back({i, 1, l, row});
        }
      }
      cmds.push_back({i, 2, 0, 0});
    }
    size_t result_row = 0;
    Windowed(
        cmds.size(), 1 << 20,
        [&](size_t i, Argv& argv, std::vector<std::string>& st) {
          const Cmd& c = cmds[i];
          const int64_t b = list[c.block].first;
          std::string key = record ? RecordKey(b) : LeafKey(std::max(c.leaf, 0), b);
          st.reserve(3);
          if (c.kind == 0) {
            argv.Add("MULTI");
          } else if (c.kind == 2) {
            argv.Add("EXEC");
          } else {
            const int64_t size = record ? kRecordBytes : kRowBytes[c.leaf];
            st.push_back(key);
            st.push_back(std::to_string(c.row * size));
            st.push_back(std::to_string(c.row * size + size - 1));
            argv.Add("GETRANGE").Add(st[0]).Add(st[1]).Add(st[2]);
          }
          return key;
        },
        [&](size_t i, const redisReply* r) {
          if (cmds[i].kind != 2) return;
          // The EXEC: copy each range to its result rows.
          size_t e = 0;
          for (size_t k = 0; k < list[cmds[i].block].second.size(); ++k, ++result_row) {
            if (record) {
              const char* from = r->element[e++]->str;
              for (int l = 0; l < kLeaves; ++l) {
                std::memcpy(&out[l][result_row * kRowBytes[l]], from, kRowBytes[l]);
                from += kRowBytes[l];
              }
            } else {
              for (int l = 0; l < kLeaves; ++l) {
                std::memcpy(&out[l][result_row * kRowBytes[l]], r->element[e++]->str, kRowBytes[l]);
              }
            }
          }
        });
  }

  // A whole leaf into `out`.
  void ReadLeaf(int leaf, bool record, std::string& out) {
    out.resize(static_cast<size_t>(rows * kRowBytes[leaf]));
    int64_t col = 0;
    for (int l = 0; l < leaf; ++l) col += kRowBytes[l];
    struct Win {
      int64_t block, offset, length;
    };
    std::vector<Win> wins;
    const int64_t unit = record ? kRecordBytes : kRowBytes[leaf];
    // Windows of whole rows, so a record window is de-interleaved alone.
    const int64_t rows_per_window = std::max<int64_t>(1, kWindow / unit);
    for (int64_t b = 0; b < blocks(); ++b) {
      for (int64_t r = 0; r < rows_in(b); r += rows_per_window) {
        const int64_t n = std::min(rows_per_window, rows_in(b) - r);
        wins.push_back({b, r, n});
      }
    }
    Windowed(
        wins.size(), 64,
        [&](size_t i, Argv& argv, std::vector<std::string>& st) {
          const Win& w = wins[i];
          std::string key = record ? RecordKey(w.block) : LeafKey(leaf, w.block);
          st.reserve(3);
          st.push_back(key);
          st.push_back(std::to_string(w.offset * unit));
          st.push_back(std::to_string((w.offset + w.length) * unit - 1));
          argv.Add("GETRANGE").Add(st[0]).Add(st[1]).Add(st[2]);
          return key;
        },
        [&](size_t i, const redisReply* r) {
          const Win& w = wins[i];
          char* to = &out[(w.block * kRowsPerBlock + w.offset) * kRowBytes[leaf]];
          if (!record) {
            std::memcpy(to, r->str, r->len);
            return;
          }
          for (int64_t k = 0; k < w.length; ++k) {
            std::memcpy(to + k * kRowBytes[leaf], r->str + k * kRecordBytes + col, kRowBytes[leaf]);
          }
        });
  }

  // One row of all leaves, atomically (MULTI), as td[i] = row does.
  void WriteRow(int64_t row, bool record, const std::string& values) {
    const int64_t b = row / kRowsPerBlock, r = row % kRowsPerBlock;
    std::vector<std::vector<std::string>> cmds;
    cmds.push_back({"MULTI"});
    if (record) {
      cmds.push_back({"SETRANGE", RecordKey(b), std::to_string(r * kRecordBytes), values});
    } else {
      int64_t col = 0;
      for (int l = 0; l < kLeaves; ++l) {
        cmds.push_back({"SETRANGE", LeafKey(l, b), std::to_string(r * kRowBytes[l]),
                        values.substr(col, kRowBytes[l])});
        col += kRowBytes[l];
      }
    }
    cmds.push_back({"EXEC"});
    const std::string route = record ? RecordKey(b) : LeafKey(0, b);
    Windowed(
        cmds.size(), 64,
        [&](size_t i, Argv& argv, std::vector<std::string>& st) {
          st = cmds[i];
          for (const std::string& s : st) argv.Add(s);
          return route;
        },
        [](size_t, const redisReply*) {});
  }
};

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s redis://host:port [--rows N] [--rounds R]\n", argv[0]);
    return 2;
  }
  int64_t rows = 1000000;
  int rounds = 7;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--rows") rows = std::stoll(argv[i + 1]);
    if (std::string(argv[i]) == "--rounds") rounds = std::stoi(argv[i + 1]);
  }
  auto redis = Must(RawRedis::Connect(argv[1]), "connect");
  Eval eval{*redis, rows};
  eval.Fill();
  std::mt19937_64 rng(9);
  std::vector<std::string> got_leaf(kLeaves), got_record(kLeaves);
  std::map<std::string, std::vector<double>> t[2];  // [layout][case]
  std::string values(kRecordBytes, 'v');
  for (int round = 0; round < rounds; ++round) {
    for (int sample = 0; sample < 20; ++sample) {
      std::vector<int64_t> want(256);
      for (int64_t& r : want) r = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
      for (int layout = 0; layout < 2; ++layout) {
        auto& out = layout ? got_record : got_leaf;
        double a = Now();
        eval.Sample(want, layout == 1, out);
        t[layout]["sample 256 rows x 4 leaves"].push_back(Now() - a);
      }
      if (got_leaf != got_record) {
        std::fprintf(stderr, "the two layouts disagree on a sample\n");
        return 1;
      }
      // The same row in both layouts, so they keep holding the same bytes.
      const int64_t row = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
      for (int layout = 0; layout < 2; ++layout) {
        double a = Now();
        eval.WriteRow(row, layout == 1, values);
        t[layout]["write 1 row x 4 leaves"].push_back(Now() - a);
      }
    }
    for (int leaf = 0; leaf < kLeaves; ++leaf) {
      std::string a_out, b_out;
      for (int layout = 0; layout < 2; ++layout) {
        double a = Now();
        eval.ReadLeaf(leaf, layout == 1, layout ? b_out : a_out);
        t[layout][std::string("whole leaf ") + kNames[leaf]].push_back(Now() - a);
      }
      if (a_out != b_out) {
        std::fprintf(stderr, "the two layouts disagree on leaf %s\n", kNames[leaf]);
        return 1;
      }
    }
  }
  eval.Clean();
  std::printf("| case (%lld rows, %lld rows per block) | per-leaf blocks, ms | record blocks, ms | record vs per-leaf |\n|---|--:|--:|--:|\n",
              static_cast<long long>(rows), static_cast<long long>(kRowsPerBlock));
  for (const auto& [name, v] : t[0]) {
    const double a = Median(v) * 1e3, b = Median(t[1][name]) * 1e3;
    std::printf("| %s | %.3f | %.3f | %.2fx |\n", name.c_str(), a, b, a / b);
  }
  return 0;
}

}  // namespace
}  // namespace tdstore::bench

int main(int argc, char** argv) { return tdstore::bench::Main(argc, argv); }
