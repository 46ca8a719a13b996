// The C boundary: argument checks, handle lookup, and the conversion of loom's exceptions into
// loomResult_t codes with a last-error message (per communicator and per thread).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/api/api_guard.h"
#include "src/api/comm_layers.h"
#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/bootstrap/bootstrap_root.h"
#include "src/bootstrap/unique_id.h"
#include "src/comm/comm.h"
#include "src/comm/comm_registry.h"
#include "src/comm/device.h"
#include "src/net/net_if.h"

using namespace loom;

namespace loom {

thread_local std::string tlsLastError;

loomResult_t recordFailure(const char* function, const loomComm* handle, loomResult_t code,
                           const std::string& what) {
  std::string message = strCat(function, ": ", what);
  std::shared_ptr<Comm> comm = findCommOrNull(handle);
  // A peer's error here may be the echo of a failure elsewhere (a survivor that failed first
  // closed its connections): the job's first failure, which names the rank that died, leads.
  if (code == loomRemoteError && comm) {
    const Interrupt* failure = comm->abortFlag()->failure();
    if (failure != nullptr && what.find(failure->message()) == std::string::npos)
      message = strCat(function, ": ", failure->message(), "; seen here as: ", what);
  }
  // A timeout says who has not arrived, asking every rank over the control channel.
  if (code == loomTimeout && comm) {
    std::string report = comm->hangReport();
    if (!report.empty()) message += strCat("\nWho has not arrived: ", report);
  }
  tlsLastError = message;
  if (comm) comm->setLastError(message);
  LOOM_WARN(kLogInit, message, " [", loomGetErrorString(code), "]");
  return code;
}

}  // namespace loom

namespace {

// A new id with its root listening in this process; `localOnly` keeps it on loopback.
loomUniqueId newUniqueId(bool localOnly) {
  UniqueIdContents id;
  SocketAddress loopback;
  if (localOnly) loopback = SocketAddress::parse("127.0.0.1:0");
  NetInterface itf = chooseBootstrapInterface(localOnly ? &loopback : nullptr);
  if (localOnly && !envIsSet(EnvVar::LOOM_SOCKET_IFNAME)) itf.address = loopback;
  id.secret = randomSecret();
  id.root = startBootstrapRoot(itf.address, id.secret);
  return packUniqueId(id);
}

void forgetComm(const loomComm* handle) {
  try {
    unregisterComm(handle);
  } catch (const Error&) {
    // Already removed by a concurrent loomCommAbort/Destroy.
  }
}

}  // namespace

