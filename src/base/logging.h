// One logger for all of loom: levels (LOOM_DEBUG) x subsystems (LOOM_DEBUG_SUBSYS), written to
// stderr or LOOM_DEBUG_FILE. It is the one process-wide object in loom: init failures must be
// logged before any communicator exists, and a log file is per process anyway. It reads its
// settings once, on first use.
#pragma once

#include <cstdint>
#include <string>

#include "src/base/strings.h"

namespace loom {

enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

enum LogSubsys : uint32_t {
  kLogInit = 1u << 0,
  kLogBootstrap = 1u << 1,
  kLogNet = 1u << 2,
  kLogShm = 1u << 3,
  kLogColl = 1u << 4,
  kLogP2p = 1u << 5,
  kLogGraph = 1u << 6,
  kLogTuning = 1u << 7,
  kLogEnv = 1u << 8,
  kLogAll = ~0u,
};

class Logger {
 public:
  static Logger& instance();
  bool enabled(LogLevel level, uint32_t subsys) const {
    return level <= level_ && (level == LogLevel::kWarn || (subsys & subsysMask_) != 0);
  }
  void write(LogLevel level, uint32_t subsys, const std::string& message);

  // Parsers, public for unit tests. Unknown names throw InvalidArgument.
  static LogLevel parseLevel(const std::string& text);
  static uint32_t parseSubsys(const std::string& text);
  // Replaces %h with `host` and %p with `pid` in a LOOM_DEBUG_FILE pattern.
  static std::string expandFilePattern(const std::string& pattern, const std::string& host,
                                       long pid);

 private:
  Logger();
  LogLevel level_ = LogLevel::kWarn;
  uint32_t subsysMask_ = kLogAll;
  int fd_ = 2;
  std::string host_;
};

// Text put in front of every line this thread logs (e.g. "comm 'loom' rank 3/8"); restored on
// scope exit. Lets deep code log without being passed the communicator.
class ScopedLogContext {
 public:
  explicit ScopedLogContext(std::string context);
  ~ScopedLogContext();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;
  static const std::string& current();

 private:
  std::string previous_;
};

}  // namespace loom

#define LOOM_LOG(level, subsys, ...)                                 \
  do {                                                               \
    ::loom::Logger& loomLogger_ = ::loom::Logger::instance();        \
    if (loomLogger_.enabled(level, subsys))                          \
      loomLogger_.write(level, subsys, ::loom::strCat(__VA_ARGS__)); \
  } while (0)
#define LOOM_WARN(subsys, ...) LOOM_LOG(::loom::LogLevel::kWarn, ::loom::subsys, __VA_ARGS__)
#define LOOM_INFO(subsys, ...) LOOM_LOG(::loom::LogLevel::kInfo, ::loom::subsys, __VA_ARGS__)
#define LOOM_TRACE(subsys, ...) LOOM_LOG(::loom::LogLevel::kTrace, ::loom::subsys, __VA_ARGS__)
