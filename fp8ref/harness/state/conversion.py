"""What ``convert_to_float8_training`` does to a model's parameters: a tied weight stays one
Parameter, a module filter converts exactly the layers it names by fully qualified name, and an
optimizer built before conversion still updates the converted weights (torchao swaps the module
and keeps its Parameter objects). Each check takes the converter, so tests/meta can pass a broken
one; each returns None or a line saying what differs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Filter = Callable[[torch.nn.Module, str], bool]
Convert = Callable[[torch.nn.Module, Filter | None], torch.nn.Module]


def torchao_convert(model: torch.nn.Module, module_filter_fn: Filter | None = None) -> torch.nn.Module:
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    cfg = Float8LinearConfig.from_recipe_name("tensorwise")
    return convert_to_float8_training(model, config=cfg, module_filter_fn=module_filter_fn)


class TiedLM(torch.nn.Module):
    """An embedding whose weight is also the output projection's (weight tying), two blocks of
    Linear layers between them; every Linear dim a multiple of 16."""

    def __init__(self, vocab: int = 64, dim: int = 32) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict({"up": torch.nn.Linear(dim, 2 * dim), "down": torch.nn.Linear(2 * dim, dim)})
            for _ in range(2)
        )
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        for b in self.blocks:
            assert isinstance(b, torch.nn.ModuleDict)
            h = h + b["down"](torch.relu(b["up"](h)))
        return self.head(h)


def _float8_fqns(model: torch.nn.Module) -> set[str]:
    return {n for n, m in model.named_modules() if type(m).__name__ == "Float8Linear"}


def _train_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    ids = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(0))
    opt.zero_grad()
    model(ids).float().square().mean().backward()
    opt.step()


def check_tied_weight_stays_tied(convert: Convert) -> str | None:
    torch.manual_seed(0)
    model = convert(TiedLM(), None)
    if "head" not in _float8_fqns(model):
        return f"the tied output projection was not converted (converted: {sorted(_float8_fqns(model))})"
    head, emb = model.get_parameter("head.weight"), model.get_parameter("emb.weight")
    if head is not emb:
        return "after conversion the output projection's weight is no longer the embedding's Parameter"
    _train_step(model, torch.optim.SGD(model.parameters(), lr=0.1))
    if not torch.equal(model.get_parameter("head.weight"), model.get_parameter("emb.weight")):
        return "after a step the tied weights differ"
    return None


def check_filter_converts_exactly_the_named_layers(convert: Convert) -> str | None:
    wanted = {"blocks.0.up", "blocks.1.down"}
    seen: list[str] = []

    def by_fqn(module: torch.nn.Module, fqn: str) -> bool:
        seen.append(fqn)
        return fqn in wanted

    torch.manual_seed(0)
    model = convert(TiedLM(), by_fqn)
    got = _float8_fqns(model)
    if got != wanted:
        return f"the filter named {sorted(wanted)}; converted {sorted(got)} (the filter was asked about {seen})"
    return None


def check_optimizer_built_before_conversion_updates_the_weights(convert: Convert) -> str | None:
    torch.manual_seed(0)
    plain = TiedLM()
    opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    model = convert(plain, None)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    _train_step(model, opt)
    stale = [n for n, p in model.named_parameters() if torch.equal(p, before[n]) and p.requires_grad]
    if stale:
        return f"an optimizer built before conversion did not update {stale}"
    in_opt = {id(p) for g in opt.param_groups for p in g["params"]}
    missing = [n for n, p in model.named_parameters() if id(p) not in in_opt]
    return f"converted parameters the optimizer does not hold: {missing}" if missing else None


CHECKS = {
    "tied weight stays tied": check_tied_weight_stays_tied,
    "filter converts exactly the named layers": check_filter_converts_exactly_the_named_layers,
    "optimizer built earlier updates the weights": check_optimizer_built_before_conversion_updates_the_weights,
}
