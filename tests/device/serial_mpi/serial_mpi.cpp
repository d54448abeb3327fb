// The one-process MPI of mpi.h: one rank everywhere, collectives are copies.
#include "mpi.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool g_initialized = false;
bool g_finalized = false;
int g_next_comm = 3;  // after NULL, WORLD, SELF

struct DoubleInt {  // MPI_DOUBLE_INT's memory layout
  double d;
  int i;
};

std::size_t type_size(MPI_Datatype t) {
  switch (t) {
    case MPI_CHAR:
    case MPI_BYTE: return 1;
    case MPI_UINT16_T: return 2;
    case MPI_INT:
    case MPI_FLOAT: return 4;
    case MPI_DOUBLE:
    case MPI_INT64_T:
    case MPI_UINT64_T:
    case MPI_UNSIGNED_LONG_LONG:
    case MPI_LONG: return 8;
    case MPI_DOUBLE_INT: return sizeof(DoubleInt);
    default: return 0;
  }
}

int valid(MPI_Comm c) {
  return c == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

// recv = send (count elements), unless in place or the same buffer.
int copy(const void* send, void* recv, int count, MPI_Datatype type) {
  if (count < 0 || type_size(type) == 0) return MPI_ERR_OTHER;
  if (send != MPI_IN_PLACE && send != recv && count > 0)
    std::memmove(recv, send, static_cast<std::size_t>(count) * type_size(type));
  return MPI_SUCCESS;
}

int done(MPI_Request* req, int rc) {
  if (req) *req = MPI_REQUEST_NULL;
  return rc;
}

}  // namespace

extern "C" {

int MPI_Init(int*, char***) {
  g_initialized = true;
  return MPI_SUCCESS;
}
int MPI_Init_thread(int*, char***, int required, int* provided) {
  g_initialized = true;
  if (provided) *provided = required;
  return MPI_SUCCESS;
}
int MPI_Initialized(int* flag) {
  *flag = g_initialized ? 1 : 0;
  return MPI_SUCCESS;
}
int MPI_Finalized(int* flag) {
  *flag = g_finalized ? 1 : 0;
  return MPI_SUCCESS;
}
int MPI_Finalize(void) {
  g_finalized = true;
  return MPI_SUCCESS;
}
int MPI_Abort(MPI_Comm, int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code == 0 ? 1 : code);
}
int MPI_Error_string(int code, char* text, int* len) {
  const int n = std::snprintf(text, MPI_MAX_ERROR_STRING, "serial MPI error %d", code);
  *len = n;
  return MPI_SUCCESS;
}
int MPI_Comm_set_errhandler(MPI_Comm c, MPI_Errhandler) {
  return valid(c);
}
int MPI_Get_processor_name(char* name, int* len) {
  std::snprintf(name, MPI_MAX_PROCESSOR_NAME, "localhost");
  *len = static_cast<int>(std::strlen(name));
  return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm c, int* rank) {
  *rank = 0;
  return valid(c);
}
int MPI_Comm_size(MPI_Comm c, int* size) {
  *size = 1;
  return valid(c);
}
int MPI_Comm_dup(MPI_Comm c, MPI_Comm* out) {
  *out = g_next_comm++;
  return valid(c);
}
int MPI_Comm_split(MPI_Comm c, int color, int, MPI_Comm* out) {
  *out = color == MPI_UNDEFINED ? MPI_COMM_NULL : g_next_comm++;
  return valid(c);
}
int MPI_Comm_split_type(MPI_Comm c, int type, int, MPI_Info, MPI_Comm* out) {
  *out = type == MPI_UNDEFINED ? MPI_COMM_NULL : g_next_comm++;
  return valid(c);
}
int MPI_Comm_free(MPI_Comm* c) {
  *c = MPI_COMM_NULL;
  return MPI_SUCCESS;
}
int MPI_Barrier(MPI_Comm c) {
  return valid(c);
}

// With one rank a reduction applies its operation to nothing: the result is the input.
int MPI_Op_create(MPI_User_function*, int, MPI_Op* op) {
  *op = 100;
  return MPI_SUCCESS;
}
int MPI_Op_free(MPI_Op* op) {
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}

