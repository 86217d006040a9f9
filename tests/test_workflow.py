"""The Snakemake workflow's DAG: job counts, config validation, rerun scopes, resumption.

Dry runs need neither data nor models. The execution tests replace the `depthprune` command with a
stand-in that only writes placeholder outputs (and records its calls), so they check the workflow's
wiring (what reruns, what resumes), not the science; tests/test_workflow_smoke.py runs the real one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
SEVEN = ["one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"]


def run_snakemake(*args: str, workdir: Path | None = None, env: dict | None = None, check: bool = True):
    command = list(SNAKEMAKE)
    if workdir is not None:
        command += ["--directory", str(workdir)]
    proc = subprocess.run(command + list(args), cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def planned_jobs(output: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job a dry run lists."""
    jobs: list[tuple[str, dict[str, str]]] = []
    for line in output.splitlines():
        rule = re.match(r"^(?:local)?rule (\w+):$", line.strip())
        if rule:
            jobs.append((rule.group(1), {}))
            continue
        wildcards = re.match(r"^wildcards: (.*)$", line.strip())
        if wildcards and jobs:
            jobs[-1][1].update(dict(item.split("=", 1) for item in wildcards.group(1).split(", ")))
    return jobs


def job_counts(output: str) -> Counter:
    return Counter(rule for rule, _ in planned_jobs(output))


# --------------------------------------------------------------------------- dry runs


def test_default_profile_dag():
    # Runs in the repository, where the default profile's figures are committed: the main command
    # must still plan the whole study (rule all also asks for results/aggregate/).
    assert (REPO / "figures" / "figure1.png").is_file()
    counts = job_counts(run_snakemake("-n").stdout)
    # 1 model x 2 calibrations x 2 budgets x the paper's seven algorithms (the random-init controls
    # run in config/protect_none.yaml, config/two_families.yaml and config/extended.yaml)
    assert counts == {
        "prepare_model": 1,
        "evaluation_settings": 1,  # the evaluation options and provenance: a change reruns every evaluation
        "prior": 2,
        "search": 28,
        "evaluate_pass": 1,  # every set of the model (both calibrations and budgets, dense) in one pass
        "evaluate_selections": 4,  # one per (calibration, M): its seven sets' files, from the cache
        "evaluate_dense": 1,
        "aggregate_tables": 1,
        "render": 1,
        "all": 1,
    }


def test_seeds_profile_dag():
    # config/seeds.yaml: three seeds, each with its own prior (redrawn calibration) and searches,
    # under results/<model>/<calibration>/seed<k>/; the dense model and the aggregate stay single.
    output = run_snakemake("-n", "--configfile", "config.yaml", "config/seeds.yaml").stdout
    counts = job_counts(output)
    assert counts["prior"] == 2 * 3 and counts["search"] == 28 * 3 and counts["evaluate_selections"] == 4 * 3
    assert counts["evaluate_pass"] == 3  # one per seed
    assert counts["evaluate_dense"] == 1 and counts["aggregate_tables"] == 1
    seeds = {wildcards.get("seed") for rule, wildcards in planned_jobs(output) if rule == "search"}
    assert seeds == {"0", "1", "2"}
    assert "seed2/M7/beam/selection.json" in output


def test_paper_profile_dag():
    output = run_snakemake("-n", "-p", "--configfile", "config/paper.yaml").stdout
    jobs = planned_jobs(output)
    counts = Counter(rule for rule, _ in jobs)
    assert counts["search"] == 84  # 3 models x 2 calibrations x 2 budgets x 7 algorithms
    assert counts["evaluate_selections"] == 12  # 3 models x 2 calibrations x 2 budgets
    assert counts["evaluate_pass"] == 0  # pass_per: cell: each of them is a pass of its own on a GPU
    assert counts["evaluate_dense"] == 3
    assert counts["prior"] == 6
    assert counts["prepare_model"] == 3
    models = {w["model"] for rule, w in jobs if rule == "search"}
    assert models == {"llama3-8b", "llama31-8b", "qwen3-8b"}  # replaces, not adds to, the default
    assert "--dtype auto --device cuda" in output and "--n-samples 64 --seq-len 2048" in output


