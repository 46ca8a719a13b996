#include "src/base/logging.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "loom/loom.h"
#include "src/base/env.h"
#include "src/base/error.h"

namespace loom {
namespace {

thread_local std::string tlsContext;

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kLogInit},   {"BOOTSTRAP", kLogBootstrap}, {"NET", kLogNet},
    {"SHM", kLogShm},     {"COLL", kLogColl},           {"P2P", kLogP2p},
    {"GRAPH", kLogGraph}, {"TUNING", kLogTuning},       {"ENV", kLogEnv},
    {"ALL", kLogAll},
};

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
    default:
      return "LOG";
  }
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

LogLevel Logger::parseLevel(const std::string& text) {
  std::string t = upper(text);
  if (t == "NONE") return LogLevel::kNone;
  if (t == "VERSION") return LogLevel::kVersion;
  if (t == "WARN") return LogLevel::kWarn;
  if (t == "INFO") return LogLevel::kInfo;
  if (t == "TRACE") return LogLevel::kTrace;
  throw InvalidArgument(
      strCat("LOOM_DEBUG='", text, "' is not a level; use NONE, VERSION, WARN, INFO or TRACE."));
}

uint32_t Logger::parseSubsys(const std::string& text) {
  std::string t = upper(text);
  bool exclude = !t.empty() && t[0] == '^';
  uint32_t mask = 0;
  for (const std::string& item : splitList(exclude ? t.substr(1) : t, ',')) {
    bool found = false;
    for (const SubsysName& s : kSubsysNames) {
      if (item == s.name) {
        mask |= s.bit;
        found = true;
      }
    }
    LOOM_ENFORCE(found, InvalidArgument, "LOOM_DEBUG_SUBSYS names unknown subsystem '", item,
                 "'; known: INIT, BOOTSTRAP, NET, SHM, COLL, P2P, GRAPH, TUNING, ENV, ALL.");
  }
  return exclude ? ~mask : mask;
}

std::string Logger::expandFilePattern(const std::string& pattern, const std::string& host,
                                      long pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      if (pattern[i + 1] == 'h') {
        out += host;
        ++i;
        continue;
      }
      if (pattern[i + 1] == 'p') {
        out += std::to_string(pid);
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

Logger& Logger::instance() {
  static Logger logger;  // constructed once, thread-safely, on first use
  return logger;
}

Logger::Logger() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  host_ = host;
  // A bad setting must not stop the job: warn and keep the default.
  try {
    level_ = parseLevel(envString(EnvVar::LOOM_DEBUG));
  } catch (const Error& e) {
    std::fprintf(stderr, "loom WARN %s\n", e.what());
  }
  try {
    subsysMask_ = parseSubsys(envString(EnvVar::LOOM_DEBUG_SUBSYS));
  } catch (const Error& e) {
    std::fprintf(stderr, "loom WARN %s\n", e.what());
  }
  std::string file = envString(EnvVar::LOOM_DEBUG_FILE);
  if (!file.empty() && level_ > LogLevel::kNone) {
    std::string path = expandFilePattern(file, host_, static_cast<long>(getpid()));
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      fd_ = fd;
    } else {
      std::fprintf(stderr, "loom WARN cannot open LOOM_DEBUG_FILE '%s'; logging to stderr\n",
                   path.c_str());
    }
  }
  // The version line is for those who ask for logs, not for every process of every job.
  if (level_ >= LogLevel::kVersion && envIsSet(EnvVar::LOOM_DEBUG)) {
    std::string line = strCat(host_, ":", getpid(), " loom version ", LOOM_MAJOR, ".", LOOM_MINOR,
                              ".", LOOM_PATCH, "\n");
    (void)!::write(fd_, line.data(), line.size());
  }
}

void Logger::write(LogLevel level, uint32_t /*subsys*/, const std::string& message) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long tid = static_cast<long>(syscall(SYS_gettid));
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%ld.%06ld", static_cast<long>(ts.tv_sec % 100000),
                static_cast<long>(ts.tv_nsec / 1000));
  std::string line =
      strCat(host_, ":", getpid(), ":", tid, " [", stamp, "] loom ", levelName(level), " ");
  if (!tlsContext.empty()) line += tlsContext + ": ";
  line += message;
  line += '\n';
  // One write() per line keeps lines of concurrent threads and processes whole.
  (void)!::write(fd_, line.data(), line.size());
}

ScopedLogContext::ScopedLogContext(std::string context) : previous_(std::move(tlsContext)) {
  tlsContext = std::move(context);
}
ScopedLogContext::~ScopedLogContext() { tlsContext = std::move(previous_); }
const std::string& ScopedLogContext::current() { return tlsContext; }

}  // namespace loom
