"""Fixtures of the fuzz tests: strategies, real molecules, models, hypothesis budgets, counts.

Budgets (hypothesis profiles, applied per property, never loaded globally):

* ``molsepnorm-fuzz-short``: the default suite; 200 examples per property, derandomized
  (the same inputs on every run, so CI is deterministic);
* ``molsepnorm-fuzz-long``: ``pytest -m slow tests/fuzz``; 5,000 examples per property.

Properties whose every example runs the model (a list or a file of up to a dozen
records) take a fraction of that (``scale``).  Neither profile writes a hypothesis
example database.  ``MOLSEPNORM_FUZZ_RANDOM=1`` draws fresh random inputs on each run
instead, for exploring (a failure prints a ``@reproduce_failure`` blob to replay it).

Every property counts the inputs it tried and how many were accepted (a valid graph, a
prediction) or rejected (with a reason).  The counts travel as the ``fuzz_counts``
property of each test's report: they are printed at the end of a run that names this
folder (``pytest tests/fuzz``, with or without xdist; a plain ``pytest -n 2`` does not
load this conftest in the xdist controller) and land in ``--junitxml`` reports.
"""
from __future__ import annotations

import importlib.util
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, settings

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("molsepnorm_fuzz_strategies", HERE / "strategies.py")
strategies = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = strategies  # dataclasses look their module up there
_spec.loader.exec_module(strategies)

SHORT, LONG = "molsepnorm-fuzz-short", "molsepnorm-fuzz-long"
_COMMON = dict(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.large_base_example],
)
settings.register_profile(SHORT, max_examples=200, derandomize=not strategies.fuzz_random(), **_COMMON)
settings.register_profile(LONG, max_examples=5000, derandomize=not strategies.fuzz_random(), **_COMMON)

_FUZZ_KEY = "fuzz_counts"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``budget`` runs twice: ``[short]`` in the default suite and
    ``[long]``, marked slow, with the long budget."""
    if "budget" in metafunc.fixturenames:
        metafunc.parametrize("budget", [pytest.param(SHORT, id="short"),
                                        pytest.param(LONG, id="long", marks=pytest.mark.slow)])


def _run_property(budget: str, test: Callable[[], None], scale: float = 1.0) -> None:
    """Run the ``@given`` function ``test`` under the profile ``budget``, with ``scale`` times
    its ``max_examples`` (for properties whose examples cost more, e.g. a model run per file)."""
    profile = settings.get_profile(budget)
    settings(profile, max_examples=max(1, math.ceil(profile.max_examples * scale)))(test)()


@pytest.fixture(scope="session")
def run_property() -> Callable[..., None]:
    """``run_property(budget, test, scale=1.0)``: see :func:`_run_property`."""
    return _run_property


class Tally:
    """Counts of one property's inputs: ``tried`` and one counter per outcome."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, outcome: str, n: int = 1) -> None:
        self.counts["tried"] += n
        self.counts[outcome] += n


@pytest.fixture
def tally(request: pytest.FixtureRequest, record_property: Callable[[str, object], None]):
    """A :class:`Tally` whose counts are attached to the test's report when the test ends."""
    counts = Tally()
    yield counts
    if counts.counts:
        record_property(_FUZZ_KEY, dict(counts.counts))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Print the inputs each fuzz property tried, and how they came out."""
    rows = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "teardown":
                continue
            for key, value in getattr(report, "user_properties", ()):
                if key == _FUZZ_KEY:
                    rows.append((report.nodeid.split("::", 1)[-1], value))
    if not rows:
        return
    terminalreporter.section("fuzz inputs")
    for name, counts in sorted(rows):
        tried = counts.get("tried", 0)
        rest = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()) if k != "tried")
        terminalreporter.write_line(f"{name}: tried {tried:,} ({rest})")


# --- data ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def fuzz():
    """The strategies module (``tests/fuzz/strategies.py``)."""
    return strategies


@pytest.fixture(scope="session")
def real_smiles(request: pytest.FixtureRequest) -> list[str]:
    """RDKit's 4,999 NCI SMILES, plus the 41,127 ogbg-molhiv SMILES when the data is there."""
    smiles = strategies.nci_smiles()
    try:
        root = request.getfixturevalue("data_root")
    except pytest.skip.Exception:
        return smiles
    return smiles + strategies.molhiv_smiles(root)


@pytest.fixture(scope="session")
def sdf_blocks() -> list[str]:
    return strategies.sdf_blocks()


# --- models --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def predictor():
    """The bundled model (``tpsa-nci-small``, OGB vocabulary)."""
    import torch

    from molsepnorm.predict import Predictor

    torch.set_num_threads(1)
    return Predictor.load("tpsa-nci-small")


@pytest.fixture(scope="session")
def zinc_predictor(tmp_path_factory):
    """A tiny untrained (seeded) Graphormer in the 28-token ZINC vocabulary, saved and loaded
    as a checkpoint: what matters here is how it treats molecules outside its vocabulary."""
    import torch

    from molsepnorm.chem import FEATURIZER_VERSION
    from molsepnorm.encodings import ENCODING_VERSION
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
    from molsepnorm.predict import Predictor
    from molsepnorm.checkpoint import save_checkpoint

    torch.manual_seed(0)
    config = GraphormerConfig(vocab="zinc", num_layers=1, hidden_dim=16, ffn_dim=16, num_heads=2,
                              num_spatial=16, multi_hop_max_dist=3, num_tasks=1)
    payload = {
        "kind": "best",
        "model": {"config": config.to_dict(), "state_dict": Graphormer(config).state_dict()},
        "featurizer": {"vocab": "zinc", "featurizer_version": FEATURIZER_VERSION,
                       "encoding_version": ENCODING_VERSION, "multi_hop_max_dist": 3},
        "task": {"type": "regression", "target_names": ["logp"], "metric": "mae", "higher_is_better": False},
        "target_scaling": None,
        "data": {"dataset": "hand-made"},
        "metrics": {},
    }
    path = save_checkpoint(payload, tmp_path_factory.mktemp("fuzz-ckpt") / "zinc.pt")
    return Predictor.load(path)
