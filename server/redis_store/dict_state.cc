#include "server/redis_store/dict_state.h"

#include <set>

#include "absl/strings/numbers.h"
#include "common/path.h"
#include "common/protocol_limits.h"
#include "common/str_cat.h"
#include "server/redis_store/lua_scripts.h"
#include "server/redis_store/redis_errors.h"

namespace tdstore::store {

namespace {

// The dict's id: the ref's own, or what the catalog says the name means.
absl::StatusOr<std::string> IdOf(DictStore& dicts, const DictRef& ref) {
  if (auto s = ValidateDictName(ref.name); !s.ok()) return s;
  if (!ref.id.empty()) return std::string(ref.id);
  return dicts.LookupId(ref.name);
}

}  // namespace

absl::StatusOr<DictSchema> SetLocked(DictStore& dicts, const DictRef& ref, bool locked) {
  auto id = IdOf(dicts, ref);
  if (!id.ok()) return id.status();
  const KeySchema& keys = dicts.keys();
  auto reply = dicts.redis().Eval(GetScripts().set_locked, {keys.Meta(*id)},
                                  {locked ? "1" : "0", keys.SchemaChannel(), *id, ref.name});
  if (!reply.ok()) return reply.status();
  if (ErrorTag(*reply) == "TDNODICT") return dicts.NotFound(ref);
  if (auto s = ReplyStatus(*reply, locked ? "lock dict" : "unlock dict"); !s.ok()) return s;
  return dicts.Load({ref.name, *id});
}

absl::StatusOr<DictSchema> UpdateAttrs(DictStore& dicts, const DictRef& ref,
                                       const AttrsUpdate& update) {
  if (auto s = CheckAttrsUpdate(update); !s.ok()) return s;
  std::set<std::string_view> removed(update.remove.begin(), update.remove.end());
  auto id = IdOf(dicts, ref);
  if (!id.ok()) return id.status();
  const KeySchema& keys = dicts.keys();
  const std::string channel = keys.SchemaChannel();
  const std::string max_attrs = StrCat(kMaxAttrs);
  const std::string n = StrCat(update.set.size());
  std::vector<std::string_view> args{channel, *id, max_attrs, ref.name, n};
  for (const auto& [name, value] : update.set) {
    args.push_back(name);
    args.push_back(value);
  }
  for (std::string_view name : removed) args.push_back(name);
  auto reply =
      dicts.redis().Eval(GetScripts().update_attrs, {keys.Meta(*id), keys.Attrs(*id)}, args);
  if (!reply.ok()) return reply.status();
  const std::string_view tag = ErrorTag(*reply);
  if (tag == "TDNODICT") return dicts.NotFound(ref);
  if (tag == "TDLIMIT") {
    int64_t count = 0;
    (void)absl::SimpleAtoi(std::string(ErrorDetail(*reply)), &count);
    return TooManyAttrs(ref.name, count);
  }
  if (auto s = ReplyStatus(*reply, "update attributes"); !s.ok()) return s;
  return dicts.Load({ref.name, *id});
}

namespace {

// The errors counter.lua and reserve_ring.lua share, as statuses.
absl::Status CounterReplyStatus(DictStore& dicts, const DictRef& ref, std::string_view name,
                                int64_t delta, const redis::Reply& reply) {
  const std::string_view tag = ErrorTag(reply);
  if (tag == "TDNODICT") return dicts.NotFound(ref);
  if (tag == "TDLIMIT") {
    int64_t count = 0;
    (void)absl::SimpleAtoi(std::string(ErrorDetail(reply)), &count);
    return TooManyCounters(ref.name, count, name);
  }
  if (tag == "TDOVERFLOW") {
    return CounterOverflow(name, delta);
  }
  return ReplyStatus(reply, "counter");
}

}  // namespace

absl::StatusOr<RingReservation> ReserveRing(DictStore& dicts, const DictRef& ref,
                                            const std::string& cursor, int64_t rows) {
  if (auto s = CheckStateName("counter", cursor); !s.ok()) return s;
  auto id = IdOf(dicts, ref);
  if (!id.ok()) return id.status();
  const KeySchema& keys = dicts.keys();
  auto reply = dicts.redis().Eval(GetScripts().reserve_ring, {keys.Meta(*id), keys.Counters(*id)},
                                  {cursor, StrCat(rows), StrCat(kMaxCounters), ref.name});
  if (!reply.ok()) return reply.status();
  if (ErrorTag(*reply) == "TDRINGSIZE") {
    int64_t size = 0;
    (void)absl::SimpleAtoi(std::string(ErrorDetail(*reply)), &size);
    return RingSizeError(ref.name, size, rows);
  }
  if (auto s = CounterReplyStatus(dicts, ref, cursor, rows, *reply); !s.ok()) return s;
  RingReservation out;
  int64_t after = 0;
  if (!reply->is_array() || reply->size() != 2 ||
      !absl::SimpleAtoi(std::string((*reply)[0].str()), &after)) {
    return absl::InternalError(StrCat("counter '", cursor, "': unexpected reply from Redis"));
  }
  out.start = after - rows;
  out.size = (*reply)[1].integer();
  return out;
}

absl::StatusOr<CounterResult> ApplyCounter(DictStore& dicts, const DictRef& ref,
                                           const CounterOp& op) {
  if (auto s = CheckStateName("counter", op.name); !s.ok()) return s;
  auto id = IdOf(dicts, ref);
  if (!id.ok()) return id.status();
  const KeySchema& keys = dicts.keys();
  std::string_view kind = "get";
  std::string a = "0", b = "0";
  switch (op.kind) {
    case CounterOp::Kind::kGet:
      break;
    case CounterOp::Kind::kAdd:
      kind = "add";
      a = StrCat(op.delta);
      break;
    case CounterOp::Kind::kCas:
      kind = "cas";
      a = StrCat(op.expected);
      b = StrCat(op.new_value);
      break;
  }
  const std::string max_counters = StrCat(kMaxCounters);
  auto reply = dicts.redis().Eval(GetScripts().counter, {keys.Meta(*id), keys.Counters(*id)},
                                  {kind, op.name, a, b, max_counters, ref.name});
  if (!reply.ok()) return reply.status();
  if (auto s = CounterReplyStatus(dicts, ref, op.name, op.delta, *reply); !s.ok()) return s;
  CounterResult result;
  int64_t version = 0;
  if (!reply->is_array() || reply->size() != 3 ||
      !absl::SimpleAtoi(std::string((*reply)[0].str()), &result.value) ||
      !absl::SimpleAtoi(std::string((*reply)[2].str()), &version)) {
    return absl::InternalError(StrCat("counter '", op.name, "': unexpected reply from Redis"));
  }
  result.swapped = (*reply)[1].integer() == 1;
  result.version_after = SchemaVersionSeen{*id, version};
  return result;
}

}  // namespace tdstore::store
