"""The planner sizes the Llama as StarPU counts it: a dry run of its step submits the tasks
(ops, FLOPs, layer/phase/priority tags) a real step's trace records, and the planner's
categories (parameters, gradients, activations) equal StarPU's own accounting, over random
sizes, query groups, tilings and precision modes."""
from hypothesis import given, settings
from hypothesis import strategies as st

from nntile_lab.nn.precision import MODES
from tests.nn.test_activations import check_planner_counts
from tests.nn.test_llama import llama_case
from tests.nn.test_meta import check_dry_run


@settings(max_examples=12, deadline=None)
@given(llama_case(), st.sampled_from(MODES), st.sampled_from(["none", "all"]))
def test_dry_run_submits_what_a_llama_step_submits(case, precision, hints):
    cfg, B, T, seed = case
    check_dry_run("llama", cfg, B, T, seed, precision, hints)


@settings(max_examples=12, deadline=None)
@given(llama_case(), st.sampled_from(MODES))
def test_planner_counts_what_a_llama_step_keeps(case, precision):
    cfg, B, T, seed = case
    check_planner_counts("llama", cfg, B, T, seed, precision)
