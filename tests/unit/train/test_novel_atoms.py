"""The rule that prices unseen atoms: the nearest environment in the input embeddings unless
another rule is clearly better on validation (molsepnorm.train.novel_atoms.pick_rule)."""
from __future__ import annotations

import pytest

from molsepnorm.train.novel_atoms import DEFAULT_RULE, MIN_GAIN, MIN_MOLECULES, SWITCH_GAIN, describe, pick_rule

OTHER = "final atom states, k=3"


@pytest.mark.parametrize("default, other, expected", [
    (0.90, 0.85, DEFAULT_RULE),  # the default gains 10 %; the other is 5.6 % better than it: not enough
    (0.90, 0.80, OTHER),  # 11 % better than the default
    (0.99, 0.95, "none"),  # the default gains 1 %, the other 5 % on no pricing: neither enough
    (0.99, 0.89, OTHER),  # the default gains too little; the other 11 % on no pricing
    (1.10, 1.20, "none"),  # both worse
])
def test_the_default_rule_is_kept_unless_another_is_clearly_better(default, other, expected):
    tried = {"none": 1.0, DEFAULT_RULE: default, OTHER: other, "input embeddings, k=5": 1.05}
    assert pick_rule(tried, "mae") == expected


def test_the_gains_are_relative_and_follow_the_metrics_direction():
    assert pick_rule({"none": 0.5, DEFAULT_RULE: 0.5 * (1 + MIN_GAIN) + 1e-9}, "r2") == DEFAULT_RULE  # higher is better
    assert pick_rule({"none": 0.5, DEFAULT_RULE: 0.5 * (1 - MIN_GAIN) + 1e-9}, "mae") == "none"
    switch = {"none": 1.0, DEFAULT_RULE: 0.5, OTHER: 0.5 * (1 - SWITCH_GAIN) - 1e-9}
    assert pick_rule(switch, "mae") == OTHER
    assert pick_rule({"none": 1.0}, "mae") == "none"  # nothing tried


def test_without_the_default_rule_another_must_gain_the_switch_gain_on_no_pricing():
    assert pick_rule({"none": 1.0, OTHER: 0.95}, "mae") == "none"
    assert pick_rule({"none": 1.0, OTHER: 0.85}, "mae") == OTHER


def test_the_log_says_which_rule_was_kept_or_why_none_was():
    kept = {"validation_molecules": 22, "validation": {"none": 0.27, DEFAULT_RULE: 0.17, OTHER: 0.2},
            "chosen": DEFAULT_RULE}
    assert describe(kept, "mae") == f"priced by their nearest training environments ({DEFAULT_RULE}): validation mae " \
                                    "0.2700 -> 0.1700"
    left = {"validation_molecules": 22, "validation": {"none": 0.27, DEFAULT_RULE: 0.268, OTHER: 0.26},
            "chosen": "none"}
    assert describe(left, "mae") == (f"left as they are: on validation mae (0.2700) {DEFAULT_RULE} did not gain 2% nor "
                                     f"another rule 10% (best tried {OTHER}: 0.2600)")
    few = {"validation_molecules": 3, "validation": {}, "chosen": "none"}
    assert describe(few, "mae") == f"left as they are: fewer than {MIN_MOLECULES} such molecules, too few to choose " \
                                   "a pricing on"
