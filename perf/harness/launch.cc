#include "perf/harness/launch.h"

#include <cstdlib>

namespace loomperf {
namespace {

bool readInt(const EnvLookup& env, const char* name, int* out) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0') return false;
  *out = static_cast<int>(x);
  return true;
}

// One family of variables: rank, size and local rank.
bool fromVars(const EnvLookup& env, const char* rankVar, const char* sizeVar, const char* localVar,
              const char* source, Launch* l, std::string* error) {
  int rank = 0, size = 0, local = 0;
  if (!readInt(env, sizeVar, &size)) return false;
  if (!readInt(env, rankVar, &rank)) {
    *error = std::string(sizeVar) + " is set but " + rankVar + " is not (or not a number)";
    return false;
  }
  if (!readInt(env, localVar, &local)) local = rank;
  if (size < 1 || rank < 0 || rank >= size) {
    *error = std::string(rankVar) + "=" + std::to_string(rank) + " is not within " + sizeVar + "=" +
             std::to_string(size);
    return false;
  }
  l->mode = LaunchMode::kEnv;
  l->nprocs = size;
  l->proc = rank;
  l->localProc = local;
  l->source = source;
  return true;
}

}  // namespace

bool detectLaunch(const EnvLookup& env, bool withMpi, Launch* l, std::string* error) {
  *l = Launch{};
  l->source = "threads";
  error->clear();
  const bool underMpirun = env("OMPI_COMM_WORLD_SIZE") != nullptr || env("PMI_SIZE") != nullptr ||
                           env("PMIX_RANK") != nullptr;
  if (underMpirun && withMpi) {
    l->mode = LaunchMode::kMpi;
    l->source = "mpirun";
    return true;  // mpiStart fills in the numbers
  }
  if (fromVars(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun", l, error)) return true;
  if (!error->empty()) return false;
  if (fromVars(env, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm", l, error))
    return true;
  if (!error->empty()) return false;
  if (fromVars(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
               "open mpi variables", l, error))
    return true;
  return error->empty();
}

}  // namespace loomperf