extern "C" {

LOOM_API loomResult_t loomGetVersion(int* version) {
  return guarded("loomGetVersion", nullptr, [&] {
    LOOM_ENFORCE(version != nullptr, InvalidArgument, "version is NULL");
    *version = LOOM_VERSION_CODE;
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomGetUniqueId(loomUniqueId* uniqueId) {
  return guarded("loomGetUniqueId", nullptr, [&] {
    LOOM_ENFORCE(uniqueId != nullptr, InvalidArgument, "uniqueId is NULL");
    if (envIsSet(EnvVar::LOOM_COMM_ID)) {
      // Every rank computes the same id; rank 0 will host the rendezvous there.
      std::string commId = envString(EnvVar::LOOM_COMM_ID);
      UniqueIdContents id;
      id.root = SocketAddress::parse(commId);
      LOOM_ENFORCE(id.root.port() != 0, InvalidArgument, "LOOM_COMM_ID='", commId,
                   "' needs a port other than 0");
      id.secret = derivedSecret(commId, envString(EnvVar::LOOM_COMM_SECRET));
      id.rootAtRank0 = true;
      *uniqueId = packUniqueId(id);
    } else {
      *uniqueId = newUniqueId(false);
    }
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId,
                                             int rank, loomConfig_t* config) {
  return guarded("loomCommInitRank", nullptr, [&] {
    LOOM_ENFORCE(comm != nullptr, InvalidArgument, "comm (the output pointer) is NULL");
    *comm = nullptr;
    LOOM_ENFORCE(nranks >= 1, InvalidArgument, "nranks is ", nranks, "; it must be at least 1");
    LOOM_ENFORCE(rank >= 0 && rank < nranks, InvalidArgument, "rank ", rank,
                 " is out of range for nranks=", nranks, " (valid: 0 to ", nranks - 1, ")");
    CommOptions options = resolveOptions(config, nullptr);
    options.attachLayers = attachLayers;
    UniqueIdContents id = unpackUniqueId(commId);
    if (id.rootAtRank0 && rank == 0) startBootstrapRoot(id.root, id.secret);

    auto c = std::make_shared<Comm>(options, rank, nranks);
    loomComm* handle = registerComm(c);
    *comm = handle;
    if (!options.blocking) {
      c->startAsync([c = c.get(), id] { c->initFromId(id); });
      return loomInProgress;
    }
    try {
      c->initFromId(id);
    } catch (...) {
      forgetComm(handle);
      *comm = nullptr;
      throw;
    }
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId,
                                       int rank) {
  return loomCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

LOOM_API loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist) {
  return guarded("loomCommInitAll", nullptr, [&] {
    LOOM_ENFORCE(comms != nullptr, InvalidArgument, "comms is NULL");
    LOOM_ENFORCE(ndev >= 1, InvalidArgument, "ndev is ", ndev, "; it must be at least 1");
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
    if (devlist != nullptr) {
      for (int i = 0; i < ndev; ++i) validateDevice(devlist[i]);
    }
    loomUniqueId id = newUniqueId(true);
    std::vector<loomResult_t> results(static_cast<size_t>(ndev));
    std::vector<std::string> messages(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        loomConfig_t config = LOOM_CONFIG_INITIALIZER;
        config.device = devlist != nullptr ? devlist[i] : LOOM_DEVICE_CPU;
        results[i] = loomCommInitRankConfig(&comms[i], ndev, id, i, &config);
        if (results[i] != loomSuccess) messages[i] = loomGetLastError(nullptr);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[i] == loomSuccess) continue;
      for (int j = 0; j < ndev; ++j) {
        if (comms[j] != nullptr) loomCommDestroy(comms[j]);
        comms[j] = nullptr;
      }
      throw Error(results[i], strCat("rank ", i, " failed: ", messages[i]));
    }
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm,
                                    loomConfig_t* config) {
  return guarded("loomCommSplit", comm, [&] {
    LOOM_ENFORCE(newcomm != nullptr, InvalidArgument, "newcomm (the output pointer) is NULL");
    *newcomm = nullptr;
    std::shared_ptr<Comm> parent = findComm(comm);
    CommOptions options = resolveOptions(config, &parent->options());
    std::shared_ptr<Comm> child = parent->split(color, key, options);
    if (child) *newcomm = registerComm(std::move(child));
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommShrink(loomComm_t comm, const int* excludeRanksList,
                                     int excludeRanksCount, loomComm_t* newcomm,
                                     loomConfig_t* config, int shrinkFlags) {
  return guarded("loomCommShrink", comm, [&] {
    LOOM_ENFORCE(newcomm != nullptr, InvalidArgument, "newcomm (the output pointer) is NULL");
    *newcomm = nullptr;
    LOOM_ENFORCE(excludeRanksCount >= 1, InvalidArgument, "excludeRanksCount is ",
                 excludeRanksCount, "; name at least one rank to exclude");
    LOOM_ENFORCE(excludeRanksList != nullptr, InvalidArgument, "excludeRanksList is NULL");
    std::shared_ptr<Comm> parent = findComm(comm);
    CommOptions options = resolveOptions(config, &parent->options());
    std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    *newcomm = registerComm(parent->shrink(exclude, shrinkFlags, options));
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommFinalize(loomComm_t comm) {
  return guarded("loomCommFinalize", comm, [&] {
    findComm(comm)->finalize();
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommDestroy(loomComm_t comm) {
  return guarded("loomCommDestroy", comm, [&] {
    unregisterComm(comm)->destroy();
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommAbort(loomComm_t comm) {
  return guarded("loomCommAbort", comm, [&] {
    if (comm == nullptr) return loomSuccess;  // as NCCL: aborting nothing succeeds
    unregisterComm(comm)->abort();
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError) {
  return guarded("loomCommGetAsyncError", comm, [&] {
    LOOM_ENFORCE(asyncError != nullptr, InvalidArgument, "asyncError is NULL");
    std::shared_ptr<Comm> c = findComm(comm);
    c->collectFinishedWork();
    *asyncError = c->asyncError();
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommCount(const loomComm_t comm, int* count) {
  return guarded("loomCommCount", comm, [&] {
    LOOM_ENFORCE(count != nullptr, InvalidArgument, "count is NULL");
    *count = findComm(comm)->nranks();
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommUserRank(const loomComm_t comm, int* rank) {
  return guarded("loomCommUserRank", comm, [&] {
    LOOM_ENFORCE(rank != nullptr, InvalidArgument, "rank is NULL");
    *rank = findComm(comm)->rank();
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommDevice(const loomComm_t comm, int* device) {
  return guarded("loomCommDevice", comm, [&] {
    LOOM_ENFORCE(device != nullptr, InvalidArgument, "device is NULL");
    *device = findComm(comm)->device();
    return loomSuccess;
  });
}

LOOM_API const char* loomGetErrorString(loomResult_t result) {
  switch (result) {
    case loomSuccess:
      return "no error";
    case loomUnhandledCudaError:
      return "unhandled CUDA error";
    case loomSystemError:
      return "unhandled system error (sockets, memory, files)";
    case loomInternalError:
      return "internal error (a loom bug)";
    case loomInvalidArgument:
      return "invalid argument";
    case loomInvalidUsage:
      return "invalid usage";
    case loomRemoteError:
      return "remote process failed or disagreed";
    case loomInProgress:
      return "operation in progress";
    case loomTimeout:
      return "timed out";
    default:
      return "unknown result code";
  }
}

LOOM_API const char* loomGetLastError(loomComm_t comm) {
  if (comm != nullptr) {
    if (std::shared_ptr<Comm> c = findCommOrNull(comm)) return c->lastError();
  }
  return tlsLastError.c_str();
}

}  // extern "C"
