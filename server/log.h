// tdstored's log: one line per message on stderr,
//
//   2025-01-31T12:34:56.789Z INFO serving on 127.0.0.1:50051 with ...
//
// UTC timestamp with milliseconds, level, text. Messages below the level set
// with SetLogLevel (default kInfo) are dropped. Control characters in the
// text (a newline in a Redis error, say) are escaped as \n, \r, \t or \xNN,
// so one message is always one line and a client cannot forge lines.
//
// Callers must never pass secrets: Redis passwords (use
// RedisAddress::Redacted()), bearer tokens, gRPC metadata values.
//
// Thread-safe: any thread may log at any time; lines never interleave.
#ifndef TDSTORE_SERVER_LOG_H_
#define TDSTORE_SERVER_LOG_H_

#include <string>
#include <string_view>

namespace tdstore {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// "debug", "info", "warning", "error" -> *level; false for anything else
// (*level untouched).
bool ParseLogLevel(std::string_view name, LogLevel* level);

void SetLogLevel(LogLevel level);
// Whether a message at `level` would be written. Check it before building
// an expensive debug message.
bool LogEnabled(LogLevel level);

// Writes one line if `level` is enabled.
void Log(LogLevel level, std::string_view text);

inline void LogDebug(std::string_view text) { Log(LogLevel::kDebug, text); }
inline void LogInfo(std::string_view text) { Log(LogLevel::kInfo, text); }
inline void LogWarning(std::string_view text) { Log(LogLevel::kWarning, text); }
inline void LogError(std::string_view text) { Log(LogLevel::kError, text); }

// The line Log would write, without the trailing newline (for tests).
std::string FormatLogLine(LogLevel level, std::string_view text);

}  // namespace tdstore

#endif  // TDSTORE_SERVER_LOG_H_
