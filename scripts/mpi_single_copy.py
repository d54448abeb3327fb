#!/usr/bin/env python3
"""Prints the single-copy mechanism Open MPI's shared-memory transport (btl vader) can use here.

"cma" when Linux cross-memory attach works between two processes of this user (the receiver
reads a large message straight out of the sender's memory in one call, so a transfer needs
one progress call on the receiver instead of one handshake per 32 KiB fragment on both sides),
"none" where the kernel or a container forbids it (process_vm_readv fails: a seccomp filter,
Yama ptrace_scope >= 2). scripts/env.sh and scripts/validate_projection.py take this choice,
so calibration and measurement use the same transport; dmuon_bench records it in its
provenance (transport_settings).

usage: mpi_single_copy.py [--help]
Exit codes: 0 printed, 2 bad arguments.
"""
import ctypes
import os
import sys

PROG = "mpi_single_copy.py"


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def yama_allows() -> bool:
    # Open MPI lifts ptrace_scope 1 for its peers (prctl PR_SET_PTRACER); 2 and 3 it cannot.
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip() or "0") <= 1
    except (OSError, ValueError):
        return True  # no Yama


def cross_memory_attach_works() -> bool:
    """Reads 8 bytes out of a forked child with process_vm_readv."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        readv = libc.process_vm_readv
    except (OSError, AttributeError):
        return False
    readv.restype = ctypes.c_ssize_t
    readv.argtypes = [ctypes.c_int, ctypes.POINTER(IoVec), ctypes.c_ulong,
                      ctypes.POINTER(IoVec), ctypes.c_ulong, ctypes.c_ulong]
    source = ctypes.create_string_buffer(b"dmuon-cm", 8)
    target = ctypes.create_string_buffer(8)
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child keeps its copy of `source` mapped until the parent has read it
        os.close(hold_w)
        os.read(hold_r, 1)
        os._exit(0)
    os.close(hold_r)
    try:
        local = IoVec(ctypes.cast(target, ctypes.c_void_p), 8)
        remote = IoVec(ctypes.cast(source, ctypes.c_void_p), 8)
        n = readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        return n == 8 and target.raw == b"dmuon-cm"
    finally:
        os.write(hold_w, b"x")
        os.close(hold_w)
        os.waitpid(pid, 0)


def mechanism() -> str:
    return "cma" if yama_allows() and cross_memory_attach_works() else "none"


def main(argv):
    if argv in (["--help"], ["-h"]):
        print(__doc__.strip())
        return 0
    if argv:
        print(f"{PROG}: error: unexpected argument '{argv[0]}' (valid: --help)", file=sys.stderr)
        return 2
    print(mechanism())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
