"""Conversion of a model's parameters: a converter that gives each Float8Linear a copy of its
weight (ties and optimizers lose it), one that ignores the module filter, one that asks the filter
about module names instead of fully qualified names; through fp8ref/harness/state/conversion.py."""

import pytest
import torch

from fp8ref.harness.state.conversion import (
    CHECKS,
    Filter,
    TiedLM,
    check_filter_converts_exactly_the_named_layers,
    check_optimizer_built_before_conversion_updates_the_weights,
    check_tied_weight_stays_tied,
    torchao_convert,
)

pytestmark = pytest.mark.needs("torchao")


def _copies_weights(model: torch.nn.Module, f: Filter | None) -> torch.nn.Module:
    model = torchao_convert(model, f)
    for m in model.modules():
        if type(m).__name__ == "Float8Linear":
            m.weight = torch.nn.Parameter(m.get_parameter("weight").detach().clone())
    return model


def _ignores_filter(model: torch.nn.Module, f: Filter | None) -> torch.nn.Module:
    return torchao_convert(model, None)


def _filter_by_last_name(model: torch.nn.Module, f: Filter | None) -> torch.nn.Module:
    return torchao_convert(model, None if f is None else (lambda m, fqn: f(m, fqn.rsplit(".", 1)[-1])))


FAULTS = {
    "weight copied at conversion (tie broken)": (_copies_weights, check_tied_weight_stays_tied),
    "weight copied at conversion (optimizer left behind)": (
        _copies_weights,
        check_optimizer_built_before_conversion_updates_the_weights,
    ),
    "module filter ignored": (_ignores_filter, check_filter_converts_exactly_the_named_layers),
    "module filter asked by short name": (_filter_by_last_name, check_filter_converts_exactly_the_named_layers),
}


def conversion_param_fault_caught(fault: str) -> bool:
    convert, check = FAULTS[fault]
    return check(convert) is not None


def test_the_real_converter_passes():
    torch.manual_seed(0)
    assert isinstance(TiedLM(), torch.nn.Module)
    assert all(check(torchao_convert) is None for check in CHECKS.values())


@pytest.mark.parametrize("fault", list(FAULTS))
def test_conversion_fault_is_caught(fault):
    assert conversion_param_fault_caught(fault), f"the conversion checks did not notice: {fault}"
