"""Figure regeneration from a fresh clone: each committed study's aggregate alone redraws its figures.

A copy of the repository's tracked files stands in for a fresh clone: no results beyond the committed
`results/**/aggregate/`, no data mirror, no converted model. For every committed study, `snakemake
figures` must plan nothing upstream of the figures, and a real re-render must reproduce every
committed figure and table of that study byte for byte under requirements/lock.txt. With other
versions of the packages that shape a rendered file installed (environment.RENDER_PACKAGES), a PDF is
compared by what it draws (reporting/pdf_drawing.py: a newer fontTools packs the same font otherwise),
the byte checks it skips are named in a warning, and every other file stays byte for byte.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from depthprune import environment
from depthprune.paths import SENSITIVITY_DIR
from depthprune.reporting.pdf_drawing import drawing_difference
from test_workflow import job_counts

# Long, independent re-renders: conftest.py's ANY_WORKER_FILES lists this file, so pytest-xdist gives
# each test to whichever worker is free (the fresh clone, a copy of the tracked files, is cheap twice).
REPO = Path(__file__).resolve().parents[1]

# study -> (extra snakemake arguments, its aggregate folder, its figures folder). A study is listed once
# its aggregate and figures are committed.
STUDIES = {
    "default": ([], "results/aggregate", "figures"),
    "calibration_size": (
        ["--configfile", "config/calibration_size.yaml"],
        "results/calibration_size/aggregate",
        "figures/calibration_size",
    ),
    "calibration_size_v2": (
        ["--configfile", "config/calibration_size_v2.yaml"],
        "results/calibration_size_v2/aggregate",
        "figures/calibration_size_v2",
    ),
    "two_families": (
        ["--configfile", "config/two_families.yaml"],
        "results/two_families/aggregate",
        "figures/two_families",
    ),
    "protect_none": (
        ["--configfile", "config/protect_none.yaml"],
        "results/protect_none/aggregate",
        "figures/protect_none",
    ),
    "tlm_sensitivity": (
        ["--configfile", "config/tlm_sensitivity.yaml"],
        "results/tlm_sensitivity/aggregate",
        "figures/tlm_sensitivity",
    ),
    "cross_control": (
        ["--configfile", "config/cross_control.yaml"],
        "results/cross_control/aggregate",
        "figures/cross_control",
    ),
    "seeds_default": (
        ["--configfile", "config/seeds_default.yaml"],
        "results/seeds_default/aggregate",
        "figures/seeds_default",
    ),
    "rescore_informative": (
        ["--configfile", "config/rescore_informative.yaml"],
        "results/rescore_informative/aggregate",
        "figures/rescore_informative",
    ),
}
# Evaluation-only studies (docs/method.md §11): their sets come from a source study, never a search.
EVALUATION_ONLY = {"rescore_informative"}
FIGURE_RULES = {"render", "calibration_size", "figures"}


def tracked_files() -> list[str]:
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return [name for name in listing.stdout.decode().split("\0") if name and (REPO / name).is_file()]


def study_figures(study: str, files: list[str], sensitivity: bool = False) -> list[str]:
    """The committed figures and tables of one study (a study's folder excludes nested studies'), or
    with ``sensitivity`` those of its failed-search sensitivity (SENSITIVITY_DIR, not `figures`'s)."""
    folder = STUDIES[study][2] + "/"
    nested = [spec[2] + "/" for name, spec in STUDIES.items() if name != study and spec[2].startswith(folder)]
    own = [name for name in files if name.startswith(folder) and not any(name.startswith(other) for other in nested)]
    inside = [name for name in own if name.startswith(folder + SENSITIVITY_DIR + "/")]
    return inside if sensitivity else sorted(set(own) - set(inside))


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout")
    root = tmp_path_factory.mktemp("clone") / "repo"
    for name in tracked_files():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    return root


def rendered_differences(pairs: list[tuple[str, Path, Path]]) -> list[str]:
    """The names whose re-rendered file (second) differs from the committed one (third).

    Byte for byte under the lock. When the installed versions of the packages that shape a rendered
    file are not the lock's, a PDF is compared by what it draws and its byte check is named in a
    warning as skipped, and environment.json (which records those versions) must name them."""
    differ_from_lock = environment.drift(environment.RENDER_PACKAGES)
    differ, skipped = [], []
    for name, rendered, committed in pairs:
        if rendered.read_bytes() == committed.read_bytes():
            continue
        if not differ_from_lock:
            differ.append(name)
        elif name.endswith(".pdf"):
            skipped.append(name)
            if drawing_difference(rendered, committed) is not None:
                differ.append(name)
        elif rendered.name != environment.RECORD_FILE:
            differ.append(name)
    if skipped:
        warnings.warn(
            f"{environment.drift_message(differ_from_lock, 'PDFs')}: byte checks skipped, drawing compared "
            f"instead, for {skipped}",
            stacklevel=2,
        )
    return sorted(differ)


def snakemake(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=root, capture_output=True, text=True, timeout=900
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("study", list(STUDIES))
def test_figures_target_plans_only_the_figures(fresh_clone, study):
    """Marked ``slow``: three Snakemake plans of a whole study per study (10-17 s each)."""
    args, aggregate, _ = STUDIES[study]
    assert (fresh_clone / aggregate / "summary.csv").is_file(), f"{aggregate}/ is not committed"
    # A clone's file times follow checkout order (results/ after figures/), so Snakemake may find the
    # aggregate newer than the figures and plan a re-render: never anything upstream of it.
    planned = job_counts(snakemake(fresh_clone, "-n", "figures", *args).stdout)
    assert set(planned) <= FIGURE_RULES and planned.get("render", 0) <= 1, planned
    forced = job_counts(snakemake(fresh_clone, "-n", "figures", "--forcerun", "render", *args).stdout)
    assert set(forced) <= FIGURE_RULES and forced["render"] == 1, forced
    # the whole study, by contrast, still recomputes everything from scratch on a fresh clone
    whole = job_counts(snakemake(fresh_clone, "-n", *args).stdout)
    upstream = "source_selection" if study in EVALUATION_ONLY else "search"
    assert whole[upstream] > 0 and whole["evaluate_selections"] > 0 and whole["aggregate_tables"] == 1, whole


@pytest.mark.slow
@pytest.mark.parametrize("study", list(STUDIES))
def test_render_reproduces_the_committed_figures_byte_for_byte(fresh_clone, study):
    """Marked ``slow``: a re-render of a committed study at its committed settings (up to 3 min)."""
    args, _, _ = STUDIES[study]
    committed = study_figures(study, tracked_files())
    assert committed, f"no committed figures for the {study} study"
    forced = ["render", "calibration_size"] if study.startswith("calibration_size") else ["render"]
    for name in committed:  # the render must write them anew, not find them
        (fresh_clone / name).unlink()
    snakemake(fresh_clone, "--cores", "1", "figures", "--forcerun", *forced, *args)
    differ = rendered_differences([(name, fresh_clone / name, REPO / name) for name in committed])
    assert not differ, f"re-rendered files differ from the committed ones: {differ}"


# The studies whose failed-search sensitivity is committed, re-made here (the default study's: about a
# minute; the four-seed study's takes about 7 minutes and is checked by the same command by hand).
SENSITIVITY_CHECKED = ["default"]


@pytest.mark.slow
@pytest.mark.parametrize("study", SENSITIVITY_CHECKED)
def test_failed_search_sensitivity_reproduces_the_committed_files(fresh_clone, study):
    """Marked ``slow``: a re-render of the committed study's sensitivity at its committed settings."""
    args, _, _ = STUDIES[study]
    committed = study_figures(study, tracked_files(), sensitivity=True)
    assert any(name.endswith("verdict_changes.csv") for name in committed), committed
    for name in committed:
        (fresh_clone / name).unlink()
    snakemake(fresh_clone, "--cores", "1", "failed_search_sensitivity", *args)
    differ = rendered_differences([(name, fresh_clone / name, REPO / name) for name in committed])
    assert not differ, f"re-made sensitivity files differ from the committed ones: {differ}"


def perturbed_copy(aggregate: Path, target: Path, relative: float, seed: int = 0) -> None:
    """The aggregate with every float moved by +-``relative`` (the 15th digit for 1e-14), signs seeded.

    Equal values move alike: one set scored twice gets the same score on any CPU, so ties (two
    algorithms that found one set) must stay ties."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    target.mkdir(parents=True)
    for path in aggregate.glob("*.parquet"):
        frame = pd.read_parquet(path)
        for column in frame.select_dtypes("float").columns:
            values = frame[column].to_numpy()
            distinct, which = np.unique(values, return_inverse=True)
            signs = rng.choice([-1.0, 1.0], size=len(distinct))
            frame[column] = values * (1.0 + relative * signs[which.reshape(-1)])
        frame.to_parquet(target / path.name, index=False)


@pytest.mark.slow
@pytest.mark.parametrize("study", list(STUDIES))
def test_last_digit_noise_in_the_aggregate_renders_the_same_tables(tmp_path, study):
    """Marked ``slow``: every committed table re-rendered at its committed settings (up to 2 min).

    What a reduction on another CPU kind does to the inputs (a change in the 15th digit of every
    float) leaves every committed table byte for byte as it is: CSVs at their bounded precision,
    Markdown and LaTeX as rounded for display."""
    import inspect

    import yaml

    from depthprune.reporting.render import ARTIFACTS, FIGURE_NAMES, render

    args, aggregate, figures = STUDIES[study]
    analysis = yaml.safe_load((REPO / "config.yaml").read_text()).get("analysis", {})
    if args:  # the study's own config file overrides the default's analysis settings
        analysis.update(yaml.safe_load((REPO / args[1]).read_text()).get("analysis", {}))
    accepted = inspect.signature(render).parameters
    settings = {key: value for key, value in analysis.items() if key in accepted}
    perturbed_copy(REPO / aggregate, tmp_path / "aggregate", relative=1e-14)
    only = [name for name in ARTIFACTS if name not in FIGURE_NAMES]
    written = render(tmp_path / "aggregate", tmp_path / "figures", only=only, **settings)
    assert written
    pairs = []
    for path in written:
        committed = REPO / figures / path.relative_to(tmp_path / "figures")
        assert committed.is_file(), f"{committed.relative_to(REPO)} is rendered but not committed"
        pairs.append((str(committed.relative_to(REPO)), path, committed))
    differ = rendered_differences(pairs)
    assert not differ, f"a 1e-14 relative change of the inputs changed: {differ}"


def test_full_precision_would_not_survive_that_noise(tmp_path):
    """The guard above can fail: at full precision the same noise changes the CSV bytes. Eight digits
    alone do not always survive it either: the summary's accuracies are rounded to 9 decimals, and at
    116 documents per task some end exactly in a 5 there, on the eighth digit's rounding boundary;
    snapping to 12 digits first (io.report_precision) decides them the same way every time."""
    import pandas as pd

    from depthprune.io import report_precision

    perturbed_copy(REPO / "results/aggregate", tmp_path / "aggregate", relative=1e-14)
    original = pd.read_parquet(REPO / "results/aggregate/summary.parquet")
    noisy = pd.read_parquet(tmp_path / "aggregate/summary.parquet")
    assert original.to_csv(index=False) != noisy.to_csv(index=False)
    assert original.to_csv(index=False, float_format="%.8g") != noisy.to_csv(index=False, float_format="%.8g")
    assert report_precision(original).to_csv(index=False, float_format="%.8g") == report_precision(noisy).to_csv(
        index=False, float_format="%.8g"
    )


def test_figures_without_an_aggregate_says_what_is_missing(fresh_clone, tmp_path):
    """`snakemake figures` draws from the aggregate alone: without one it names the missing files and
    how to make them instead of planning the whole study (issue 45); the default target still plans it."""
    empty = tmp_path / "no-results"
    args = ("--config", f"results_dir={empty}")
    proc = snakemake(fresh_clone, "-n", "figures", *args, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"the aggregate the figures are drawn from is missing ({empty}/aggregate/selections.csv" in output
    assert "`snakemake aggregate`" in output and "rule search:" not in output
    assert job_counts(snakemake(fresh_clone, "-n", *args).stdout)["search"] > 0


def test_figures_beside_a_running_snakemake_does_not_advise_a_second_run(fresh_clone, tmp_path):
    """While another Snakemake runs the study in this folder (its lock files in .snakemake/locks), the
    missing aggregate is being made: advising `snakemake aggregate` would only lead to Snakemake's
    lock error (issue 55 item 6), so it says to wait for that run instead."""
    empty = tmp_path / "no-results"
    locks = fresh_clone / ".snakemake" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.output.lock").write_text(f"{empty}/aggregate/summary.csv\n")
    try:
        proc = snakemake(fresh_clone, "-n", "figures", "--config", f"results_dir={empty}", check=False)
    finally:
        shutil.rmtree(fresh_clone / ".snakemake" / "locks")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "another Snakemake is running in this folder" in output and "`snakemake aggregate`" not in output


def test_figures_with_seeds_the_aggregate_lacks_says_so(fresh_clone):
    """config/seeds.yaml on the default names seeds 1 and 2, which the committed default aggregate has
    no run of: `snakemake figures` says so and points at the committed multi-seed study, instead of
    redrawing the default's figures from seed 0 alone without a multi-seed table (issue 47)."""
    proc = snakemake(fresh_clone, "-n", "figures", "--configfile", "config.yaml", "config/seeds.yaml", check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "has no run of seed(s) [1, 2]" in output and "config/seeds_default.yaml" in output, output


def test_figure_rules_quote_every_path(fresh_clone):
    """A logs folder (or results, figures folder) with a space must not split the shell command."""
    args, _, _ = STUDIES["calibration_size"]
    config = ["--config", "logs_dir=my logs", "figures_dir=my figures/calibration_size"]
    proc = snakemake(fresh_clone, "-n", "-p", "figures", "--forcerun", "render", "calibration_size", *args, *config)
    output = proc.stdout + proc.stderr
    commands = [line.split("Shell command:", 1)[1].strip() for line in output.splitlines() if "Shell command:" in line]
    commands = [c for c in commands if c.startswith("depthprune ")]
    assert {c.split()[4] for c in commands} == {"render", "calibration-size"}, output
    for command in commands:
        assert "--log-file 'my logs/" in command and "--out 'my figures/calibration_size" in command, command


@pytest.mark.slow
def test_seeds_study_aggregate_rebuilds_from_its_committed_runs(tmp_path):
    """Marked ``slow``: a committed study's whole aggregate rebuilt. The four-seed study commits each run's small files under results/seeds_default/runs/ (issue
    47): `depthprune aggregate` over them, with seed 0 from the committed default, gives the
    committed aggregate: the same summary and per-document scores byte for byte, and the same
    selections and metrics apart from the column naming each row's source file."""
    import pandas as pd

    from depthprune.cli import main

    committed = REPO / "results" / "seeds_default" / "aggregate"
    argv = [
        "aggregate",
        "--results",
        str(REPO / "results" / "seeds_default" / "runs"),
        "--protected",
        "smollm2-135m=0 29",
        "--base-aggregate",
        str(REPO / "results" / "aggregate"),
        "--base-calibrations",
        "ppl_c4,tlm_cs170k",
        "--base-seeds",
        "0",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    for name in ("summary.parquet", "samples.parquet", "summary.csv"):
        assert (tmp_path / name).read_bytes() == (committed / name).read_bytes(), name
    for name in ("selections", "metrics"):
        rebuilt, original = (
            pd.read_parquet(tmp_path / f"{name}.parquet"),
            pd.read_parquet(committed / f"{name}.parquet"),
        )
        pd.testing.assert_frame_equal(rebuilt.drop(columns="source"), original.drop(columns="source"))


@pytest.mark.slow
def test_rescore_study_aggregate_rebuilds_from_its_committed_runs(tmp_path):
    """Marked ``slow``: a committed study's whole aggregate rebuilt. The rescore study (issue 58) commits each run's small files under
    results/rescore_informative/runs/: `depthprune aggregate` over them, with the perplexities the
    four-seed study measured for the same sets carried in (config source_study.perplexity), gives
    the committed aggregate byte for byte."""
    from depthprune.cli import main

    committed = REPO / "results" / "rescore_informative" / "aggregate"
    argv = ["aggregate", "--results", "results/rescore_informative/runs", "--protected", "smollm2-135m=0 29"]
    argv += ["--perplexity-from", "results/seeds_default/aggregate", "--out", str(tmp_path)]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)  # the committed files name the runs by their paths from the repository root
        assert main(argv) == 0
    # environment.json: the versions each build was made with (the first committed aggregate predates the record).
    names = sorted(path.name for path in committed.iterdir() if path.name != environment.RECORD_FILE)
    rebuilt = sorted(path.name for path in tmp_path.iterdir() if path.name != environment.RECORD_FILE)
    assert "carried_perplexity.json" in names and rebuilt == names
    for name in names:
        assert (tmp_path / name).read_bytes() == (committed / name).read_bytes(), name
