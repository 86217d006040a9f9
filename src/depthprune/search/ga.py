"""Prior-guided genetic algorithm (docs/method.md §4.4).

Individuals are removed sets of size M. The prior biases every random choice: a layer i is drawn
with weight w_i ∝ exp(−z_i), z the standardised single-layer losses (more removable ⇒ likelier).

- Initial population: the prior's top-M set plus ``population − 1`` sets drawn without replacement
  by weight (redrawn a few times to avoid duplicates).
- Each of ``generations`` generations keeps the round(elitism · population) best unchanged and fills
  the rest with children: two parents by tournament selection, crossover = M layers drawn by weight
  from the parents' union, mutation = each removed layer swapped, with probability ``mutation``,
  for a kept layer drawn by weight. The children of a generation are evaluated in one batch.
- Returns the best set evaluated in the whole run.

Choice (docs/method.md §4.4): the operators; the hyper-parameters are the paper's. "10 generations" means ten
rounds of offspring after the initial population.

``prior_guided: false`` (the ``ga_random`` control, the paper's limitation 2): uniform weights
everywhere, and an initial population of ``population`` uniformly drawn sets (no prior set).
"""

from __future__ import annotations

import numpy as np

from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.search.base import POSITIVE, Range, SearchAlgorithm, SearchProblem, loss_key

# How often to redraw an initial individual that duplicates one already in the population.
_MAX_REDRAWS = 50


class GeneticAlgorithm(SearchAlgorithm):
    name = "ga"
    display_name = "GA"
    marker = "D"  # matplotlib marker in the figures
    defaults = {
        "population": 16,
        "elitism": 0.2,
        "mutation": 0.15,
        "generations": 10,
        "tournament": 2,
        "prior_guided": True,
    }
    ranges = {
        "population": Range(minimum=2),
        "elitism": Range(0, 1),
        "mutation": Range(0, 1),
        "generations": POSITIVE,
        "tournament": POSITIVE,
    }

    def uses_prior(self, params: dict) -> bool:
        return bool(params["prior_guided"])

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        # The initial population, then each generation's children (its elite is not evaluated again).
        size = int(params["population"])
        return size + int(params["generations"]) * (size - round(params["elitism"] * size))

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        size = params["population"]
        n_elite = round(params["elitism"] * size)
        if size < 2 or not 0 <= n_elite < size:
            raise InputError(
                f"search algorithm {self.name!r}: need population >= 2 and 0 <= round(elitism * population) "
                f"< population (population={size}, elitism={params['elitism']})"
            )
        if not 1 <= params["tournament"] <= size:
            raise InputError(
                f"search algorithm {self.name!r}: tournament must be in [1, population], got {params['tournament']}"
            )
        ops = _Operators(problem, np.random.default_rng(problem.seed), params["prior_guided"])

        population = ops.initial_population(size)
        losses = [r.loss for r in problem.evaluator.evaluate(population)]
        for _ in range(params["generations"]):
            ranked = sorted(zip(losses, population), key=lambda pair: loss_key(*pair))
            elite = [s for _, s in ranked[:n_elite]]
            children = []
            while len(children) < size - n_elite:
                first = ops.tournament(population, losses, params["tournament"])
                second = ops.tournament(population, losses, params["tournament"])
                children.append(ops.mutate(ops.crossover(first, second), params["mutation"]))
            child_losses = [r.loss for r in problem.evaluator.evaluate(children)]
            population = elite + children
            losses = [loss for loss, _ in ranked[:n_elite]] + child_losses
        return parse_layers(problem.evaluator.best(size=problem.budget).removed)


class _Operators:
    """The GA's random operators; every draw comes from one seeded generator, in a fixed order."""

    def __init__(self, problem: SearchProblem, rng: np.random.Generator, prior_guided: bool = True):
        self.problem = problem
        self.rng = rng
        self.prior_guided = prior_guided
        if prior_guided:
            self.weights = problem.prior_weights()
        else:
            self.weights = np.zeros(problem.n_layers)
            self.weights[list(problem.allowed)] = 1.0 / len(problem.allowed)
        self.budget = problem.budget

    def draw(self, pool: list[int] | np.ndarray, k: int) -> tuple[int, ...]:
        """k distinct layers from ``pool``, drawn by prior weight."""
        pool = np.asarray(sorted(pool))
        p = self.weights[pool] / self.weights[pool].sum()
        return parse_layers(self.rng.choice(pool, size=k, replace=False, p=p))

    def initial_population(self, size: int) -> list[tuple[int, ...]]:
        population = [self.problem.prior_top()] if self.prior_guided else []
        allowed = list(self.problem.allowed)
        while len(population) < size:
            for _ in range(_MAX_REDRAWS):
                individual = self.draw(allowed, self.budget)
                if individual not in population:
                    break
            population.append(individual)  # a duplicate only when few distinct sets exist
        return population

    def tournament(self, population: list, losses: list[float], k: int) -> tuple[int, ...]:
        entrants = self.rng.choice(len(population), size=k, replace=False)
        winner = min(entrants, key=lambda j: loss_key(losses[j], population[j]))
        return population[winner]

    def crossover(self, first: tuple[int, ...], second: tuple[int, ...]) -> tuple[int, ...]:
        return self.draw(sorted(set(first) | set(second)), self.budget)

    def mutate(self, individual: tuple[int, ...], rate: float) -> tuple[int, ...]:
        removed = list(individual)
        for position in range(len(removed)):
            if self.rng.random() < rate:
                kept = [i for i in self.problem.allowed if i not in removed]
                removed[position] = self.draw(kept, 1)[0]
        return parse_layers(removed)


class RandomInitGeneticAlgorithm(GeneticAlgorithm):
    """The random-initialisation control (paper's limitation 2): no prior anywhere."""

    name = "ga_random"
    display_name = "GA (random init)"
    marker = "<"  # matplotlib marker in the figures
    in_paper = False  # a control: kept out of the statistics behind the paper's claims
    defaults = {**GeneticAlgorithm.defaults, "prior_guided": False}
