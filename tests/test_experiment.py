"""``experiment.choose_precision``: what ``precision='auto'`` picks from the GEMM peaks."""
import pytest

from nntile_lab.experiment import AUTO_BF16_RATIO, choose_precision
from nntile_lab.spec import ExperimentSpec


def peaks(ratio):
    return lambda: {"bf16_gflops": 100.0 * ratio, "fp32_gflops": 100.0, "ratio": ratio}


def test_a_given_precision_is_kept_and_nothing_is_measured():
    def never():
        raise AssertionError("measured the peaks for a precision that was given")
    for p in ("fp32", "bf16", "bf16-storage"):
        assert choose_precision(ExperimentSpec(precision=p), peaks=never) == (p, "given")


@pytest.mark.parametrize("ratio, cap, want", [
    (2.1, None, "bf16"),                       # AVX-512 BF16 (Zen 5: ~2x)
    (AUTO_BF16_RATIO, 16, "bf16"),              # the threshold itself takes bf16
    (1.49, None, "fp32"),                       # bf16 compute does not pay, the step fits
    (0.5, None, "fp32"),                        # AVX2: gemm_bf16 widens to sgemm
    (0.5, 16, "bf16-storage"),                  # ... but out of core bf16 storage pays
])
def test_auto_picks_by_the_measured_ratio_and_the_cap(ratio, cap, want):
    spec = ExperimentSpec(precision="auto", memory_limit_mb=cap)
    mode, why = choose_precision(spec, peaks=peaks(ratio))
    assert mode == want, why
    assert f"{ratio:.2f}x the fp32" in why