# Dry-run job counts of every preset in an empty working directory, recorded before the config ->
# CLI mapping moved into depthprune.workflow (issue 36); the shell commands were identical too. The
# default (48 -> 40) and seeds (134 -> 110) presets lost the two random-init controls' 8 searches per
# seed when the default took [22]'s barrier and held-out scoring; the presets that keep the controls
# (two_families, extended) pin them and plan as before.
# Issue 45 added one evaluation_settings job per model (the evaluation options' stamp file).
# Issue 56 added CBO's exact-pairs control to extended (393 -> 429: one search per model,
# calibration, seed and M) and the preset config/cbo_control.yaml. Issue 67 added the control
# cbo_taylor to both (extended 429 -> 465, cbo_control 82 -> 98: one search per cell).
PRESET_JOBS = {
    (): 41,
    ("config/smoke.yaml",): 41,
    ("config/paper.yaml",): 114,
    ("config.yaml", "config/seeds.yaml"): 111,
    ("config/protect_none.yaml",): 49,
    ("config/extended.yaml",): 465,
    ("config/two_families.yaml",): 95,
    ("config/calibration_size.yaml",): 82,
    ("config/cbo_control.yaml",): 98,
    ("config/paper.yaml", "config/seeds.yaml"): 318,
}


@pytest.mark.parametrize("configfiles", list(PRESET_JOBS), ids=lambda files: "+".join(files) or "default")
def test_every_preset_plans_its_jobs(configfiles, tmp_path, data_dir):
    files = ["config.yaml", *(f for f in configfiles if f != "config.yaml")]  # paths from the temporary folder
    args = ["-n", "--config", f"data_dir={data_dir}", "--configfile", *(str(REPO / f) for f in files)]
    counts = job_counts(run_snakemake(*args, workdir=tmp_path).stdout)
    assert sum(counts.values()) == PRESET_JOBS[configfiles], counts


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("budgets=[0]", "budgets"),
        ("bogus_key=1", "bogus_key"),
        ("calibrations=[ppl_wiki]", "calibrations"),
        ("search_params={ga: {populaton: 3}}", "populaton"),
        ("model_table={a/b: {spec: x}}", "a/b"),
        ("evaluation={limit: 0}", "limit"),
    ],
)
def test_invalid_config_fails_naming_the_key(override, named):
    proc = run_snakemake("-n", "--config", override, check=False)
    assert proc.returncode != 0
    message = proc.stdout + proc.stderr
    assert named in message
    if override.startswith(("bogus_key", "search_params")):  # a misspelt key: one short message
        assert "unknown key" in message and "allowed:" in message and len(message.splitlines()) < 15
    else:
        assert "ValidationError" in message


