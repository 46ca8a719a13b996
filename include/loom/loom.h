/*
 * loom: collective communication for CPU and GPU memory.
 *
 * This is the whole public C API. It follows NCCL's shape and semantics with a `loom` prefix,
 * so a later NCCL-ABI shim can map `nccl*` names onto it.
 *
 * Call order for a job of N ranks:
 *   1. One rank calls loomGetUniqueId() and hands the 128-byte id to every rank (MPI, a file,
 *      torchrun's store...). Alternatively every rank sets LOOM_COMM_ID=host:port and calls
 *      loomGetUniqueId() itself: all derive the same id and rank 0 hosts the rendezvous.
 *   2. Every rank calls loomCommInitRank() (or loomCommInitRankConfig()) with the same id and
 *      nranks and its own rank. The call blocks until all ranks have arrived, or fails with
 *      loomTimeout naming the missing ranks after LOOM_TIMEOUT seconds.
 *      One process holding all ranks calls loomCommInitAll() instead.
 *   3. Use the communicator (loomCommSplit, collectives).
 *   4. loomCommFinalize() (collective: every rank) then loomCommDestroy() (local), or
 *      loomCommAbort() (local, at any time, from any thread) to tear down after an error.
 *
 * Every function returns a loomResult_t. On failure, loomGetLastError() returns a message that
 * says what went wrong and, where possible, what to do.
 *
 * Thread safety: different communicators may be used concurrently from different threads.
 * One communicator is used by one thread at a time, except loomCommAbort() and
 * loomCommGetAsyncError(), which may be called from any thread at any time.
 */
#ifndef LOOM_LOOM_H_
#define LOOM_LOOM_H_

#include <stddef.h>

#if defined(_WIN32)
#define LOOM_API
#else
/** Marks exported symbols; everything else in libloom is hidden. */
#define LOOM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Version of these headers: major * 10000 + minor * 100 + patch. */
#define LOOM_MAJOR 0
#define LOOM_MINOR 1
#define LOOM_PATCH 0
#define LOOM_VERSION_CODE (LOOM_MAJOR * 10000 + LOOM_MINOR * 100 + LOOM_PATCH)

/** Result codes. Values 0-7 match NCCL's ncclResult_t; loomTimeout is loom's own. */
typedef enum {
  loomSuccess = 0,            /**< The call did what was asked. */
  loomUnhandledCudaError = 1, /**< A CUDA call failed. */
  loomSystemError = 2,        /**< A system call failed (sockets, memory, /dev/shm ...). */
  loomInternalError = 3,      /**< A bug in loom; please report it with the LOOM_DEBUG=INFO log. */
  loomInvalidArgument = 4,    /**< An argument is wrong (null pointer, out of range, bad id...). */
  loomInvalidUsage = 5,       /**< Calls in the wrong order or on an unusable communicator. */
  loomRemoteError = 6,        /**< A peer failed, died or disagreed (e.g. about nranks). */
  loomInProgress = 7,         /**< A non-blocking operation has not finished yet. */
  loomTimeout = 8,            /**< A wait passed its deadline (LOOM_TIMEOUT or config.timeoutMs). */
  loomNumResults = 9
} loomResult_t;

/** Opaque communicator handle. */
typedef struct loomComm* loomComm_t;

/** Size in bytes of a unique id. */
#define LOOM_UNIQUE_ID_BYTES 128

/**
 * Identifies one rendezvous: the root's address and a random secret that every connection of
 * the job must prove. Treat it as opaque bytes; copy it to every rank unchanged.
 */
typedef struct {
  char internal[LOOM_UNIQUE_ID_BYTES];
} loomUniqueId;

/** Value of loomConfig_t.device for a communicator on host (CPU) memory. */
#define LOOM_DEVICE_CPU (-1)
/** Color for loomCommSplit() meaning "this rank joins no new communicator". */
#define LOOM_SPLIT_NOCOLOR (-1)
/** Flags of loomCommShrink(): the parent has no operation in flight (it may be used on). */
#define LOOM_SHRINK_DEFAULT 0x00
/** Flags of loomCommShrink(): stop the parent's operations in flight first (after a failure). */
#define LOOM_SHRINK_ABORT 0x01
/** Marks a config field as unset, so loom uses the environment or its default. */
#define LOOM_CONFIG_UNDEF_INT (-2147483647 - 1)

/** Magic and version that LOOM_CONFIG_INITIALIZER writes; loom rejects any other value. */
#define LOOM_CONFIG_MAGIC 0x6c6f6f6dU /* "loom" */
#define LOOM_CONFIG_VERSION 1

