"""Stage 4 of :func:`mcsim.simulate`: the units of work, (configuration, run range) tasks.

A task names the rows it asks for and nothing else: the backends look its
simulator up by its key ``(config, optimize_every)`` in the prepared mapping
(:attr:`mcsim.model.preparation.Prepared.rows`). Its rows depend on nothing but
that simulator and the seed: run r always draws from the streams of ``(seed, r)``.

Two kinds of task share this one type: the runs that are reported, and the
grid points of the checkpoint interval optimiser (``interval = "optimize"``),
which run the configuration with a fixed interval (``optimize_every``
iterations) on the streams of ``seed + 1`` (so the reported runs are not the
ones the interval was tuned on). Both go through the same backends, progress
bar and resume store.

With parameter draws (:mod:`mcsim.scenario.draws`) a task's rows are placed by
:func:`placements`: ``(simulated configuration, first run, stop run, first row,
stop row)`` pieces, computed here once, before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcsim.engine.options import DEFAULT_CHUNK_RUNS, check_chunk_runs

if TYPE_CHECKING:
    from mcsim.scenario.draws import DrawPlan

# The optimiser's grid points use the streams of seed + OPTIMIZE_SEED_OFFSET.
OPTIMIZE_SEED_OFFSET = 1

# Where a task's rows go: (simulated configuration, first run, stop run, first row, stop row).
Piece = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Task:
    """Runs ``start .. stop - 1`` of configuration ``config`` (flat index in the sweep).

    ``optimize_every`` (None for the reported runs) makes the task a grid point of
    the interval optimiser: the configuration with a checkpoint every
    ``optimize_every`` iterations, on the streams of ``seed + OPTIMIZE_SEED_OFFSET``.
    With draw tables, ``config`` is the sweep configuration and ``start .. stop - 1``
    a range of its ``draws x runs`` rows.
    """

    config: int
    start: int
    stop: int
    optimize_every: int | None = None

    @property
    def name(self) -> str:
        """File-name-safe identifier, distinct for every distinct task."""
        if self.optimize_every is None:
            return f"c{self.config}-r{self.start}-{self.stop}"
        return f"c{self.config}-k{self.optimize_every}-r{self.start}-{self.stop}"

    @property
    def runs(self) -> int:
        """Number of runs."""
        return self.stop - self.start

    @property
    def key(self) -> tuple[int, int | None]:
        """Key of its row simulator: ``(config, optimize_every)``."""
        return (self.config, self.optimize_every)


def plan_tasks(
    configs: list[int], runs: int, chunk_runs: int = DEFAULT_CHUNK_RUNS, optimize_every: int | None = None
) -> list[Task]:
    """Tasks covering ``runs`` runs of each configuration in ``configs``, ``chunk_runs`` at a time."""
    check_chunk_runs(chunk_runs)
    return [
        Task(c, start, min(runs, start + chunk_runs), optimize_every)
        for c in configs
        for start in range(0, runs, chunk_runs)
    ]


def plan_sweep_tasks(draws: DrawPlan, feasible: list[int], chunk_runs: int) -> list[Task]:
    """The reported tasks of a sweep: its feasible simulated configurations ``feasible``, every run.

    Without draws, :func:`plan_tasks`. With draw tables: tasks over each sweep configuration's rows,
    ``chunk_runs // runs`` whole feasible draws at a time (consecutive ones), or, when
    ``chunk_runs < runs``, pieces of ``chunk_runs`` runs of one draw. Otherwise: the runs of every
    (configuration, draw) (``flat * draws + d``) in chunks, on their draw's global runs.
    """
    check_chunk_runs(chunk_runs)
    runs = draws.runs
    if not draws.count:
        return plan_tasks(feasible, runs, chunk_runs)
    if not draws.tabled:
        first = [int(f) for f in draws.first_runs]
        return [
            Task(c, first[c % draws.count] + s, first[c % draws.count] + min(runs, s + chunk_runs))
            for c in feasible
            for s in range(0, runs, chunk_runs)
        ]
    per_task = max(1, chunk_runs // runs)
    groups: dict[int, list[list[int]]] = {}
    for c in feasible:
        flat, d = divmod(c, draws.count)
        spans = groups.setdefault(flat, [])
        if spans and spans[-1][-1] == d - 1 and len(spans[-1]) < per_task:
            spans[-1].append(d)
        else:
            spans.append([d])
    tasks: list[Task] = []
    for flat, spans in groups.items():
        for span in spans:
            if chunk_runs >= runs:
                tasks.append(Task(flat, span[0] * runs, (span[-1] + 1) * runs))
            else:
                tasks += [
                    Task(flat, span[0] * runs + s, span[0] * runs + min(runs, s + chunk_runs))
                    for s in range(0, runs, chunk_runs)
                ]
    return tasks


def _pieces(draws: DrawPlan, task: Task) -> list[Piece]:
    """Where the rows of ``task`` go (see :data:`Piece`)."""
    if not draws.count:
        return [(task.config, task.start, task.stop, 0, task.runs)]
    if not draws.tabled:
        first = int(draws.first_runs[task.config % draws.count])
        return [(task.config, task.start - first, task.stop - first, 0, task.runs)]
    runs, pieces = draws.runs, []
    q = task.start
    while q < task.stop:
        d, r = divmod(q, runs)
        stop = min(task.stop, (d + 1) * runs)
        pieces.append((task.config * draws.count + d, r, r + stop - q, q - task.start, stop - task.start))
        q = stop
    return pieces


def placements(draws: DrawPlan, tasks: list[Task]) -> dict[Task, list[Piece]]:
    """Where each task's rows go: a list of :data:`Piece` per task, every feasible run exactly once."""
    return {task: _pieces(draws, task) for task in tasks}