def test_plan_time_checks_name_the_key_or_file(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    proc = run_snakemake("-n", "--config", f"data_dir={mirror}", check=False)
    message = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"data_dir '{mirror}' lacks" in message and "c4/train.jsonl" in message
    proc = run_snakemake("-n", "--config", "model_table={smollm2-135m: {protected_layers: [30]}}", check=False)
    assert proc.returncode != 0 and "protected_layers [30] outside 0..29" in proc.stdout + proc.stderr


def test_unknown_model_alias_is_named():
    proc = run_snakemake("-n", "--config", "models=[smollm2-135m, nosuch]", check=False)
    assert proc.returncode != 0
    assert "models: nosuch not in model_table" in proc.stdout + proc.stderr


def test_command_line_values_are_typed():
    # Snakemake reads nested --config values as strings; the workflow gives them their YAML types.
    counts = job_counts(run_snakemake("-n", "--config", "budgets=[7,9,11]").stdout)
    assert counts["search"] == 42  # 3 budgets x 2 calibrations x the paper's 7 algorithms


def test_lint_and_format():
    lint = run_snakemake("--lint", check=False)
    assert lint.returncode == 0 and "Congratulations" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    snakefmt = shutil.which("snakefmt")
    if snakefmt is None:
        pytest.skip("snakefmt not installed")
    fmt = subprocess.run([snakefmt, "--check", "Snakefile", "workflow/"], cwd=REPO, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stderr


# --------------------------------------------------------------------------- runs with a stand-in CLI

FAKE_CLI = textwrap.dedent(
    '''
    """Stand-in for the depthprune CLI: writes placeholder outputs and records each call."""
    import json, os, sys, time
    from pathlib import Path

    argv = sys.argv[1:]
    if argv[:1] == ["--log-file"]:
        Path(argv[1]).parent.mkdir(parents=True, exist_ok=True)
        Path(argv[1]).write_text("stand-in\\n")
        argv = argv[2:]
    command = argv[0]

    def value(flag):
        return argv[argv.index(flag) + 1]

    def write(path, text="placeholder\\n"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)

    call = {"command": command, "argv": argv}
    if command == "search":
        workdir = Path(value("--workdir"))
        call["workdir_existed"] = (workdir / "study").exists()
        write(workdir / "study")
    with open(os.environ["FAKE_CALLS"], "a") as calls:
        calls.write(json.dumps(call) + "\\n")
    if command == "search" and value("--algorithm") == os.environ.get("FAKE_BLOCK_ALGORITHM"):
        time.sleep(120)  # killed by the test
    if command == "prepare-model":
        write(value("--out"), json.dumps({"model": value("--model"), "n_layers": 8}))
    elif command == "prior":
        write(value("--out"), "{}\\n")
    elif command == "search":
        write(value("--out-selection"), "{}\\n")
        write(value("--out-trace"))
    elif command == "evaluate":  # one --out-* of each kind per --selection (a group) or one (dense)
        for flag, text in (
            ("--out-metrics", "placeholder\\n"),
            ("--out-raw", "{}\\n"),
            ("--out-samples", "x"),
            ("--out-pass", "{}\\n"),
        ):
            for index in (i for i, arg in enumerate(argv) if arg == flag):
                write(argv[index + 1], text)
    elif command == "aggregate":
        if os.environ.get("FAKE_FAIL_AGGREGATE"):
            sys.exit("stand-in depthprune: aggregate fails")
        for name in ("selections", "metrics", "summary"):
            for ext in ("csv", "parquet"):
                write(Path(value("--out")) / f"{name}.{ext}")
        write(Path(value("--out")) / "samples.parquet")
    elif command == "render":
        out = Path(value("--out"))
        for i in (1, 2, 3):
            for ext in ("pdf", "png"):
                write(out / f"figure{i}.{ext}")
        for i in range(1, 7):
            for ext in ("csv", "md", "tex"):
                write(out / "tables" / f"table{i}.{ext}")
        for ext in ("csv", "md"):
            write(out / "tables" / f"observations.{ext}")
            write(out / "tables" / f"paper_comparison.{ext}")
    else:
        sys.exit(f"stand-in depthprune: unknown command {command}")
    '''
)


class StandInRun:
    """A working directory, the smoke profile and the stand-in CLI first on PATH."""

    def __init__(self, root: Path):
        self.workdir = root / "work"
        self.workdir.mkdir()
        bin_dir = root / "bin"
        bin_dir.mkdir()
        cli = bin_dir / "depthprune"
        cli.write_text(f"#!{sys.executable}\n{FAKE_CLI}")
        cli.chmod(0o755)
        self.calls_file = root / "calls.jsonl"
        self.env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_CALLS=str(self.calls_file))
        self.config_args = [
            "--configfile",
            str(REPO / "config.yaml"),
            str(REPO / "config" / "smoke.yaml"),
        ]
        self.mirror = (REPO.parent / "shared" / "data").resolve()  # smoke's ../shared/data from the repository

    def args(self, *args: str, config: tuple[str, ...] = ()) -> list[str]:
        return [
            *self.config_args,
            "--config",
            "algorithms=[" + ",".join(SEVEN[:-1]) + "]",
            f"data_dir={self.mirror}",
            *config,
            *args,
        ]

    def run(self, *args: str, config: tuple[str, ...] = (), env: dict | None = None, check: bool = True):
        return run_snakemake(*self.args(*args, config=config), workdir=self.workdir, env=env or self.env, check=check)

    def calls(self) -> list[dict]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def reset_calls(self) -> None:
        self.calls_file.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> StandInRun:
    """The smoke profile (six algorithms) run to the end with the stand-in CLI."""
    run = StandInRun(tmp_path_factory.mktemp("workflow"))
    run.run("--cores", "2")
    assert (run.workdir / "figures" / "smoke" / "tables" / "table5.csv").exists()
    run.reset_calls()
    return run


def test_finished_run_has_nothing_to_do(finished):
    proc = finished.run("--cores", "2")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert finished.calls() == []


def test_a_second_run_is_told_which_run_works_here(finished):
    """Issue 70: Snakemake's refusal of a second run advises --unlock. The finished run removed its
    record; a live one's is named, in a dry run too, with what to do instead."""
    from depthprune.running_study import RECORD

    assert not (finished.workdir / RECORD).exists()  # removed when the run ended
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "snakemake", "--cores", "2"])
    try:
        record = {"pid": stand_in.pid, "started": "2026-12-07 10:00:00", "command": "snakemake --cores 2"}
        (finished.workdir / RECORD).write_text(json.dumps(record))
        proc = finished.run("-n")
        line = f"Warning: another snakemake (PID {stand_in.pid}, started 2026-12-07 10:00:00: snakemake --cores 2)"
        assert line in proc.stderr and "do not pass --unlock while it runs" in proc.stderr, proc.stderr
    finally:
        stand_in.kill()
        stand_in.wait()
    proc = finished.run("-n")  # the process is gone: its record is a killed run's, and says nothing
    assert "another snakemake" not in proc.stderr
    (finished.workdir / RECORD).unlink()