/**
 * Options for loomCommInitRankConfig() and loomCommSplit(). Always start from
 * LOOM_CONFIG_INITIALIZER, then set the fields you need: the size, magic and version fields let
 * later loom versions add fields without breaking binaries built against this header.
 */
typedef struct loomConfig_v1 {
  size_t size;      /**< sizeof(loomConfig_t); set by the initializer. */
  unsigned magic;   /**< LOOM_CONFIG_MAGIC; set by the initializer. */
  unsigned version; /**< LOOM_CONFIG_VERSION; set by the initializer. */
  /** LOOM_DEVICE_CPU (default) or a CUDA device ordinal. Fixed for the communicator's life. */
  int device;
  /**
   * 1 (default): init and split return when the communicator is ready.
   * 0: they return loomInProgress at once and finish in the background; poll
   * loomCommGetAsyncError() until it stops returning loomInProgress.
   */
  int blocking;
  /** Deadline in milliseconds for every wait; unset means LOOM_TIMEOUT (seconds). */
  int timeoutMs;
  /** Name shown in logs and error messages; copied at init. NULL means "loom". */
  const char* name;
} loomConfig_t;

/** Initial value for every loomConfig_t: all options unset. */
#define LOOM_CONFIG_INITIALIZER                                                          \
  {                                                                                      \
    sizeof(loomConfig_t), LOOM_CONFIG_MAGIC, LOOM_CONFIG_VERSION, LOOM_CONFIG_UNDEF_INT, \
        LOOM_CONFIG_UNDEF_INT, LOOM_CONFIG_UNDEF_INT, NULL                               \
  }

/**
 * Element types of collective buffers. Values match NCCL's ncclDataType_t. Reductions of
 * 16- and 8-bit floating-point types accumulate in float32 and round to nearest even.
 */
typedef enum {
  loomInt8 = 0,
  loomChar = 0,
  loomUint8 = 1,
  loomInt32 = 2,
  loomInt = 2,
  loomUint32 = 3,
  loomInt64 = 4,
  loomUint64 = 5,
  loomFloat16 = 6,
  loomHalf = 6,
  loomFloat32 = 7,
  loomFloat = 7,
  loomFloat64 = 8,
  loomDouble = 8,
  loomBfloat16 = 9,
  loomFloat8e4m3 = 10,
  loomFloat8e5m2 = 11,
  loomNumTypes = 12,
  /* Not types: they give the enum the whole int range, so any value a caller passes is
   * well-defined and reported as loomInvalidArgument. */
  loomDataTypeEnumMin = -2147483647 - 1,
  loomDataTypeEnumMax = 0x7fffffff
} loomDataType_t;

/** Reduction operations. Values match NCCL's ncclRedOp_t. */
typedef enum {
  loomSum = 0,
  loomProd = 1,
  loomMax = 2,
  loomMin = 3,
  loomAvg = 4, /**< sum / nranks; integer types divide (truncating) after the sum */
  loomNumOps = 5,
  /* loomRedOpCreatePreMulSum returns values from loomNumOps up. These two give the enum the
   * whole int range (as NCCL's ncclMaxRedOp does), so any value a caller passes is
   * well-defined and reported as loomInvalidArgument. */
  loomMaxRedOp = 0x7fffffff,
  loomRedOpEnumMin = -2147483647 - 1
} loomRedOp_t;

/** Writes LOOM_VERSION_CODE of the library actually loaded into *version. */
LOOM_API loomResult_t loomGetVersion(int* version);

/**
 * Creates a unique id for a new job. Call on one rank, then send the id to all ranks.
 * Unless LOOM_COMM_ID is set, this starts a rendezvous listener in the calling process on the
 * interface chosen by LOOM_SOCKET_IFNAME; the process must stay alive until every rank has
 * called loomCommInitRank(). With LOOM_COMM_ID=host:port every rank may call it and gets the
 * same id; rank 0 then hosts the rendezvous on that port during loomCommInitRank().
 */
LOOM_API loomResult_t loomGetUniqueId(loomUniqueId* uniqueId);

/**
 * Creates the communicator of rank `rank` (0 <= rank < nranks) in a job of `nranks` ranks, with
 * default options (CPU device, blocking). Collective: every rank of the job must call it with
 * the same id and nranks. *comm is written before the call starts waiting, so another thread
 * may loomCommAbort() it; on failure the communicator is destroyed and *comm set to NULL.
 */
LOOM_API loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId,
                                       int rank);

/**
 * As loomCommInitRank(), with options. config may be NULL (defaults). With config->blocking = 0
 * the call returns loomInProgress and the communicator keeps initialising in the background;
 * it then stays valid after a failure and must be destroyed or aborted by the caller.
 */
