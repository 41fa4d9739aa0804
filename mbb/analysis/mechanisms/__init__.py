"""Do the agents' institutions help or hurt? Centralized baselines on the same demand.

- `mbb.protocol.scheduling.centralized`: the schedulers (FCFS, EDF, SJF, round robin,
  sealed-bid first- and second-price auctions, proportional share) that replace negotiation
  in a condition;
- `replay`: re-schedule a finished run's recorded demand under any of them;
- `outcomes` (`mbb.analysis.outcome`, grouped per run and mechanism here): deadline misses,
  progress, completion, waits, lateness, Gini of execution time, credits spent and the mean
  score (share of hidden tests passed);
- `screens`: procurement-style collusion and bid-rotation screens per run;
- `compare`: all of it on many seeds (and conditions); the charts are in `mbb.viz.mechanisms`.
"""

from mbb.analysis.mechanisms.compare import (
    MEASURES,
    Comparison,
    compare,
    compare_conditions,
    imposed,
    same_schedules,
    summary,
)
from mbb.analysis.mechanisms.replay import RecordedDemand, ReplayError, recorded_demand, replay
from mbb.analysis.mechanisms.screens import ScreenThresholds, screens
from mbb.analysis.outcome import execution_by_worker, gini, waits
from mbb.protocol.scheduling.centralized import CENTRALIZED

__all__ = [
    "CENTRALIZED",
    "MEASURES",
    "Comparison",
    "RecordedDemand",
    "ReplayError",
    "ScreenThresholds",
    "compare",
    "compare_conditions",
    "execution_by_worker",
    "gini",
    "imposed",
    "recorded_demand",
    "replay",
    "same_schedules",
    "screens",
    "summary",
    "waits",
]
