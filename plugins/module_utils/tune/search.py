"""Measured tuning: which flags make this host fastest, decided between measurements (stdlib only, Python 3.8+).

tune.yml restarts the host with a candidate's flags, measures it and asks this module what to do next.
The state between the calls is plain JSON (dicts, lists, numbers, strings, None), so a playbook keeps
it in a fact or a file, and bench/tune_offline.py drives the same code offline::

    state = plan(space, incumbent, budget_s, {"restart_s": 180, "measure_s": 60})
    while next_step(state)["action"] != "done":
        step = next_step(state)   # restart with step["candidate"] when step["restart"], measure
        state = record(state, step["candidate"], figures)   # step["measurements"] figures, or why it failed

The search is coordinate descent: one flag at a time, in the space's order, from the incumbent (the
flags the host runs). An ordered flag is walked outward from the best value so far, up and down in
turn, and a direction stops at a value clearly worse than the best (one peak per flag is assumed, as
speculative steps and batch sizes have). A categorical flag tries each value. Every candidate gets one
measurement; a value is dropped as soon as it is clearly worse than the flag's leader (the highest
figure): the verify gates' comparison (noise.compare_runs, one-sided at ``alpha``, a gap of at least
``min_effect``) says so. Measuring again is kept for what decides the flag. A candidate whose one
figure leads the flag, or trails its leader by less than one standard error of their difference, is
measured again at once, while it still runs (a measurement's cost, no restart), until its level is
known within ``min_effect`` at the host's noise (_known: 1 measurement on a quiet host, 3-4 at 2 %),
and before anything is dropped against it: at 2 % noise one figure is as likely to be a lucky draw as
a better value, and a lucky leader would drop the values it only seems to beat, ending their
direction. Then the value the flag would take now against the leader, up to ``max_measurements``
each. The flag takes the first value, in the space's order,
whose figure is within ``tie`` (1 %) of the leader's: ties go to the smaller value, as vLLM's
tune_speculative_k gives ties within 1 % to the smaller K (a smaller value also leaves memory to the other
flags). When a pass over the flags moved anything, a second pass starts from the new best (flags
interact). Ties with the incumbent go to the incumbent: the result must beat it beyond the noise, and
so must each of its changes: the best without it must be clearly worse (_start_earn), or it is dropped.

A candidate that does not start (a crash, out of memory, a failed health wait) is recorded with the
reason the caller gives and never started again. In a ``memory_up`` flag (larger values take more
memory) every configuration that takes at least as much memory in each such flag, the other flags
equal, is skipped: it would fail the same way.

The best found is a win only when it beats the incumbent on the search's measurements **and** on a
confirmation: a fresh restart of it, measured again and judged alone against the incumbent. The search's
figure of the best is the largest of many noisy figures (the winner's curse); the confirmation is not
selected, so its one-sided test holds its ``alpha``. When the best leads the incumbent but within the
noise, the incumbent and then the best are measured again (up to _sized) before the claim is judged.
The confirmation and the incumbent's second series are sized to the noise when the claim is made
(before any of their figures): the fewest measurements whose comparison detects twice ``min_effect``
with ``power`` (compare_runs' ``detectable``), ``confirm_measurements`` / ``incumbent_measurements``
at least, ``most_measurements`` at most, fewer when the budget left does not hold them. The
run-to-run noise is the caller's prior (the host's verify history, or the verify gates' stated prior)
moderated with what the search's own repeated measurements show (noise.run_noise, noise.moderate).

Every measurement costs ``measure_s``, a restart ``restart_s`` (the caller's cost model); the plan says
up front which candidates fit the budget, and the search never starts a measurement that would leave
too little for the confirmation (as large as the noise measured so far sizes it).
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import statistics

from ansible_collections.sglang.fleet.plugins.module_utils.verify import noise

VERSION = 1

# alpha 0.05: the confirmation is judged alone on measurements the search did not select, so a
# configuration no faster than the incumbent is declared a win at most 5 % of the times it gets that far,
# and it must have beaten the incumbent on the search's measurements first. A stricter alpha costs a GPU
# host a third measurement per confirmation for the same gains. min_effect 0.02: a win restarts the host
# through a rollout; below 2 % a GPU host's run-to-run noise (1-2 %) needs more measurements than a tune
# has to tell. tie 0.01: while searching, values within 1 % of the leader go to the smaller one (vLLM's
# rule); the result still has to beat the incumbent by min_effect, significantly. The noise prior is the
# verify gates' (run_noise_prior_pct 2, run_noise_prior_dof 4): a CPU host gives its own (cpu1: 20 %).
# grid_share 0.25: the search never takes more than a quarter of measuring every configuration once,
# except on a grid of small_grid configurations or fewer (one or two flags), where that would leave
# room for a candidate or two: there the budget alone bounds it. earn_tie 0.005: a change of a
# several-flag best worth no more than 0.5 % alone is left out (_start_earn); at 1 % the winners of
# bench/tune_offline.py at 1 % noise reached 97 % of the optimum on 89 % of surfaces (92 % without the
# check), at 0.5 % on 90 %, while winners carrying a change truly worth nothing fell from 38 to 20.
# most_measurements 8: the most the noise may ask of one series (a follow-up, the confirmation, the
# incumbent's second series); at a GPU host's 2 % the confirmation and the incumbent's second series
# take 8 each, at 1 % mostly 2-5 (bench/tune_offline.md).
DEFAULTS = {
    "alpha": 0.05,
    "min_effect": 0.02,
    "tie": 0.01,
    "earn_tie": 0.005,
    "power": 0.95,
    "incumbent_measurements": 2,
    "max_measurements": 3,
    "confirm_measurements": 2,
    "passes": 2,
    "noise_sigma": 0.02,
    "noise_dof": 4,
    "pair_moves": 4,
    "pair_rounds": 3,
    "race": 3,
    "race_measurements": 4,
    "grid_share": 0.25,
    "small_grid": 12,
    "most_measurements": 8,
}
# What a configuration that ran out of memory says (PyTorch's, CUDA's and SGLang's own wording): only
# such a failure rules out the configurations that take more memory; a crash for another reason rules
# out nothing but itself.
OUT_OF_MEMORY = ("out of memory", "outofmemoryerror", "not enough memory", "cudaerrormemoryallocation")
# What a candidate that ran but may not be used is recorded with (tune/checks.py: over a latency limit, its
# outputs not the incumbent's): infeasible like a crash, with words that say it ran.
HELD_BACK = ("over its latency limit", "changes outputs")
FINAL = ("dropped", "infeasible", "skipped")   # a configuration in one of these is never measured again
VERDICTS = {"new": "not tried", "skipped": "not tried"}   # a row's verdict where it is not the status


# ---------------------------------------------------------------------------------------------- inputs

def normalise_space(space, incumbent):
    """The space as a list of {flag, values, ordered, memory_up}, checked against the incumbent.
    ``space``: a list of such dicts, or a dict of flag -> values list (or -> such a dict without the
    flag), as an inventory writes it. ``ordered`` defaults to True when every value is a number; an
    ordered flag's values must ascend. Raises ValueError saying what to fix."""
    if not isinstance(incumbent, dict):
        raise ValueError("the incumbent must be a dict of the flags the host runs now (flag -> value)")
    space = space_dims(space)
    if not isinstance(space, list):
        raise ValueError("the tuning space must be a list of {flag, values} or a dict of flag -> list of values")
    dims, seen = [], set()
    for dim in space:
        flag = dim.get("flag") if isinstance(dim, dict) else None
        if not isinstance(flag, str) or not flag:
            raise ValueError(f"each flag of the tuning space needs a name (flag): {dim!r}")
        if flag in seen:
            raise ValueError(f"{flag} appears twice in the tuning space: give it once with all its values")
        seen.add(flag)
        values = dim.get("values")
        if not isinstance(values, list) or not values:
            raise ValueError(f"{flag}: give a list of values to try")
        if any(not _scalar(v) for v in values) or len({_key(v) for v in values}) != len(values):
            raise ValueError(f"{flag}: values must be distinct numbers, strings, booleans or null: {values!r}")
        numeric = all(_number(v) for v in values)
        ordered = dim.get("ordered", numeric)
        memory_up = bool(dim.get("memory_up", False))
        if ordered and (not numeric or any(b <= a for a, b in zip(values, values[1:]))):
            raise ValueError(f"{flag}: an ordered flag's values must be numbers in ascending order: {values!r}")
        if memory_up and not ordered:
            raise ValueError(f"{flag}: memory_up needs an ordered flag (larger values take more memory)")
        if flag not in incumbent or _key(incumbent[flag]) not in {_key(v) for v in values}:
            raise ValueError(f"{flag}: the incumbent's value {incumbent.get(flag)!r} is not among {values!r}: add the "
                             "value the host runs now (the release's default where the flag is unset)")
        dims.append({"flag": flag, "values": list(values), "ordered": bool(ordered), "memory_up": memory_up})
    if not any(len(d["values"]) > 1 for d in dims):
        raise ValueError("the tuning space is empty: give at least one flag with a value other than the incumbent's "
                         "(sglang_tune_space)")
    return dims


