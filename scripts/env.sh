# Source me: puts the built executables on PATH and sets the Open MPI environment that makes
# `mpirun -n 8 ...` work on a small machine (oversubscribed, as root, shared-memory transport).
_dmuon_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="${DMUON_BUILD_DIR:-$_dmuon_root/build}/bin:$PATH"
export OMPI_MCA_rmaps_base_oversubscribe="${OMPI_MCA_rmaps_base_oversubscribe:-1}"
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}"
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
# Single-copy transfers (CMA) where the kernel allows them: a large message then moves in one
# progress call of the receiver instead of a handshake per 32 KiB fragment on both sides, which
# halves the exposed communication of the host engine (README "The step schedule on 2 ranks").
if [ -z "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" ]; then
  OMPI_MCA_btl_vader_single_copy_mechanism="$(python3 "$_dmuon_root/scripts/mpi_single_copy.py" 2>/dev/null || echo none)"
fi
export OMPI_MCA_btl_vader_single_copy_mechanism
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
unset _dmuon_root
