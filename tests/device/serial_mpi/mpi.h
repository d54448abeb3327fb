/* A one-process MPI: the subset of the MPI C API dmuon-bench calls, for builds on machines
 * without an MPI library (the GPU check machine: one GPU, so one rank). Every communicator has
 * exactly one rank; collectives copy their send buffer to the receive buffer; nonblocking calls
 * complete at once. It cannot launch or join several processes, and says so: a world of more
 * than one rank is impossible here by construction. Used only by tests/device/CMakeLists.txt.
 */
#ifndef DMUON_SERIAL_MPI_H
#define DMUON_SERIAL_MPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Info;
typedef int MPI_Errhandler;
typedef struct {
  int MPI_SOURCE, MPI_TAG, MPI_ERROR;
} MPI_Status;
typedef void(MPI_User_function)(void* in, void* inout, int* len, MPI_Datatype* type);

#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 15
#define MPI_MAX_ERROR_STRING 256
#define MPI_MAX_PROCESSOR_NAME 256
#define MPI_UNDEFINED (-32766)

#define MPI_COMM_NULL 0
#define MPI_COMM_WORLD 1
#define MPI_COMM_SELF 2
#define MPI_COMM_TYPE_SHARED 1
#define MPI_INFO_NULL 0
#define MPI_REQUEST_NULL 0
#define MPI_ERRORS_RETURN 1
#define MPI_ERRORS_ARE_FATAL 2

#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

#define MPI_DATATYPE_NULL 0
#define MPI_CHAR 1
#define MPI_BYTE 2
#define MPI_INT 3
#define MPI_FLOAT 4
#define MPI_DOUBLE 5
#define MPI_INT64_T 6
#define MPI_UINT64_T 7
#define MPI_UINT16_T 8
#define MPI_UNSIGNED_LONG_LONG 9
#define MPI_LONG 10
#define MPI_DOUBLE_INT 11 /* struct { double; int; } */

#define MPI_OP_NULL 0
#define MPI_SUM 1
#define MPI_MAX 2
#define MPI_MIN 3
#define MPI_MAXLOC 4

#define MPI_IN_PLACE ((void*)1)
#define MPI_STATUS_IGNORE ((MPI_Status*)0)
#define MPI_STATUSES_IGNORE ((MPI_Status*)0)

int MPI_Init(int* argc, char*** argv);
int MPI_Init_thread(int* argc, char*** argv, int required, int* provided);
int MPI_Initialized(int* flag);
int MPI_Finalized(int* flag);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int code);
int MPI_Error_string(int code, char* text, int* len);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler handler);
int MPI_Get_processor_name(char* name, int* len);

int MPI_Comm_rank(MPI_Comm comm, int* rank);
int MPI_Comm_size(MPI_Comm comm, int* size);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out);
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out);
int MPI_Comm_free(MPI_Comm* comm);
int MPI_Barrier(MPI_Comm comm);

int MPI_Op_create(MPI_User_function* fn, int commute, MPI_Op* op);
int MPI_Op_free(MPI_Op* op);

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int MPI_Reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm);
int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm);
int MPI_Gather(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm);
int MPI_Gatherv(const void* send, int scount, MPI_Datatype stype, void* recv, const int* rcounts,
                const int* displs, MPI_Datatype rtype, int root, MPI_Comm comm);
int MPI_Scatter(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm);
int MPI_Allgather(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm);

int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* req);
int MPI_Ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* req);
int MPI_Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request* req);
int MPI_Igather(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int MPI_Iscatter(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int MPI_Iallgather(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int MPI_Ialltoall(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int MPI_Ireduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request* req);
int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request* req);
int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request* req);
int MPI_Wait(MPI_Request* req, MPI_Status* status);
int MPI_Waitall(int n, MPI_Request* reqs, MPI_Status* statuses);
int MPI_Test(MPI_Request* req, int* flag, MPI_Status* status);
int MPI_Testall(int n, MPI_Request* reqs, int* flag, MPI_Status* statuses);

#ifdef __cplusplus
}
#endif

#endif /* DMUON_SERIAL_MPI_H */