def space_dims(space):
    """An inventory's space, a dict of flag -> values (or -> {values, ordered, memory_up}), as the list of
    {flag, values, ...} the search keeps; a list (or anything else) as it is. normalise_space checks it."""
    if isinstance(space, dict):
        return [dict(v, flag=k) if isinstance(v, dict) else {"flag": k, "values": v} for k, v in space.items()]
    return space


def measurement_cost(cost_model, measurements, restart=True):
    """Seconds a series takes: a restart (when the server must start with other flags) and its measurements."""
    return (cost_model["restart_s"] if restart else 0.0) + measurements * cost_model["measure_s"]


def budget_plan(budget_s, cost_model, settings, candidates):
    """What fits the budget, said up front: the incumbent's series, then ``candidates`` (in the order the
    search tries them) at one restart and one measurement each, with the confirmation's series kept back.
    Returns {fits, beyond (lists of the candidates), incumbent_s, candidate_s, confirm_s, budget_s,
    message}. Raises ValueError when the budget does not hold the incumbent, or not one candidate and
    the confirmation besides, saying how much it needs."""
    first = measurement_cost(cost_model, settings["incumbent_measurements"])
    one = measurement_cost(cost_model, 1)
    # the confirmation kept back: the incumbent measured again right before it (the drift check), then the best
    confirm = first + measurement_cost(cost_model, settings["confirm_measurements"])
    if budget_s < first:
        raise ValueError(f"a budget of {_duration(budget_s)} is too short for even the incumbent's measurement "
                         f"(a restart {_duration(cost_model['restart_s'])} and {settings['incumbent_measurements']} x "
                         f"{_duration(cost_model['measure_s'])} = {_duration(first)}): give more time "
                         "(sglang_tune_budget_minutes)")
    if budget_s < first + one + confirm:
        raise ValueError(f"a budget of {_duration(budget_s)} holds the incumbent's measurement but no candidate and "
                         f"its confirmation: give at least {_duration(first + one + confirm)} "
                         "(sglang_tune_budget_minutes)")
    count = min(len(candidates), int((budget_s - first - confirm) // one))
    fits, beyond = list(candidates[:count]), list(candidates[count:])
    message = (f"{len(fits)} of {len(candidates)} candidates fit in {_duration(budget_s)} at one measurement each "
               f"(the incumbent {_duration(first)}, each candidate {_duration(one)}, the incumbent's second series "
               f"and the confirmation {_duration(confirm)} kept back)")
    if beyond:
        message += "; not " + ", ".join(f"{c['flag']}={c['value']}" for c in beyond[:8]) + (" ..." if len(beyond) > 8 else "")
    return {"fits": fits, "beyond": beyond, "incumbent_s": first, "candidate_s": one, "confirm_s": confirm,
            "budget_s": budget_s, "message": message}


# ------------------------------------------------------------------------------------------- the API

def plan(space, incumbent, budget_s, cost_model, settings=None):
    """The search's first state, and its plan: which candidates fit ``budget_s`` (seconds) at
    ``cost_model`` ({restart_s, measure_s}). ``settings`` overrides DEFAULTS (alpha, min_effect,
    incumbent_measurements, max_measurements, confirm_measurements, passes, noise_sigma, noise_dof: the
    host's run-to-run noise prior). Raises ValueError for an empty or malformed space, an incumbent
    outside it, a budget too short."""
    cfg = _settings(settings)
    cost = _cost_model(cost_model)
    if not _number(budget_s) or budget_s <= 0:
        raise ValueError(f"the budget must be a positive number of seconds: {budget_s!r}")
    dims = normalise_space(space, incumbent)
    incumbent = dict(incumbent)
    queue = []
    for dim in dims:
        start = _position(dim, incumbent[dim["flag"]])
        queue += [{"flag": dim["flag"], "value": dim["values"][p]} for p in _try_order(dim, start)]
    budget = budget_plan(float(budget_s), cost, cfg, queue)
    # never more than grid_share of what measuring every configuration once would take: past that, an
    # exhaustive search is the better use of the time (and what the search must beat)
    grid_s = math.prod(len(d["values"]) for d in dims) * measurement_cost(cost, 1)
    least = budget["incumbent_s"] + budget["candidate_s"] + budget["confirm_s"]
    configurations = math.prod(len(d["values"]) for d in dims)
    limit = float(budget_s) if configurations <= cfg["small_grid"] else min(float(budget_s), max(cfg["grid_share"] * grid_s, least))
    if limit < budget_s:
        budget = budget_plan(limit, cost, cfg, queue)
        budget["message"] += (f"; the search stops at {cfg['grid_share'] * 100:g} % of the "
                              f"{_duration(grid_s)} that measuring all {math.prod(len(d['values']) for d in dims)} "
                              f"configurations once would take ({_duration(budget_s)} given; grid_share 1 lifts it, and a grid "
                              "this small may be better measured whole)")
    key = _key(incumbent)
    state = {
        "version": VERSION, "space": dims, "incumbent": incumbent, "incumbent_key": key, "settings": cfg,
        "cost": cost, "budget_s": limit, "asked_budget_s": float(budget_s), "grid_s": grid_s, "used_s": 0.0, "measurements": 0, "restarts": 0,
        "plan": budget, "configs": {key: _config(incumbent, "incumbent", 0)}, "best": key, "running": None,
        "phase": "incumbent", "cursor": None, "out_of_time": False, "claim": None, "confirm": None,
        "pairs": None, "race": None, "earn": None, "drift": None,
        "noise": {"sigma": cfg["noise_sigma"], "dof": cfg["noise_dof"], "basis": "the prior"},
        "result": None,
    }
    state["next"] = {"action": "measure", "candidate": incumbent, "measurements": cfg["incumbent_measurements"],
                     "restart": True, "why": "the incumbent first: every candidate is compared with it"}
    state["progress"] = _progress(state)
    return state


def next_step(state):
    """What the playbook does now: {"action": "measure" | "confirm", "candidate": flags, "measurements":
    how many, "restart": whether to restart with these flags first, "why", "progress"}, or {"action":
    "done", "result", "progress"}. Reads the state only."""
    return dict(copy.deepcopy(state["next"]), progress=copy.deepcopy(state["progress"]))


def record(state, candidate, outcome, seconds=None, measured=0, started=True):
    """The state after the step next_step asked for: ``candidate`` (its flags, as asked) measured with
    ``outcome`` -- its figure (a number, or a list of one per measurement; higher is better, e.g. output
    tok/s) -- or the reason it could not be measured (a string: the log line of a crash, an out of
    memory, a failed health wait), which makes it infeasible. ``seconds``: the time it took (default: the
    cost model's); ``measured``: with a reason, the measurements it took all the same (a candidate held back
    after it ran: HELD_BACK); ``started``: False for one refused before its restart (not counted as one).
    Returns a new state; the one passed is left as it was."""
    state = copy.deepcopy(state)
    step = state["next"]
    if step["action"] == "done":
        raise ValueError("the search is done: there is nothing more to record (next_step gives its result)")
    key = _key(candidate)
    if key != _key(step["candidate"]):
        raise ValueError(f"recorded {_changes_text(state, candidate)} but the search asked for "
                         f"{_changes_text(state, step['candidate'])}: record the candidate next_step gave")
    figures, reason = _outcome(outcome)
    taken = len(figures) or int(measured)
    state["used_s"] += float(seconds) if seconds is not None else (
        measurement_cost(state["cost"], taken, step["restart"]) if taken else state["cost"]["restart_s"])
    state["measurements"] += taken
    state["restarts"] += 1 if step["restart"] and started else 0
    state["running"] = key if figures else None
    if step["action"] == "confirm":
        state["confirm"] = {"key": key, "figures": figures, "why": reason}
        _learn_noise(state)
        _finish(state)
    elif state["phase"] == "drift":
        _drift(state, figures, reason)
    else:
        config = state["configs"][key]
        if reason:
            config.update(status="infeasible", why=reason)
        else:
            config["figures"] += figures
            config["status"] = "alive"
        _learn_noise(state)
        if state["phase"] == "incumbent":
            _start_search(state, reason)
        else:
            _advance(state)
    state["progress"] = _progress(state)
    return state


# ------------------------------------------------------------------------------------------ the search

def _start_search(state, reason):
    """After the incumbent's series: the first flag, or done when the incumbent could not run."""
    if reason and reason.startswith(HELD_BACK):
        _done(state, False, f"the incumbent itself is {reason}: a candidate must hold what the incumbent does not; "
                            "relax sglang_tune_limits, or tune at a lower load")
        return
    if reason:
        _done(state, False, f"the incumbent itself could not be measured ({reason}): there is nothing to compare "
                            "candidates with; fix the host first")
        return
    state["phase"] = "search"
    state["cursor"] = _cursor(state, 0, 1, False)
    _advance(state)


def _advance(state):
    """Decide the next step: screen the flag's next value, measure a contender again, or settle the flag
    and go on; at the end of the search, confirm the best or finish."""
    phase = {"pairs": _advance_pairs, "race": _advance_race, "earn": _advance_earn, "claim": _claim}.get(state["phase"])
    if phase:
        phase(state)
        return
    while True:
        cur = state["cursor"]
        if cur["dimension"] >= len(state["space"]):
            if cur["changed"] and cur["pass"] < state["settings"]["passes"]:
                state["cursor"] = _cursor(state, 0, cur["pass"] + 1, False)
                continue
            _start_pairs(state)
            return
        key, count = _follow_up(state), 1
        if key:
            count = _known(state) - len(state["configs"][key]["figures"])
            why = _follow_up_why(state, key, count)
        else:
            _drop_clearly_worse(state)
            key = _frontier(state)
            why = None
            if key:
                why = _screen_why(state, key)
            else:
                key = _again(state)
                if key:
                    why = _again_why(state, key)
        if key is None:
            _settle(state)
            continue
        if _ask(state, key, why, count):
            return
        _mark(state, key, "not tried", "out of time")
        _out_of_time(state)


def _cursor(state, dimension, pass_no, changed):
    """Where the search stands: which flag, from which configuration, and the values still to screen
    (for an ordered flag a direction up and one down, walked nearest first; for a categorical one the
    other values in the space's order)."""
    cur = {"pass": pass_no, "dimension": dimension, "changed": changed, "start": state["best"], "directions": []}
    if dimension >= len(state["space"]):
        return cur
    dim = state["space"][dimension]
    start = _position(dim, state["configs"][state["best"]]["flags"][dim["flag"]])
    n = len(dim["values"])
    if dim["ordered"]:
        cur["directions"] = [{"name": "up", "todo": list(range(start + 1, n)), "last": None, "taken": 0},
                             {"name": "down", "todo": list(range(start - 1, -1, -1)), "last": None, "taken": 0}]
    else:
        cur["directions"] = [{"name": "other", "todo": [p for p in range(n) if p != start], "last": None, "taken": 0}]
    return cur


def _frontier(state):
    """The next configuration of this flag to screen (one measurement), or None when none is left.
    Stops a direction past a value that was clearly worse (dropped) or, upward in a memory_up flag,
    infeasible; skips configurations an infeasible one rules out; reuses what was measured before."""
    cur = state["cursor"]
    dim = state["space"][cur["dimension"]]
    while True:
        open_ = [d for d in cur["directions"] if d["todo"]]
        if not open_:
            return None
        direction = min(open_, key=lambda d: d["taken"])
        last = state["configs"].get(direction["last"]) if direction["last"] else None
        if last and dim["ordered"] and _stops(last, dim, direction["name"]):
            why = (f"past {_value_text(dim, last)}, which was clearly worse than the best (one peak per flag assumed)"
                   if last["status"] == "dropped" else f"beyond {_value_text(dim, last)}, which could not run")
            for p in direction["todo"]:
                _mark(state, _neighbour(state, dim, p), "skipped" if last["status"] != "dropped" else "not tried", why)
            direction["todo"] = []
            continue
        p = direction["todo"].pop(0)
        direction["taken"] += 1
        key = _neighbour(state, dim, p)
        direction["last"] = key
        config = state["configs"][key]
        if config["status"] in FINAL or config["figures"]:
            continue   # measured before (another flag's or pass's race): its figures stay
        blocker = _ruled_out(state, config["flags"])
        if blocker:
            config.update(status="skipped", why=f"takes at least the memory of {blocker}, which could not run")
            continue
        return key


def _stops(config, dim, direction):
    return config["status"] == "dropped" or (dim["memory_up"] and direction == "up" and (
        config["status"] == "skipped" or config["status"] == "infeasible" and _out_of_memory(config["why"])))


def _out_of_memory(why):
    """Whether a failure's reason says the configuration ran out of memory (OUT_OF_MEMORY)."""
    text = (why or "").lower()
    return any(phrase in text for phrase in OUT_OF_MEMORY)


def _ruled_out(state, flags):
    """The changes of a configuration that ran out of memory and that ``flags`` takes at least as much
    memory as (each memory_up flag at or above its value), or None. The other flags are taken to leave
    memory alone (what memory_up says); a failure for another reason rules out nothing else."""
    memory = [dim for dim in state["space"] if dim["memory_up"]]
    if not memory:
        return None
    for other in state["configs"].values():
        if other["status"] != "infeasible" or not _out_of_memory(other["why"]):
            continue
        if all(_at_least(dim, flags[dim["flag"]], other["flags"][dim["flag"]]) for dim in memory):
            return _changes_text(state, other["flags"])
    return None


def _at_least(dim, value, than):
    return _position(dim, value) >= _position(dim, than)


def _slice(state):
    """This flag's configurations measured and still in the race (the start among them unless dropped),
    in the space's order."""
    cur = state["cursor"]
    dim = state["space"][cur["dimension"]]
    base = state["configs"][cur["start"]]["flags"]
    keys = [_key(dict(base, **{dim["flag"]: v})) for v in dim["values"]]
    return [k for k in keys if k in state["configs"] and state["configs"][k]["status"] == "alive"]


def _leader(state, keys):
    return max(keys, key=lambda k: noise.geomean(state["configs"][k]["figures"]))


def _drop_clearly_worse(state, keys=None):
    """Drop every contender of this flag (or of ``keys``) that is clearly worse than its leader: its loss
    against the leader is significant (one-sided at alpha) and at least min_effect (compare_runs' fail)."""
    keys = _slice(state) if keys is None else [k for k in keys if state["configs"][k]["status"] == "alive"]
    if len(keys) < 2:
        return
    lead = _leader(state, keys)
    for k in keys:
        if k == lead:
            continue
        res = _compare(state, state["configs"][k]["figures"], state["configs"][lead]["figures"])
        if res["verdict"] == "fail":
            state["configs"][k].update(status="dropped", against=lead,
                                       why=f"clearly worse than {_changes_text(state, state['configs'][lead]['flags'])}: "
                                           + _loss_text(res))


def _follow_up(state):
    """The configuration just measured, to measure again while it still runs (no restart), or None: when
    its figure leads this flag or trails the leader by at most one standard error of their difference, and
    its level is not yet known within min_effect (_known). Asked before anything is dropped against it."""
    key = state["running"]
    keys = _slice(state)
    if key not in keys or len(keys) < 2 or len(state["configs"][key]["figures"]) >= _known(state):
        return None
    lead = _leader(state, keys)
    if key == lead:
        return key
    mine, theirs = state["configs"][key]["figures"], state["configs"][lead]["figures"]
    gap = math.log(noise.geomean(theirs) / noise.geomean(mine))
    return key if gap <= state["noise"]["sigma"] * math.sqrt(1 / len(mine) + 1 / len(theirs)) else None


def _known(state):
    """The measurements that put a configuration's level within min_effect at one-sided alpha at the
    state's noise: t(1 - alpha) sigma / sqrt(n) <= ln(1 + min_effect), most_measurements at most. 1 on a
    quiet host (sigma up to 1.1 %), 3 or 4 at 2 %, the cap at a CPU host's 18 %."""
    cfg, est = state["settings"], state["noise"]
    t = noise.t_quantile(1 - cfg["alpha"], est["dof"])
    return max(1, min(cfg["most_measurements"], math.ceil((t * est["sigma"] / math.log(1 + cfg["min_effect"])) ** 2)))


def _sized(state, least):
    """A series compared with the incumbent's (the claim, the confirmation, the incumbent's second series):
    the fewest measurements, at least ``least``, whose compare_runs against as many detects twice
    min_effect with ``power`` at the state's noise; most_measurements at most (``least`` if more)."""
    cfg, est = state["settings"], state["noise"]
    loss = 1 - 1 / (1 + cfg["min_effect"])
    for n in range(least, max(least, cfg["most_measurements"]) + 1):
        res = noise.compare_runs([1.0] * n, [1.0] * n, est["sigma"], est["dof"], alpha=cfg["alpha"],
                                 power=cfg["power"], min_effect=loss)
        if (res["detectable"] or 0.0) <= 2 * loss:
            return n
    return max(least, cfg["most_measurements"])


def _again(state):
    """The configuration to measure again, or None when the flag is decided. What decides the flag is
    the value it would take now (_chosen) against the leader: while they differ, the one of the two with
    fewer measurements (below max_measurements) is measured again. The other contenders could only win
    by becoming the leader, which their figures so far do not make them."""
    keys = _slice(state)
    if len(keys) < 2:
        return None
    chosen, lead = _chosen(state, keys), _leader(state, keys)
    if chosen == lead:
        return None
    most = state["settings"]["max_measurements"]
    open_ = [k for k in (lead, chosen) if len(state["configs"][k]["figures"]) < most]
    return min(open_, key=lambda k: len(state["configs"][k]["figures"])) if open_ else None


def _chosen(state, keys):
    """The value the flag takes among the contenders ``keys`` (in the space's order): the first whose
    figure is within ``tie`` of the leader's -- the smaller value of an ordered flag, as vLLM's
    tune_speculative_k gives ties within 1 % to the smaller K; a smaller value also leaves memory to the
    other flags. The incumbent keeps its own protection: the result must beat it beyond the noise."""
    if not keys:
        return state["cursor"]["start"]
    figures = {k: noise.geomean(state["configs"][k]["figures"]) for k in keys}
    top = max(figures.values())
    return next(k for k in keys if figures[k] * (1 + state["settings"]["tie"]) >= top)


def _settle(state):
    """The flag's value (_chosen), then the next flag."""
    cur = state["cursor"]
    chosen = _chosen(state, _slice(state))
    changed = cur["changed"] or chosen != cur["start"]
    state["best"] = chosen
    state["cursor"] = _cursor(state, cur["dimension"] + 1, cur["pass"], changed)


def _out_of_time(state):
    """The next measurement does not fit: settle this flag on what was measured, list what was left."""
    state["out_of_time"] = True
    cur = state["cursor"]
    dim = state["space"][cur["dimension"]]
    for direction in cur["directions"]:
        for p in direction["todo"]:
            _mark(state, _neighbour(state, dim, p), "not tried", "out of time")
        direction["todo"] = []
    _settle(state)
    for d in range(state["cursor"]["dimension"], len(state["space"])):
        dim = state["space"][d]
        for p, value in enumerate(dim["values"]):
            if not same_value(value, state["configs"][state["best"]]["flags"][dim["flag"]]):
                _mark(state, _neighbour(state, dim, p, state["best"]), "not tried", "out of time")
    state["cursor"] = _cursor(state, len(state["space"]), state["settings"]["passes"], False)


def _start_pairs(state):
    """Single moves stopped improving: try the best few pair moves from the best (two ordered flags a step
    each), which is how memory moves between flags (a larger cuda-graph batch pays only once chunked
    prefill is lowered to make room for it: either alone loses or does not start). A pair move that
    beats the best by more than the tie becomes the best, a pass of single moves polishes around it, and
    the pairs are tried again from there (pair_rounds at most). Then the race."""
    pairs = state["pairs"] or {"round": 0, "from": None, "todo": [], "tried": [], "moved": 0}
    state["pairs"] = pairs
    pairs["round"] += 1
    cfg = state["settings"]
    if state["out_of_time"] or not cfg["pair_moves"] or pairs["round"] > cfg["pair_rounds"]:
        _start_race(state)
        return
    pairs.update({"from": state["best"], "todo": _pair_moves(state, state["best"]), "tried": []})
    if not pairs["todo"]:
        _start_race(state)
        return
    state["phase"] = "pairs"
    _advance_pairs(state)


def _pair_moves(state, base):
    """The pair moves from ``base`` most likely to pay, best first, pair_moves at most. A move's promise
    is the sum of its two single moves' log gains as measured from ``base``: one that ran out of memory
    (or was skipped for it) counts as a gain of min_effect -- the pair may make room for it -- and one
    not measured as none. Moves promising a loss beyond min_effect, measured before or ruled out by
    memory are left out."""
    cfg = state["settings"]
    flags = state["configs"][base]["flags"]
    level = math.log(noise.geomean(state["configs"][base]["figures"]))

    def single(dim, p):
        config = state["configs"].get(_key(dict(flags, **{dim["flag"]: dim["values"][p]})))
        if config is None:
            return 0.0
        if config["figures"]:
            return math.log(noise.geomean(config["figures"])) - level
        if config["status"] == "skipped" or config["status"] == "infeasible" and _out_of_memory(config["why"]):
            return math.log(1 + cfg["min_effect"])
        return None if config["status"] == "infeasible" else 0.0

    ordered = [dim for dim in state["space"] if dim["ordered"]]
    moves = []
    for a, b in itertools.combinations(ordered, 2):
        pa, pb = _position(a, flags[a["flag"]]), _position(b, flags[b["flag"]])
        for da, db in ((1, -1), (-1, 1), (1, 1), (-1, -1)):
            qa, qb = pa + da, pb + db
            if not (0 <= qa < len(a["values"]) and 0 <= qb < len(b["values"])):
                continue
            ga, gb = single(a, qa), single(b, qb)
            if ga is None or gb is None or ga + gb < -math.log(1 + cfg["min_effect"]):
                continue
            moved = dict(flags, **{a["flag"]: a["values"][qa], b["flag"]: b["values"][qb]})
            key = _key(moved)
            config = state["configs"].get(key)
            if config and (config["figures"] or config["status"] in FINAL) or _ruled_out(state, moved):
                continue
            moves.append((-(ga + gb), len(moves), key, moved))
    moves.sort()
    out = []
    for _score, _n, key, moved in moves[:cfg["pair_moves"]]:
        if key not in state["configs"]:
            state["configs"][key] = _config(moved, "new", state["settings"]["passes"] + state["pairs"]["round"])
        out.append(key)
    return out


def _advance_pairs(state):
    """Screen the next pair move (one measurement); when none is left, move to the best of them if it
    beats the best by more than the tie (and polish around it), else race."""
    pairs = state["pairs"]
    while pairs["todo"]:
        key = pairs["todo"].pop(0)
        config = state["configs"][key]
        if config["figures"] or config["status"] in FINAL:
            continue
        blocker = _ruled_out(state, config["flags"])
        if blocker:
            config.update(status="skipped", why=f"takes at least the memory of {blocker}, which could not run")
            continue
        if _ask(state, key, f"round {pairs['round']} of pair moves from the best so far: "
                            f"{_changes_text(state, config['flags'])} (two flags at once, single moves stopped improving)"):
            pairs["tried"].append(key)
            return
        for k in [key] + pairs["todo"]:
            _mark(state, k, "not tried", "out of time")
        pairs["todo"] = []
        state["out_of_time"] = True
        break
    tried = [k for k in pairs["tried"] if state["configs"][k]["status"] == "alive"]
    base = pairs["from"]
    if tried and not state["out_of_time"]:
        lead = _leader(state, tried)
        if noise.geomean(state["configs"][lead]["figures"]) > (1 + state["settings"]["tie"]) * noise.geomean(
                state["configs"][base]["figures"]):
            pairs["moved"] += 1
            state["best"] = lead
            state["phase"] = "search"
            state["cursor"] = _cursor(state, 0, state["settings"]["passes"] + pairs["round"], False)
            _advance(state)
            return
    _start_race(state)


def _start_race(state):
    """The race: the best and the next best measured configurations (race in all, the incumbent aside)
    are measured again, the fewest-measured first, each dropped once it is clearly worse than the
    leader, until one is left or each has race_measurements; the leader is the best. Measurements go
    where the decision is close, rather than evenly to every candidate on the way."""
    state["phase"] = "race"
    cfg = state["settings"]
    inc = state["incumbent_key"]
    keys = []
    if cfg["race"]:
        measured = sorted((k for k, c in state["configs"].items() if k != inc and c["status"] == "alive" and c["figures"]),
                          key=lambda k: -noise.geomean(state["configs"][k]["figures"]))
        keys = ([state["best"]] if state["best"] != inc else []) + measured
        keys = list(dict.fromkeys(keys))[:cfg["race"]]
    state["race"] = {"keys": keys}
    _advance_race(state)


def _advance_race(state):
    keys = state["race"]["keys"]
    _drop_clearly_worse(state, keys)
    alive = [k for k in keys if state["configs"][k]["status"] == "alive"]
    most = state["settings"]["race_measurements"]
    open_ = [k for k in alive if len(state["configs"][k]["figures"]) < most] if len(alive) > 1 else []
    if open_:
        key = min(open_, key=lambda k: (len(state["configs"][k]["figures"]), -noise.geomean(state["configs"][k]["figures"])))
        config = state["configs"][key]
        if _ask(state, key, f"the race of the {len(alive)} best: {_changes_text(state, config['flags'])} again "
                            f"({len(config['figures']) + 1} of at most {most})"):
            return
        state["out_of_time"] = True
    if alive:
        state["best"] = _leader(state, alive)
    _start_earn(state)


def _start_earn(state):
    """Every change must earn its place: where the best changes several flags, each change is judged
    alone against the best without it (that flag at the incumbent's value). A change worth no more
    than earn_tie is dropped and the best becomes the best without it: a flag that won its tie by
    noise (at 2 % a run, a change worth nothing beats the tie one time in three) is not written into
    the inventory, nor credited with a gain it does not bring. Then the claim."""
    state["phase"] = "earn"
    state["earn"] = {"checked": [], "checks": []}
    _advance_earn(state)


def _advance_earn(state):
    """Judge the next change: kept once the best leads the best without it by more than earn_tie
    (medians: one slow moment does not decide) and clearly (compare_runs' fail, one-sided at alpha), or
    when the best without it could not run; dropped once, on two measurements each or more, the best
    leads by no more than earn_tie. In between, the fewer-measured of the two is measured again, race_measurements
    each at most; where that ends it undecided (or out of time), a change that leads by more than
    earn_tie is kept, saying so, and one never measured without is kept unjudged."""
    cfg, earn = state["settings"], state["earn"]
    while True:
        best = state["best"]
        changes = _changes(state, state["configs"][best]["flags"])
        todo = [f for f in changes if f not in earn["checked"]]
        if len(changes) < 2 or not todo:
            _claim(state)
            return
        flag = todo[0]
        key = _without(state, best, flag)
        without = state["configs"][key]
        figures, best_figures = without["figures"], state["configs"][best]["figures"]
        if without["status"] in ("infeasible", "skipped"):
            _earned(state, flag, True, f"the best without it could not run ({without['why']})")
            continue
        res = _compare(state, figures, best_figures, cfg["earn_tie"]) if figures else None
        leads = res and _median_gain(figures, best_figures) > cfg["earn_tie"]
        if leads and res["verdict"] == "fail":
            _earned(state, flag, True, f"{_gain_text(res)} over the best without it")
            continue
        tie = res and not leads and min(len(figures), len(best_figures)) >= 2
        open_ = [k for k in (key, best) if len(state["configs"][k]["figures"]) < cfg["race_measurements"]]
        again = min(open_, key=lambda k: len(state["configs"][k]["figures"])) if open_ and not tie else None
        if again:
            if _ask(state, again, f"does {flag} {changes[flag][0]} -> {changes[flag][1]} earn its place in the best "
                                  f"({_changes_text(state, state['configs'][best]['flags'])})? "
                                  + ("the best without it" if again == key else "the best") +
                                  f" again ({len(state['configs'][again]['figures']) + 1} of at most "
                                  f"{cfg['race_measurements']})"):
                return
            state["out_of_time"] = True
        if not res:
            _earned(state, flag, True, "not judged: no time to measure the best without it")
        elif leads:
            _earned(state, flag, True, f"{_gain_text(res)} over the best without it, not shown beyond the noise "
                                       f"({'out of time' if state['out_of_time'] else 'measured as often as the race'})")
        else:
            _earned(state, flag, False, f"{_gain_text(res)} over the best without it: within {cfg['earn_tie'] * 100:g} %, "
                                        "dropped")
            without["status"] = "alive"
            state["best"] = key
            earn["checked"] = [f for f in earn["checked"] if f not in changes]   # the kept ones, judged again


def _median_gain(without, best):
    """The best's lead over the best without a change, median against median."""
    return statistics.median(best) / statistics.median(without) - 1


def _without(state, key, flag):
    """The key of configuration ``key`` with ``flag`` at the incumbent's value; added to the configs."""
    flags = dict(state["configs"][key]["flags"], **{flag: state["incumbent"][flag]})
    other = _key(flags)
    if other not in state["configs"]:
        state["configs"][other] = _config(flags, "new", state["settings"]["passes"])
    return other


def _earned(state, flag, kept, why):
    """Record a change's judgement (the latest one per flag is what the result shows)."""
    state["earn"]["checked"].append(flag)
    change = _changes(state, state["configs"][state["best"]]["flags"])[flag]
    state["earn"]["checks"].append({"flag": flag, "from": change[0], "to": change[1], "kept": kept, "why": why})


def _claim(state):
    """End of the search: confirm the best on a fresh restart when it beats the incumbent, else done
    (the incumbent stays: nothing beat it beyond the noise)."""
    best, inc = state["best"], state["incumbent_key"]
    if best == inc:
        _done(state, False, "no candidate beat the incumbent beyond the noise: the incumbent stays")
        return
    res = _versus_incumbent(state, state["configs"][best]["figures"])
    if res["verdict"] != "fail" and _gain(res) > 0 and _claim_again(state, best, res):
        return
    if res["verdict"] != "fail":
        _done(state, False, f"the best found ({_changes_text(state, state['configs'][best]['flags'])}) is within the "
                            f"noise of the incumbent ({_gain_text(res)}): the incumbent stays")
        return
    state["phase"] = "drift"
    counts = _confirm_counts(state, state["budget_s"] - state["used_s"])
    state["claim"] = {"key": best, "gain": _gain(res), "interval": _gain_interval(res), "measurements": counts}
    state["next"] = {"action": "measure", "candidate": copy.deepcopy(state["incumbent"]),
                     "measurements": counts[0], "restart": True,
                     "why": (f"the incumbent again, right before the confirmation of "
                             f"{_changes_text(state, state['configs'][best]['flags'])}: did the host drift while the "
                             "search ran?")}


def _claim_again(state, best, res):
    """The best leads the incumbent within the noise: measure the incumbent, then the best, again up to
    _sized before the claim is judged (the incumbent's first series is short, and compare_runs judges it on
    its best measurement). Sets the step and returns True, or False when both have enough or time is out."""
    for key in (state["incumbent_key"], best):
        have = len(state["configs"][key]["figures"])
        count = _sized(state, 1) - have
        if count <= 0:
            continue
        if not _ask(state, key, f"the best found, {_changes_text(state, state['configs'][best]['flags'])}, leads the "
                                f"incumbent by {_gain_text(res)}, within the noise: "
                                f"{'the incumbent' if key == state['incumbent_key'] else 'the best'} measured again "
                                f"({have} + {count}) before the claim is judged", count):
            state["out_of_time"] = True
            return False
        state["phase"] = "claim"
        return True
    return False


def _drift(state, figures, reason):
    """After the incumbent's second series: noise.bracket says whether the host moved since its first
    (the search's comparisons, made against the first, are then suspect, and the result says so). The
    confirmation is judged against this series: measured next to it, on the host as it is now."""
    best = state["claim"]["key"]
    if reason:
        _done(state, False, f"the incumbent did not start again before the confirmation ({reason}): the host is not "
                            "as it was when the search began; the incumbent stays")
        return
    first = state["configs"][state["incumbent_key"]]["figures"]
    est = state["noise"]
    res = noise.bracket(first, figures, est["sigma"], est["dof"], alpha=state["settings"]["alpha"])
    state["drift"] = {"figures": figures, "moved": res["moved"], "effect": res["effect"],
                      "interval": list(res["interval"]) if res["interval"] else None, "message": res["message"]}
    state["phase"] = "confirm"
    claimed = _versus_incumbent(state, state["configs"][best]["figures"])   # the claim's, not the drift's
    state["next"] = {"action": "confirm", "candidate": copy.deepcopy(state["configs"][best]["flags"]),
                     "measurements": state["claim"]["measurements"][1], "restart": True,
                     "why": (f"the best found, {_changes_text(state, state['configs'][best]['flags'])} "
                             f"({_gain_text(claimed)} on the search's measurements), on a fresh restart: a win only if "
                             "these measurements alone beat the incumbent")}


def _finish(state):
    """After the confirmation: a win when its measurements alone beat the incumbent."""
    conf = state["confirm"]
    flags = state["configs"][conf["key"]]["flags"]
    if conf["why"]:
        failed = "failed its confirmation" if conf["why"].startswith(HELD_BACK) else "did not start again for its confirmation"
        _done(state, False, f"{_changes_text(state, flags)} {failed} ({conf['why']}): the incumbent stays")
        return
    res = _versus_incumbent(state, conf["figures"], fresh=True)
    conf.update(gain=_gain(res), interval=_gain_interval(res), verdict="win" if res["verdict"] == "fail" else "not confirmed")
    drift = state["drift"]
    against = ("; the host drifted while the search ran, so the search's own comparisons are suspect: "
               + drift["message"] if drift and drift["moved"] else "")
    if res["verdict"] == "fail":
        _done(state, True, f"{_changes_text(state, flags)}: {_gain_text(res)} against the incumbent, confirmed on a "
                           "fresh restart" + against, res)
    else:
        _done(state, False, f"{_changes_text(state, flags)} did not confirm on a fresh restart ({_gain_text(res)}): "
                            "the incumbent stays" + against)


def _done(state, won, message, res=None):
    state["phase"] = "done"
    state["result"] = _result(state, won, message, res)
    state["next"] = {"action": "done", "result": state["result"]}


# -------------------------------------------------------------------------------------- the comparison

def _compare(state, current, reference, min_effect=None):
    """noise.compare_runs of ``current``'s figures against ``reference``'s at the state's noise: a
    'fail' means current is clearly below reference (one-sided at alpha, a gain of reference over
    current of at least ``min_effect``, by default the settings')."""
    cfg, est = state["settings"], state["noise"]
    gain = cfg["min_effect"] if min_effect is None else min_effect
    loss = 1 - 1 / (1 + gain)   # compare_runs' min_effect is a loss; ours is a gain
    return noise.compare_runs(list(current), list(reference), est["sigma"], est["dof"], alpha=cfg["alpha"],
                              power=cfg["power"], min_effect=loss, basis=est["basis"])


def _versus_incumbent(state, figures, fresh=False):
    """The incumbent's figures judged against ``figures``: a 'fail' is a win for ``figures``. ``fresh``
    (the confirmation): against the incumbent's second series, measured right before it (the host as it
    is now), not the first, hours older."""
    drift = state.get("drift")
    inc = drift["figures"] if fresh and drift else state["configs"][state["incumbent_key"]]["figures"]
    return _compare(state, list(inc), figures)


def _learn_noise(state):
    """The run-to-run noise: the prior moderated by the search's own repeated measurements."""
    series = [c["figures"] for c in state["configs"].values() if len(c["figures"]) > 1]
    if state["confirm"] and len(state["confirm"]["figures"]) > 1:
        series.append(state["confirm"]["figures"])
    own = noise.run_noise(series, [[True] * len(s) for s in series]) if series else {"sigma": None, "dof": 0}
    cfg = state["settings"]
    sigma, dof = noise.moderate(own["sigma"], own["dof"], cfg["noise_sigma"], cfg["noise_dof"])
    basis = (f"prior {cfg['noise_sigma'] * 100:g} % as {cfg['noise_dof']} dof" +
             (f", {own['sigma'] * 100:.1f} % over {own['dof']} dof of this search's repeats" if own["sigma"] is not None else ""))
    state["noise"] = {"sigma": sigma, "dof": dof, "basis": basis}


def _gain(res):
    """compare_runs gives the incumbent's (or a loser's) loss; the gain is its inverse."""
    return 1 / (1 + res["effect"]) - 1


def _gain_interval(res):
    if not res.get("interval"):
        return None
    lo, hi = res["interval"]
    return [1 / (1 + hi) - 1, 1 / (1 + lo) - 1]


def _gain_text(res):
    iv = _gain_interval(res)
    return f"{_gain(res) * 100:+.1f} %" + (f" [{iv[0] * 100:+.1f}, {iv[1] * 100:+.1f}]" if iv else "")


def _loss_text(res):
    lo, hi = res["interval"]
    return f"{res['effect'] * 100:+.1f} % [{lo * 100:+.1f}, {hi * 100:+.1f}]"


# ------------------------------------------------------------------------------------- result, progress

def _result(state, won, message, res):
    """The answer: winner, gain with interval (from the confirmation's measurements), one row per
    configuration, the time used."""
    winner_key = state["confirm"]["key"] if won else state["incumbent_key"]
    winner = state["configs"][winner_key]["flags"]
    rows = [_row(state, key, won) for key in state["configs"]]
    return {"won": won, "winner": copy.deepcopy(winner), "changes": _changes(state, winner),
            "gain": _gain(res) if res else None, "interval": _gain_interval(res) if res else None,
            "claim": copy.deepcopy(state["claim"]), "confirmation": copy.deepcopy(state["confirm"]),
            "message": message, "rows": rows, "used_s": state["used_s"], "budget_s": state["budget_s"],
            "measurements": state["measurements"], "restarts": state["restarts"],
            "out_of_time": state["out_of_time"], "noise": copy.deepcopy(state["noise"]),
            "drift": copy.deepcopy(state.get("drift")), "earned": _earned_checks(state)}


def _earned_checks(state):
    """Each change judged on its own (_start_earn), the latest judgement per flag, in the space's order."""
    latest = {c["flag"]: c for c in (state.get("earn") or {"checks": []})["checks"]}
    return [copy.deepcopy(latest[d["flag"]]) for d in state["space"] if d["flag"] in latest]


def _row(state, key, won):
    """One configuration's row: figure, gain and interval against the incumbent, verdict and why.
    Verdicts: incumbent, win, not confirmed, better / tie / worse (against the incumbent), dropped
    (clearly worse than the best it raced), infeasible, not tried."""
    config = state["configs"][key]
    row = {"changes": _changes(state, config["flags"]), "figure": None, "measurements": len(config["figures"]),
           "gain": None, "interval": None, "verdict": VERDICTS.get(config["status"], config["status"]),
           "why": config["why"] or ("not reached" if config["status"] == "new" else None)}
    if config["figures"]:
        row["figure"] = noise.geomean(config["figures"])
    conf = state["confirm"]
    if key == state["incumbent_key"]:
        row.update(verdict="incumbent", why="what the host runs" + (f"; {config['why']}" if config["why"] else ""))
    elif config["figures"]:
        res = _versus_incumbent(state, config["figures"])
        row.update(gain=_gain(res), interval=_gain_interval(res))
        if config["status"] == "alive":
            below = _compare(state, config["figures"], state["configs"][state["incumbent_key"]]["figures"])
            row.update(verdict="better" if res["verdict"] == "fail" else "worse" if below["verdict"] == "fail" else "tie",
                       why=_gain_text(res) + " against the incumbent")
    if conf and conf["key"] == key:
        row.update(verdict="win" if won else "not confirmed" if not conf["why"] else "infeasible",
                   why=f"confirmed on a fresh restart: {conf['gain'] * 100:+.1f} %" if won else
                   conf["why"] or f"the fresh restart measured {conf['gain'] * 100:+.1f} % against the incumbent")
    return row


def _progress(state):
    """Candidate k of n, time used and left, the best so far: what the playbook prints between steps."""
    done = sum(1 for k, c in state["configs"].items()
               if k != state["incumbent_key"] and (c["figures"] or c["status"] == "infeasible"))
    step = state["next"]
    current = 0
    if step["action"] == "measure" and _key(step["candidate"]) != state["incumbent_key"]:
        current = 0 if state["configs"][_key(step["candidate"])]["figures"] else 1
    left = state["budget_s"] - state["used_s"]
    remaining = _remaining_estimate(state) if state["phase"] == "search" else 0
    fit = max(0, int((left - _confirm_s(state)) // state["plan"]["candidate_s"]))
    best = state["configs"][state["best"]]
    out = {"phase": state["phase"], "candidate": done + current, "of": done + min(max(remaining, current), fit),
           "used_s": state["used_s"], "left_s": left,
           "best": {"changes": _changes(state, best["flags"]),
                    "figure": noise.geomean(best["figures"]) if best["figures"] else None}}
    text = (f"candidate {out['candidate']} of ~{out['of']}, {_duration(state['used_s'])} used, {_duration(max(0.0, left))} left"
            + (f", best so far {_changes_text(state, best['flags'])} at {out['best']['figure']:.1f}" if best["figures"] else ""))
    out["text"] = text
    return out


def _remaining_estimate(state):
    """Candidates still to screen: this flag's open directions and the later flags' other values."""
    cur = state["cursor"]
    if not cur or cur["dimension"] >= len(state["space"]):
        return 0
    n = sum(len(d["todo"]) for d in cur["directions"])
    return n + sum(len(dim["values"]) - 1 for dim in state["space"][cur["dimension"] + 1:])


# ---------------------------------------------------------------------------------------------- helpers

def _settings(settings):
    cfg = dict(DEFAULTS)
    unknown = set(settings or {}) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown tuning settings {sorted(unknown)}: known are {sorted(DEFAULTS)}")
    cfg.update(settings or {})
    if not 0 < cfg["alpha"] < 0.5 or not 0 <= cfg["min_effect"] < 1 or not 0 <= cfg["tie"] < 1 or not 0 < cfg["power"] < 1 \
            or not 0 <= cfg["earn_tie"] < 1:
        raise ValueError("alpha must be in (0, 0.5), min_effect, tie and earn_tie in [0, 1), power in (0, 1)")
    for name in ("incumbent_measurements", "confirm_measurements", "max_measurements", "passes", "noise_dof",
                 "race_measurements", "most_measurements"):
        if not isinstance(cfg[name], int) or isinstance(cfg[name], bool) or cfg[name] < 1:
            raise ValueError(f"{name} must be a whole number of at least 1: {cfg[name]!r}")
    for name in ("pair_moves", "pair_rounds", "race"):
        if not isinstance(cfg[name], int) or isinstance(cfg[name], bool) or cfg[name] < 0:
            raise ValueError(f"{name} must be a whole number of at least 0: {cfg[name]!r}")
    if not _number(cfg["grid_share"]) or not 0 < cfg["grid_share"] <= 1:
        raise ValueError(f"grid_share (the most of the exhaustive grid's time a search spends) must be in (0, 1]: "
                         f"{cfg['grid_share']!r}")
    if not _number(cfg["noise_sigma"]) or not 0 < cfg["noise_sigma"] < 1:
        raise ValueError(f"noise_sigma (the host's run-to-run noise, a fraction) must be in (0, 1): {cfg['noise_sigma']!r}")
    return cfg


def _cost_model(cost_model):
    if not isinstance(cost_model, dict) or any(
            not _number(cost_model.get(k)) or cost_model[k] < 0 for k in ("restart_s", "measure_s")) or not cost_model["measure_s"]:
        raise ValueError(f"the cost model must give restart_s (>= 0) and measure_s (> 0), in seconds: {cost_model!r}")
    return {"restart_s": float(cost_model["restart_s"]), "measure_s": float(cost_model["measure_s"])}


def _outcome(outcome):
    """(figures, None) for a measurement, ([], reason) for a configuration that could not run."""
    if isinstance(outcome, str):
        if not outcome.strip():
            raise ValueError("an infeasible candidate needs its reason (the log line that says why it did not run)")
        return [], outcome.strip()
    figures = list(outcome) if isinstance(outcome, (list, tuple)) else [outcome]
    if not figures or any(not _number(f) or f <= 0 or math.isinf(f) or math.isnan(f) for f in figures):
        raise ValueError(f"a measurement's figures must be positive numbers (one per measurement): {outcome!r}")
    return [float(f) for f in figures], None


def _config(flags, status, pass_no):
    return {"flags": copy.deepcopy(flags), "figures": [], "status": status, "why": None, "pass": pass_no}


def _neighbour(state, dim, position, start=None):
    """The key of the cursor's start (or ``start``) with ``dim`` at ``position``; added to the configs."""
    base = state["configs"][start or state["cursor"]["start"]]["flags"]
    flags = dict(base, **{dim["flag"]: dim["values"][position]})
    key = _key(flags)
    if key not in state["configs"]:
        state["configs"][key] = _config(flags, "new", state["cursor"]["pass"] if state["cursor"] else 0)
    return key


def _mark(state, key, status, why):
    config = state["configs"][key]
    if config["status"] == "new":
        config.update(status=status, why=why)


def _ask(state, key, why, count=1):
    """Ask for ``count`` measurements of configuration ``key`` (restarted first unless it is what runs)
    when they fit the budget: True; False and nothing asked when they do not."""
    restart = state["running"] != key
    if not _affordable(state, measurement_cost(state["cost"], count, restart)):
        return False
    state["next"] = {"action": "measure", "candidate": copy.deepcopy(state["configs"][key]["flags"]),
                     "measurements": count, "restart": restart, "why": why}
    return True


def _affordable(state, seconds):
    return state["used_s"] + seconds + _confirm_s(state) <= state["budget_s"] + 1e-9


def _confirm_counts(state, left):
    """[the incumbent's second series, the confirmation]: each _sized at the state's noise, then smaller
    (the larger first) while the two do not fit ``left`` seconds, never below the settings' counts (what
    the plan kept back)."""
    cfg = state["settings"]
    least = [cfg["incumbent_measurements"], cfg["confirm_measurements"]]
    counts = [_sized(state, n) for n in least]
    while counts != least and sum(measurement_cost(state["cost"], n) for n in counts) > left:
        i = 0 if counts[0] - least[0] >= counts[1] - least[1] else 1
        counts[i] -= 1
    return counts


def _confirm_s(state):
    """The time kept back for the incumbent's second series and the confirmation at the noise measured so
    far, leaving the incumbent's first series and one candidate the room the plan promised."""
    plan_ = state["plan"]
    counts = _confirm_counts(state, state["budget_s"] - plan_["incumbent_s"] - plan_["candidate_s"])
    return sum(measurement_cost(state["cost"], n) for n in counts)


def _try_order(dim, start):
    """Positions in the order the first pass screens them: nearest first, up before down."""
    if not dim["ordered"]:
        return [p for p in range(len(dim["values"])) if p != start]
    up, down = list(range(start + 1, len(dim["values"]))), list(range(start - 1, -1, -1))
    out = []
    while up or down:
        out += [up.pop(0)] if up else []
        out += [down.pop(0)] if down else []
    return out


def _position(dim, value):
    return [_key(v) for v in dim["values"]].index(_key(value))


def _changes(state, flags):
    """{flag: [incumbent's value, this value]} for each tuned flag that differs."""
    inc = state["incumbent"]
    return {d["flag"]: [inc[d["flag"]], flags[d["flag"]]] for d in state["space"]
            if not same_value(flags[d["flag"]], inc[d["flag"]])}


def _changes_text(state, flags):
    if not isinstance(flags, dict) or any(d["flag"] not in flags for d in state["space"]):
        return repr(flags)
    changes = _changes(state, flags)
    return ", ".join(f"{f} {_text(a)} -> {_text(b)}" for f, (a, b) in changes.items()) or "the incumbent"


def _text(value):
    return "unset" if value is None else str(value)


def _value_text(dim, config):
    return f"{dim['flag']}={config['flags'][dim['flag']]}"


def _screen_why(state, key):
    cur = state["cursor"]
    dim = state["space"][cur["dimension"]]
    return (f"pass {cur['pass']}, {dim['flag']}: {state['configs'][cur['start']]['flags'][dim['flag']]} -> "
            f"{state['configs'][key]['flags'][dim['flag']]} from the best so far")


def _follow_up_why(state, key, count):
    config = state["configs"][key]
    lead = _leader(state, _slice(state))
    return (f"again while it runs ({len(config['figures'])} + {count}): {_changes_text(state, config['flags'])} " +
            ("leads this flag" if key == lead else
             f"is within the noise of this flag's leader ({_changes_text(state, state['configs'][lead]['flags'])})") +
            f" on {len(config['figures'])} measurement{'s' if len(config['figures']) != 1 else ''}")


def _again_why(state, key):
    config = state["configs"][key]
    lead = _leader(state, _slice(state))
    return (f"again ({len(config['figures']) + 1} of at most {state['settings']['max_measurements']}): "
            f"{_changes_text(state, config['flags'])} is " +
            ("this flag's leader, against an earlier value within the tie of it" if key == lead else
             f"within {state['settings']['tie'] * 100:g} % of this flag's leader "
             f"({_changes_text(state, state['configs'][lead]['flags'])}) and earlier in the space's order"))


def _duration(seconds):
    seconds = max(0, int(round(seconds)))
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def _scalar(value):
    return value is None or isinstance(value, (str, bool)) or _number(value)


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not (
        isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def _key(value):
    """The one spelling of a value or a set of flags, for equality and as a JSON object key."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def same_value(a, b):
    """Whether two values (or two sets of flags) are one to the tuning: the same spelling (_key), so 1 and
    1.0 differ, as True and 1 do. The search and tune.yml's session (session.py) compare values by it."""
    return _key(a) == _key(b)


__all__ = ["DEFAULTS", "budget_plan", "measurement_cost", "next_step", "normalise_space", "plan", "record", "same_value",
           "space_dims"]