def test_changing_one_algorithm_parameter_reruns_only_its_jobs(finished):
    output = finished.run("-n", config=("search_params={ga: {generations: 3}}",)).stdout
    jobs = planned_jobs(output)
    searches = [w for rule, w in jobs if rule == "search"]
    assert len(searches) == 4 and {w["algorithm"] for w in searches} == {"ga"}
    # The pass reruns and computes only the ga sets again (the evaluation cache answers the others);
    # every group holding a ga set writes its files again.
    assert Counter(rule for rule, _ in jobs) == {
        "search": 4,
        "evaluate_pass": 1,
        "evaluate_selections": 4,
        "aggregate_tables": 1,
        "render": 1,
        "all": 1,
    }


def test_adding_a_budget_runs_only_its_jobs(finished):
    jobs = planned_jobs(finished.run("-n", config=("budgets=[2,3,4]",)).stdout)
    assert {w["budget"] for rule, w in jobs if rule in ("search", "evaluate_selections")} == {"4"}
    assert Counter(rule for rule, _ in jobs) == {
        "search": 12,
        "evaluate_pass": 1,  # computes the new budget's sets only; the other groups do not rerun
        "evaluate_selections": 2,
        "aggregate_tables": 1,
        "render": 1,
        "all": 1,
    }


def test_adding_an_algorithm_runs_only_its_jobs(finished):
    jobs = planned_jobs(finished.run("-n", config=(f"algorithms=[{','.join(SEVEN)}]",)).stdout)
    assert {w["algorithm"] for rule, w in jobs if rule == "search"} == {"fast_block_select"}
    # The pass reruns and computes the four new sets: the evaluation cache answers the others
    # (tests/test_set_group.py: adding one set computes one new set); the four groups write theirs.
    assert Counter(rule for rule, _ in jobs) == {
        "search": 4,
        "evaluate_pass": 1,
        "evaluate_selections": 4,
        "aggregate_tables": 1,
        "render": 1,
        "all": 1,
    }


def test_adding_a_model_runs_only_its_jobs(finished):
    models = ("model_table={tiny4: {spec: 'tiny:llama-4'}}", "models=[tiny, tiny4]")
    jobs = planned_jobs(finished.run("-n", config=models).stdout)
    assert {w["model"] for _, w in jobs if "model" in w} == {"tiny4"}
    assert Counter(rule for rule, _ in jobs)["search"] == 24


