"""Walk a run's cell plan: the declared blocks, then (``--until-decided``) a mirrored pair of blocks at a time for the
cells still undecided, up to ``--max-blocks``; every look is journaled."""

from __future__ import annotations

from specharness._errors import EngineDied
from specharness.experiment.cell import run_cell
from specharness.experiment.context import RunContext, UndecidedFn
from specharness.experiment.design import plan_cells
from specharness.experiment.plan import BLOCKS_PER_LOOK, CellPlan
from specharness.experiment.rounds import run_rounds
from specharness.records import LookEvent

__all__ = ["run_cells", "run_plan"]


def run_cells(ctx: RunContext, plans: list[CellPlan], done: set[str]) -> None:
    """Measure every arm of every planned cell not in ``done`` (keys), adding each to ``done``; a dead engine stops
    the run (:class:`~specharness._errors.EngineDied`); an arm whose engine never started has no cells. An arm's
    cell starts once the engine measured before it has been quiet for the profile's ``settle_s`` (``ctx.quiet``);
    with the profile's ``interleave``, a closed-loop cell's arms take turns round by round
    (:func:`~specharness.experiment.rounds.run_rounds`)."""
    for plan in plans:
        arms = tuple(a for a in plan.arm_order if plan.key(a) not in done and a not in ctx.engines.failed)
        if ctx.profile.interleave and not plan.load.open_loop and len(arms) > 1:
            cells = run_rounds(ctx, plan, arms)
        else:
            cells = []
            for arm in arms:
                ctx.quiet.wait_for(arm)
                cell = run_cell(ctx, plan, arm)
                ctx.quiet.ended(arm)
                cells.append(cell)
                if not cell.valid:
                    break
        for cell in cells:
            if not cell.valid:
                raise EngineDied(
                    f"{cell.invalid_reason}; the run stopped; finish it with 'specharness run --resume {ctx.out_dir}'"
                )
            done.add(plan.key(cell.arm))


def run_plan(ctx: RunContext, done: set[str], undecided: UndecidedFn | None) -> None:
    """The declared blocks; then, with --until-decided, two more blocks (a mirrored pair) at a time for the cells
    ``undecided`` names, up to --max-blocks. Every look is journaled."""
    p = ctx.profile
    run_cells(ctx, plan_cells(p), done)
    if not p.until_decided or undecided is None or p.max_blocks is None:
        return
    blocks = p.blocks
    while blocks < p.max_blocks:
        open_cells = undecided(ctx.out_dir)
        ctx.journal.write(LookEvent(blocks=blocks, undecided=_labels(open_cells)))
        if not open_cells:
            return
        more = plan_cells(p, range(blocks, blocks + BLOCKS_PER_LOOK))
        run_cells(ctx, [plan for plan in more if (plan.workload, plan.load.label) in open_cells], done)
        blocks += BLOCKS_PER_LOOK
    ctx.journal.write(LookEvent(blocks=blocks, undecided=_labels(undecided(ctx.out_dir))))


def _labels(cells: set[tuple[str, str]]) -> list[str]:
    return sorted(f"{w}/{load}" for w, load in cells)
