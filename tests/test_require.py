"""A missing test dependency fails the run with the fix; it never becomes a skip."""
import pytest

from tests.conftest import require


def test_missing_dependency_fails_with_the_fix():
    with pytest.raises(pytest.fail.Exception, match=r"scripts/setup.sh test"):
        require("nntile_lab_no_such_module")


def test_present_dependency_is_imported():
    assert require("numpy").__name__ == "numpy"