LOOM_API loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId,
                                             int rank, loomConfig_t* config);

/**
 * Creates `ndev` communicators of one job in this process, rank i in comms[i]. devlist gives
 * each rank's device (LOOM_DEVICE_CPU or a CUDA ordinal); NULL means every rank on the CPU.
 */
LOOM_API loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist);

/**
 * Splits `comm` into disjoint communicators: ranks with the same `color` form one, ordered by
 * `key` (ties broken by rank in `comm`). A rank passing LOOM_SPLIT_NOCOLOR gets *newcomm = NULL.
 * Collective over `comm`. config may be NULL, which inherits the parent's options. The split
 * completes before the call returns even when config->blocking is 0 (the new communicator keeps
 * that setting for its own later operations).
 */
LOOM_API loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm,
                                    loomConfig_t* config);

/**
 * Makes a new communicator of the ranks of `comm` that are not in excludeRanksList (NCCL 2.27's
 * ncclCommShrink): typically the survivors of a failure, to go on without the failed ranks.
 * Every remaining rank calls it with the same list (any order); the excluded ranks do not call
 * it, and nothing waits for them, so they may be dead or hung. Remaining ranks keep their order:
 * the new rank is the number of remaining ranks below this one in `comm`. No unique id is
 * needed. Collective over the remaining ranks: it waits up to the timeout for each of them.
 *
 * excludeRanksList holds excludeRanksCount (at least 1) distinct ranks of `comm`, not this
 * rank's; it is read only. config may be NULL, which inherits the parent's options.
 * shrinkFlags:
 *   LOOM_SHRINK_DEFAULT  the parent has no operation in flight; it stays usable if it was
 *                        (on a parent that already failed it acts as LOOM_SHRINK_ABORT).
 *   LOOM_SHRINK_ABORT    first stops the parent's operations in flight (they return an error),
 *                        for use after a failure; the parent is then unusable: destroy it.
 * Errors: loomInvalidArgument for a bad list or flags; loomInvalidUsage when remaining ranks
 * passed different lists (each rank that sees the difference fails; a live rank that others
 * excluded fails too, at its deadline at the latest); loomRemoteError when a remaining rank is gone (add it
 * to the list); loomTimeout when a remaining rank did not call loomCommShrink in time.
 * Call order: after a failure, loomCommShrink(comm, failed, n, &newcomm, NULL,
 * LOOM_SHRINK_ABORT), then loomCommDestroy(comm) (or loomCommAbort), then use newcomm.
 */
LOOM_API loomResult_t loomCommShrink(loomComm_t comm, const int* excludeRanksList,
                                     int excludeRanksCount, loomComm_t* newcomm,
                                     loomConfig_t* config, int shrinkFlags);

/**
 * Finishes all operations of `comm` and waits until every rank has done the same, so that no
 * peer still uses resources shared with this rank. Collective. Call before loomCommDestroy().
 */
LOOM_API loomResult_t loomCommFinalize(loomComm_t comm);

/**
 * Frees the communicator's local resources. Local (not collective). Destroying a communicator
 * that was not finalized is allowed but peers may see errors if they still use it. Destroying
 * a handle twice returns loomInvalidArgument.
 */
LOOM_API loomResult_t loomCommDestroy(loomComm_t comm);

/**
 * Stops every operation of `comm` in progress (they return with an error), then frees it.
 * Local, and safe from any thread at any time, including while another thread is blocked in
 * loomCommInitRank() or loomCommSplit() on this communicator.
 */
LOOM_API loomResult_t loomCommAbort(loomComm_t comm);

/**
 * Writes the communicator's state into *asyncError: loomInProgress while a non-blocking init or
 * split is running, loomSuccess when ready, or the error that made it unusable.
 */
LOOM_API loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError);

/** Number of ranks in `comm`. */
LOOM_API loomResult_t loomCommCount(const loomComm_t comm, int* count);

/** This rank's index in `comm`. */
LOOM_API loomResult_t loomCommUserRank(const loomComm_t comm, int* rank);

/** The communicator's device: LOOM_DEVICE_CPU or a CUDA ordinal. */
LOOM_API loomResult_t loomCommDevice(const loomComm_t comm, int* device);

/** A short, static description of a result code. Never NULL. */
LOOM_API const char* loomGetErrorString(loomResult_t result);

/**
 * The message of the last failure: of `comm` when comm is not NULL, else of the last failed call
 * made by this thread (init failures have no communicator yet). Valid until the next loom call
 * on the same communicator or thread. Never NULL; empty when nothing failed.
 */