int MPI_Bcast(void*, int count, MPI_Datatype type, int root, MPI_Comm c) {
  return root != 0 || count < 0 || type_size(type) == 0 ? MPI_ERR_OTHER : valid(c);
}
int MPI_Reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op, int root,
               MPI_Comm c) {
  return root != 0 ? MPI_ERR_OTHER : (valid(c) ? MPI_ERR_OTHER : copy(send, recv, count, type));
}
int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op, MPI_Comm c) {
  return valid(c) ? MPI_ERR_OTHER : copy(send, recv, count, type);
}
int MPI_Gather(const void* send, int scount, MPI_Datatype stype, void* recv, int, MPI_Datatype,
               int root, MPI_Comm c) {
  return root != 0 ? MPI_ERR_OTHER : (valid(c) ? MPI_ERR_OTHER : copy(send, recv, scount, stype));
}
// One rank: its block lands at displs[0] (in elements of the receive type, here the send's).
int MPI_Gatherv(const void* send, int scount, MPI_Datatype stype, void* recv, const int*,
                const int* displs, MPI_Datatype, int root, MPI_Comm c) {
  if (root != 0 || valid(c)) return MPI_ERR_OTHER;
  return copy(send,
              static_cast<char*>(recv) + static_cast<std::size_t>(displs[0]) * type_size(stype),
              scount, stype);
}
int MPI_Scatter(const void* send, int, MPI_Datatype, void* recv, int rcount, MPI_Datatype rtype,
                int root, MPI_Comm c) {
  if (root != 0 || valid(c)) return MPI_ERR_OTHER;
  return recv == MPI_IN_PLACE ? MPI_SUCCESS : copy(send, recv, rcount, rtype);
}
int MPI_Allgather(const void* send, int scount, MPI_Datatype stype, void* recv, int, MPI_Datatype,
                  MPI_Comm c) {
  return valid(c) ? MPI_ERR_OTHER : copy(send, recv, scount, stype);
}

int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c, MPI_Request* req) {
  return done(req, MPI_Bcast(buf, count, type, root, c));
}
int MPI_Ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm c, MPI_Request* req) {
  return done(req, MPI_Reduce(send, recv, count, type, op, root, c));
}
int MPI_Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm c, MPI_Request* req) {
  return done(req, MPI_Allreduce(send, recv, count, type, op, c));
}
int MPI_Igather(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm c, MPI_Request* req) {
  return done(req, MPI_Gather(send, scount, stype, recv, rcount, rtype, root, c));
}
int MPI_Iscatter(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm c, MPI_Request* req) {
  return done(req, MPI_Scatter(send, scount, stype, recv, rcount, rtype, root, c));
}
int MPI_Iallgather(const void* send, int scount, MPI_Datatype stype, void* recv, int rcount,
                   MPI_Datatype rtype, MPI_Comm c, MPI_Request* req) {
  return done(req, MPI_Allgather(send, scount, stype, recv, rcount, rtype, c));
}
int MPI_Ialltoall(const void* send, int scount, MPI_Datatype stype, void* recv, int, MPI_Datatype,
                  MPI_Comm c, MPI_Request* req) {
  return done(req, valid(c) ? MPI_ERR_OTHER : copy(send, recv, scount, stype));  // one rank
}
int MPI_Ireduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op,
                              MPI_Comm c, MPI_Request* req) {
  return done(req, valid(c) ? MPI_ERR_OTHER : copy(send, recv, count, type));
}
// Point to point needs another rank, which a one-process world never has.
int MPI_Isend(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request* req) {
  return done(req, MPI_ERR_OTHER);
}
int MPI_Irecv(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request* req) {
  return done(req, MPI_ERR_OTHER);
}
int MPI_Wait(MPI_Request* req, MPI_Status*) {
  return done(req, MPI_SUCCESS);
}
int MPI_Waitall(int n, MPI_Request* reqs, MPI_Status*) {
  for (int i = 0; i < n; ++i) reqs[i] = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}
int MPI_Test(MPI_Request* req, int* flag, MPI_Status*) {
  *flag = 1;
  return done(req, MPI_SUCCESS);
}
int MPI_Testall(int n, MPI_Request* reqs, int* flag, MPI_Status*) {
  *flag = 1;
  return MPI_Waitall(n, reqs, nullptr);
}

}  // extern "C"
