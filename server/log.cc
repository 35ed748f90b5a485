#include "server/log.h"

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <utility>

namespace tdstore {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
  }
  return "?";
}

// "2025-01-31T12:34:56.789Z"
void AppendTimestamp(std::string* out) {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
  const time_t seconds = static_cast<time_t>(ms.count() / 1000);
  tm utc;
  gmtime_r(&seconds, &utc);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(ms.count() % 1000));
  out->append(buf);
}

// Keeps one message on one line: control characters become escapes.
void AppendEscaped(std::string_view text, std::string* out) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (u < 0x20 || u == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out->append(buf);
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

bool ParseLogLevel(std::string_view name, LogLevel* level) {
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"debug", LogLevel::kDebug},
      {"info", LogLevel::kInfo},
      {"warning", LogLevel::kWarning},
      {"error", LogLevel::kError}};
  for (const auto& [known, value] : kNames) {
    if (name == known) {
      *level = value;
      return true;
    }
  }
  return false;
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

std::string FormatLogLine(LogLevel level, std::string_view text) {
  std::string line;
  line.reserve(32 + text.size());
  AppendTimestamp(&line);
  line.push_back(' ');
  line.append(LevelName(level));
  line.push_back(' ');
  AppendEscaped(text, &line);
  return line;
}

void Log(LogLevel level, std::string_view text) {
  if (!LogEnabled(level)) return;
  std::string line = FormatLogLine(level, text);
  line.push_back('\n');
  // stderr is unbuffered: one fwrite is one write(2). The mutex keeps lines
  // whole even if the C library splits a long one.
  // Never destroyed: threads may still log while the process exits.
  static std::mutex* mu = new std::mutex;
  std::lock_guard<std::mutex> lock(*mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace tdstore