LOOM_API const char* loomGetLastError(loomComm_t comm);

/* ---- Host streams and events ----------------------------------------------------------------
 * A CPU communicator runs each collective either synchronously (stream NULL: the call returns
 * when the result is in place) or on a host stream: operations enqueued on one stream run in
 * order on that stream's own thread, asynchronously to the caller; operations on different
 * streams (and communicators) progress concurrently. Events mark a point in a stream, as CUDA
 * events do, so frameworks build futures on them. For a CUDA communicator the stream argument
 * of a collective is a cudaStream_t cast to loomStream_t.
 *
 * Several streams of one communicator. Operations on different streams of one communicator,
 * and calls on the NULL stream from different threads, progress together: a rank may post a
 * receive on one stream and the matching send on another, and every rank may post its receives
 * first, without deadlock. What every rank must keep is the order per connection, as in NCCL:
 * operations that share one - point-to-point to one peer in one direction, and collectives of
 * the communicator - match their peers' in the order in which they start running here. So put
 * the sends to one peer on one stream (likewise the receives from one peer), and give
 * collectives on different streams an order that every rank keeps (one stream for all of them,
 * or events between the streams); loom does not reorder them, and a collective whose peers
 * started a different one fails with an error naming both, or, when the two agree in kind,
 * count, type and op, exchanges the data in the order the ranks started them. Point-to-point
 * operations and collectives overlap freely. Connections are made on first use; making them
 * never stops the operations already running.
 */

/** A host stream: an in-order queue of operations of one communicator. */
typedef struct loomStream* loomStream_t;
/** An event: completes when every operation enqueued on its stream before it has completed. */
typedef struct loomEvent* loomEvent_t;

/** Creates a host stream for `comm` (a CPU communicator). Operations of other communicators are
 * rejected on it. Destroy it before the communicator. */
LOOM_API loomResult_t loomStreamCreate(loomComm_t comm, loomStream_t* stream);
/** Waits for the stream's operations, then frees it. Returns their first error, if any. */
LOOM_API loomResult_t loomStreamDestroy(loomStream_t stream);
/** loomSuccess when all enqueued operations finished, loomInProgress while some run, or the
 * error of the first operation that failed (the stream then drops the rest). */
LOOM_API loomResult_t loomStreamQuery(loomStream_t stream);
/** Waits until every enqueued operation finished; returns as loomStreamQuery would then. */
LOOM_API loomResult_t loomStreamSynchronize(loomStream_t stream);

LOOM_API loomResult_t loomEventCreate(loomEvent_t* event);
/** Marks the current end of `stream`; re-recording an event moves its mark. */
LOOM_API loomResult_t loomEventRecord(loomEvent_t event, loomStream_t stream);
/** loomSuccess once everything before the mark finished (or if never recorded),
 * loomInProgress before, or the stream's error. */
LOOM_API loomResult_t loomEventQuery(loomEvent_t event);
LOOM_API loomResult_t loomEventSynchronize(loomEvent_t event);
LOOM_API loomResult_t loomEventDestroy(loomEvent_t event);

/* ---- Collectives and point-to-point ---------------------------------------------------------
 * Every rank of `comm` calls a collective with the same count, datatype, op and root, in the
 * same order. count is in elements. In place: sendbuff == recvbuff for AllReduce, Broadcast,
 * Reduce; for AllGather sendbuff == recvbuff + rank * sendcount; for ReduceScatter
 * recvbuff == sendbuff + rank * recvcount (NCCL's layouts). Buffers need no alignment.
 */
LOOM_API loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                                    loomStream_t stream);
/** Copies root's sendbuff into every rank's recvbuff (sendbuff is read on root only). */
LOOM_API loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    loomDataType_t datatype, int root, loomComm_t comm,
                                    loomStream_t stream);
/** Reduces every rank's sendbuff into root's recvbuff (recvbuff is written on root only). */
LOOM_API loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 loomDataType_t datatype, loomRedOp_t op, int root,
                                 loomComm_t comm, loomStream_t stream);
/** recvbuff (nranks * sendcount elements) receives rank r's sendbuff at offset r * sendcount. */
LOOM_API loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    loomDataType_t datatype, loomComm_t comm,
                                    loomStream_t stream);
/** sendbuff holds nranks * recvcount elements; rank r receives the reduction of block r. */
LOOM_API loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        loomDataType_t datatype, loomRedOp_t op,
                                        loomComm_t comm, loomStream_t stream);