def test_figures_target_rerenders_without_model_jobs(finished):
    finished.run("--cores", "2", "figures", "--forcerun", "render")
    assert [call["command"] for call in finished.calls()] == ["render"]
    finished.reset_calls()


@pytest.mark.slow
def test_killed_run_resumes_without_recomputing(tmp_path):
    """Marked ``slow``: an end-to-end Snakemake run killed mid-search and resumed (about 10 s under AVX2).

    SIGKILL mid-run (a BO search in flight), then the same command (+ --unlock, --rerun-incomplete)."""
    run = StandInRun(tmp_path)
    command = [*SNAKEMAKE, "--directory", str(run.workdir), *run.args("--cores", "1", "--rerun-incomplete")]
    blocking = dict(run.env, FAKE_BLOCK_ALGORITHM="bo")
    proc = subprocess.Popen(
        command, cwd=REPO, env=blocking, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while not any(c["command"] == "search" and "bo" in c["argv"] for c in run.calls()):
            assert proc.poll() is None and time.monotonic() < deadline, "the BO search never started"
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = run.calls()
    done_before = {tuple(c["argv"]) for c in before if c["command"] != "search" or "bo" not in c["argv"]}
    run.reset_calls()

    run_snakemake("--unlock", *run.args(), workdir=run.workdir, env=run.env)
    run_snakemake(*run.args("--cores", "2", "--rerun-incomplete"), workdir=run.workdir, env=run.env)

    after = run.calls()
    assert not done_before & {tuple(c["argv"]) for c in after}, "a finished job ran again"
    resumed_bo = [
        c for c in after if c["command"] == "search" and c["argv"][c["argv"].index("--algorithm") + 1] == "bo"
    ]
    killed_bo = [c for c in before if c["command"] == "search" and "bo" in c["argv"]]
    assert killed_bo[0]["argv"] in [c["argv"] for c in resumed_bo]
    assert all(c["workdir_existed"] for c in resumed_bo if c["argv"] == killed_bo[0]["argv"])  # the study survived
    assert (run.workdir / "figures" / "smoke" / "figure3.png").exists()


# --------------------------------------------------------------------------- issue 13: reruns, paths


def test_moving_the_mirror_plans_nothing_and_changing_its_content_reruns(finished, tmp_path):
    """Where the offline mirror lies is not what a result depends on; its content is (provenance)."""
    moved = tmp_path / "moved"
    shutil.copytree(finished.mirror, moved)
    proc = finished.run("-n", config=(f"data_dir={moved}",))
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    piqa = moved / "piqa" / "validation.jsonl"
    piqa.write_text(piqa.read_text() + "\n")  # a benchmark file: the evaluations rerun, no search
    counts = job_counts(finished.run("-n", config=(f"data_dir={moved}",)).stdout)
    assert counts["evaluate_pass"] == 1 and "search" not in counts and "prior" not in counts
    train = moved / "c4" / "train.jsonl"
    train.write_text(train.read_text() + "\n")  # ppl_c4's calibration: its prior and searches rerun
    jobs = planned_jobs(finished.run("-n", config=(f"data_dir={moved}",)).stdout)
    assert {w["calibration"] for rule, w in jobs if rule in ("prior", "search")} == {"ppl_c4"}


def test_forcerun_render_plans_only_render(finished):
    for config in ((),):
        jobs = planned_jobs(finished.run("-n", "figures", "--forcerun", "render", config=config).stdout)
        assert Counter(rule for rule, _ in jobs) == {"render": 1, "figures": 1}


def test_forced_rule_recomputes_without_reading_its_cache(finished):
    """--forcerun search passes --recompute to the searches only; an ordinary run never does."""
    output = finished.run("-n", "-p", "--forcerun", "search").stdout
    commands = [line for line in output.splitlines() if "depthprune" in line and "--log-file" in line]
    searches = [c for c in commands if " search " in c]
    assert searches and all("--recompute" in c for c in searches)
    assert not any("--recompute" in c for c in commands if " search " not in c)
    plain = finished.run("-n", "-p", config=("budgets=[2,3,4]",)).stdout
    assert "--recompute" not in plain


def test_memo_journal_is_not_a_param_and_follows_the_executor(finished):
    """Switching the journal reruns nothing; the SLURM profile run locally (--executor local) keeps
    WAL, since the journal follows where the jobs run (issue 48; the cluster case:
    tests/test_slurm_profile.py)."""
    assert "Nothing to be done" in finished.run("-n", config=("evaluator={memo_journal: delete}",)).stdout
    output = run_snakemake(
        "-n",
        "-p",
        "--workflow-profile",
        "workflow/profiles/slurm",
        "--executor",
        "local",
        "--configfile",
        "config.yaml",
        "config/smoke.yaml",
        "--forcerun",
        "prior",
    ).stdout
    priors = [line for line in output.splitlines() if "depthprune" in line and " prior " in line]
    assert priors and all("--memo-journal wal" in line for line in priors)


def test_results_folder_with_a_space(tmp_path):
    """Every path in a rule command is quoted: a results folder named 'my results' works."""
    run = StandInRun(tmp_path)
    results, figures = run.workdir / "my results", run.workdir / "my figures"
    run.run("--cores", "2", config=(f"results_dir={results}", f"figures_dir={figures}", "budgets=[2]"))
    assert list((results / "tiny" / "ppl_c4").glob("**/M2/ga/selection.json"))
    assert (results / "aggregate" / "summary.csv").exists()
    assert (figures / "figure1.png").exists()
    searches = [c for c in run.calls() if c["command"] == "search"]
    assert searches and all(c["argv"][c["argv"].index("--prior") + 1].startswith(str(results)) for c in searches)


def test_readme_quotes_the_paper_presets_dry_run_job_count():
    """The README's cluster section states the job count that the dry run above plans."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    jobs = PRESET_JOBS[("config/paper.yaml",)]
    assert f"The paper preset plans {jobs} jobs" in readme
    assert f"plan: jobs={jobs} " in readme  # depthprune plan's last line agrees (tests/test_plan.py runs it)


# --------------------------------------------------------------------------- issue 45: one run, no stale output


def changed_python(tmp_path: Path, code: str) -> dict:
    """An environment whose Python runs ``code`` at start-up (sitecustomize): a package upgrade or a
    SCORING_VERSION bump as Snakemake's planning sees it, with no real reinstall."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(code)
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


LM_EVAL_UPGRADED = """
import importlib.metadata as _metadata
_version = _metadata.version
_metadata.version = lambda name: "99.0" if name in ("lm-eval", "lm_eval") else _version(name)
"""
SCORING_BUMPED = "import depthprune.versions as _v\n_v.SCORING_VERSION += 1\n"


@pytest.mark.parametrize("change", ["evaluation limit", "benchmark file", "lm-eval version", "SCORING_VERSION"])
def test_a_changed_evaluation_input_updates_every_output_in_one_run(change, finished, tmp_path):
    """The pass reruns, and so does every job that copies its results into metrics.csv files, the
    aggregate and the figures: the first run after the change leaves nothing stale."""
    config, env = (), finished.env
    if change == "evaluation limit":
        config = ("evaluation={limit: 4}",)
    elif change == "benchmark file":
        moved = tmp_path / "mirror"
        shutil.copytree(finished.mirror, moved)
        piqa = moved / "piqa" / "validation.jsonl"
        piqa.write_text(piqa.read_text() + "\n")
        config = (f"data_dir={moved}",)
    else:
        env = {
            **finished.env,
            **changed_python(tmp_path, LM_EVAL_UPGRADED if change == "lm-eval version" else SCORING_BUMPED),
        }
    counts = job_counts(finished.run("-n", config=config, env=env).stdout)
    if change != "SCORING_VERSION":  # the scoring version is also the calibration losses' (versions.py)
        assert "search" not in counts and "prior" not in counts, counts
    assert counts["evaluation_settings"] == 1 and counts["evaluate_pass"] == 1, counts
    assert counts["evaluate_selections"] == 4 and counts["evaluate_dense"] == 1, counts  # 2 calibrations x 2 budgets
    assert counts["aggregate_tables"] == 1 and counts["render"] == 1, counts
