"""torchao's FP8 surface, discovered from the install (fp8ref/harness/ao/surface.py: every field
and default of its float8 and MX/NVFP4 configs, every member of their enums), pinned in the
profile (``torchao.surface.*``) and accounted for: each member has a check that exercises it or a
written reason it is out of scope (fp8ref/harness/ao/coverage.py), and each check the table names
exists.

Why a test here may fail: a torchao release adds a recipe, a scale mode, a kernel choice or a
config field (the coverage test names it and the torchao that offers it: give it a check, or a
reason); or a check the table names was renamed or removed."""

import pytest

from fp8ref.harness.ao import coverage, surface
from fp8ref.harness.stack import install, probes
from tests.common.paths import ROOT

pytestmark = pytest.mark.needs("torchao")


@pytest.fixture(scope="module")
def members(skip_if_refused):
    skip_if_refused(probes.torchao_float8_refusal(), "torchao.float8")
    return surface.members()


def test_every_member_of_torchaos_fp8_surface_has_a_check_or_a_reason(members, record_section):
    record_section(f"torchao's FP8 surface ({install.versions_line()})", coverage.account(members))
    missing = coverage.uncovered(members)
    assert not missing, (
        f"{install.versions_line()} offers {missing}, which no check covers; give each a check or a reason "
        "in fp8ref/harness/ao/coverage.py"
    )


def test_every_check_the_coverage_table_names_exists():
    absent = coverage.absent_checks(coverage.COVERAGE, ROOT)
    assert not absent, f"fp8ref/harness/ao/coverage.py names checks that do not exist: {absent}"


def test_the_surface_holds_what_fp8ref_checks_torchao_through(members):
    """Discovery finds the recipes, scale modes and config fields fp8ref's own checks use: if a
    torchao moves them out of the modules read (surface.ROOTS), the account would go quiet."""
    for member in ("Float8LinearRecipeName.TENSORWISE", "ScaleCalculationMode.RCEIL", "Float8LinearConfig.emulate"):
        assert member in members, f"{install.versions_line()}: {member} not found in {surface.ROOTS}"