/** Block p (count elements) of sendbuff goes to rank p, which stores it at block r of its
 * recvbuff. In place (sendbuff == recvbuff) works: each block leaves before the block received
 * from the same rank overwrites it. Other overlaps of the two buffers are undefined. */
LOOM_API loomResult_t loomAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                   loomDataType_t datatype, loomComm_t comm, loomStream_t stream);
/** Sends count elements to `peer`, which must post a matching loomRecv. Inside a group, sends
 * and receives of any peers may be posted in any order without deadlock; so may those on
 * different streams of the communicator (see "Several streams of one communicator"). */
LOOM_API loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype,
                               int peer, loomComm_t comm, loomStream_t stream);
LOOM_API loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer,
                               loomComm_t comm, loomStream_t stream);

/** Starts a group: the operations called until the matching loomGroupEnd() are only
 * validated and collected; loomGroupEnd() launches them together. Groups nest. The calls of
 * a group must all be on CPU communicators or all on CUDA ones; on CUDA communicators the
 * group is enqueued once, on the stream of its first call, and the group's other streams wait
 * for the work queued on them before it, and their later work waits for the group. */
LOOM_API loomResult_t loomGroupStart(void);
LOOM_API loomResult_t loomGroupEnd(void);

/* ---- Shareable memory ------------------------------------------------------------------------
 * Host memory that peers on the same host can map (NCCL's ncclMemAlloc, with the registration
 * included). Between ranks in different processes of one host, the shared-memory transport
 * otherwise copies every byte twice (into a shared slot, then out of it); when the data a
 * collective sends lies in memory from loomMemAlloc, the receiving process maps that memory once
 * and reads it in place: one copy, roughly twice the bandwidth for large messages. Use it for
 * sendbuff and recvbuff of large collectives (megabytes). Any loom call accepts it like any other
 * host memory; other memory keeps working as before. LOOM_SHM_REGISTERED=0 turns the single-copy
 * use off. Peers need the same permission as for ptrace (same user; Linux >= 5.6); where it is
 * missing loom logs it at INFO and copies through the ring.
 */

/** Allocates `size` (> 0) bytes of host memory, zero-filled and page-aligned, into *ptr. Fails
 * with loomInvalidArgument for a NULL ptr or size 0, loomSystemError when out of memory. */
LOOM_API loomResult_t loomMemAlloc(void** ptr, size_t size);
/** Frees memory from loomMemAlloc. Fails with loomInvalidArgument for NULL or any other pointer
 * (including one freed already). Do not free memory a collective still uses. A peer that mapped
 * it may keep the pages until it drops its mapping later. */
LOOM_API loomResult_t loomMemFree(void* ptr);

/** Registers [buff, buff + size) with the RDMA devices of `comm`'s transports (NCCL's
 * ncclCommRegister), so that steps of collectives and point-to-point calls sent from it go to
 * the network without a copy through a ring; returns the registration in *handle. GPU memory
 * is registered by dma-buf or nvidia-peermem (GPUDirect RDMA): a CUDA communicator's kernels
 * then post the steps that only copy it by address, the NIC reads them in place, and each
 * call ends once they are read. Memory from loomMemAlloc needs no registration (it is
 * registered on first use). Without an RDMA device
 * the call succeeds and changes nothing. Registering pins the pages: call it once per buffer,
 * not per operation, and keep the buffer until loomCommDeregister. Fails with
 * loomInvalidArgument for a NULL buff or handle, size 0, or an unknown communicator. */
LOOM_API loomResult_t loomCommRegister(const loomComm_t comm, void* buff, size_t size,
                                       void** handle);
/** Releases a registration from loomCommRegister (NCCL's ncclCommDeregister). No operation
 * that sends from the buffer may still run. Fails with loomInvalidArgument for a handle
 * loomCommRegister did not return or that was released already. */
LOOM_API loomResult_t loomCommDeregister(const loomComm_t comm, void* handle);

/** Where the scalar of loomRedOpCreatePreMulSum lives. */
typedef enum {
  loomScalarDevice = 0,
  loomScalarHostImmediate = 1,
  loomScalarResidenceEnumMin = -2147483647 - 1, /* range markers, not residences */
  loomScalarResidenceEnumMax = 0x7fffffff
} loomScalarResidence_t;
/** Creates a reduction op that multiplies every input by *scalar (of type datatype) before
 * summing. For loomScalarHostImmediate the value is read now; for loomScalarDevice it is read
 * when each operation runs. Valid for `comm` until loomRedOpDestroy(). */
LOOM_API loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t* op, void* scalar,
                                               loomDataType_t datatype,
                                               loomScalarResidence_t residence, loomComm_t comm);
LOOM_API loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_LOOM_H_ */
