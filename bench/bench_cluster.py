"""Past one machine (issue 38): generation on a Ray cluster, training under torchrun.

Run: python bench/bench_cluster.py [--episodes 8] [--nodes 2] [--steps 40] [--record R]

1. Generation of ``nominal_planner`` (the shipped planner, 128 px recording) twice with the same
   seeds: on the local process pool (``r2s2r generate -j NODES``), then on a Ray cluster joined
   as a lab joins one (``ray start --head --port P --num-cpus 1``, then ``NODES - 1`` worker
   nodes, each ``ray start --address 127.0.0.1:P --num-cpus 1`` on its own, with its own temp
   dir and the cluster's auth token; :mod:`r2s2r_testing.ray_cluster`) and ``r2s2r generate
   --ray-address 127.0.0.1:P``. The two datasets are compared episode by episode
   (:func:`r2s2r_datagen.compare.compare_datasets`); which node ran a worker is read from the
   nodes' worker logs. The cluster is stopped on every path out (its nodes' process groups:
   ``ray stop`` would end every Ray process of the machine).
2. A Ray address where nothing answers: the time to the one-line refusal (goal <= 30 s).
3. Training with the paper preset's training config (``config/experiment/paper.yaml``: 128 px,
   batch 64, one thread per process) on the generated dataset (as both the real and the
   simulated source), ``--steps`` steps three ways: one process, ``torchrun --standalone
   --nproc_per_node 2``, and two ``torchrun --nnodes 2 --nproc_per_node 1`` commands with a
   c10d rendezvous on 127.0.0.1. Per-step losses compared; s/step from each run's samples/s.
4. The paper preset's projected wall time on 1, 2, 4, 8 machines (``bench/scaling_projection.py``)
   with this run's episode and step costs and the other costs from ``--record``.

On this 2-core machine the cluster's nodes and the two training processes share two cores, so
the figures say that the paths agree and what they cost here, not how a real cluster scales.
The last line is one JSON object: {"benchmark": "cluster", "figures": [...]}.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
import scaling_projection

os.environ.setdefault("MUJOCO_GL", "egl")
CONFIGURATION = "nominal_planner"


def _generate(
    run_dir: Path, episodes: int, workers: int, env: dict[str, str], *extra: str
) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "r2s2r.cli",
            "generate",
            "-c",
            CONFIGURATION,
            "-n",
            str(episodes),
            "-j",
            str(workers),
            "-o",
            str(run_dir),
            "--no-progress",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"r2s2r generate {' '.join(extra)} failed: {done.stderr[-2000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
    successes = [r for r in records if r["status"] == "success"]
    busy = sum(r.get("timings", {}).get("total", 0.0) for r in records)
    (item,) = summary["configurations"]
    return {
        "wall_s": wall,
        "jobs_s": summary.get("jobs_elapsed_s") or summary["elapsed_s"],
        "episodes_per_min": item["episodes_per_min"],
        "successes": len(successes),
        "episode_worker_s": busy / max(len(successes), 1),
        "dataset": run_dir / "datasets" / f"{CONFIGURATION}.hdf5",
    }


def _actor_nodes(temp_dirs: list[Path]) -> list[int]:
    """Generation workers (Ray actors) whose logs each node's temp dir holds."""
    counts = []
    for temp in temp_dirs:
        logs = temp.glob("session_*/logs/worker-*.out")
        counts.append(sum(":actor_name:_RayWorker" in p.read_text(errors="replace") for p in logs))
    return counts


def generation(args: Any, folder: Path) -> tuple[list[benchlib.Figure], dict[str, Any]]:
    """Part 1 and 2: local pool vs Ray cluster, and the refusal of a dead address."""
    from r2s2r_datagen.compare import compare_datasets
    from r2s2r_testing.ray_cluster import LocalRayCluster, free_port

    local = _generate(folder / "local", args.episodes, args.nodes, dict(os.environ))
    cluster = LocalRayCluster(Path(tempfile.mkdtemp(prefix="r2s2r-rc-")), args.nodes - 1, 1)
    try:
        cluster.start()
        ray_run = _generate(
            folder / "ray",
            args.episodes,
            args.nodes,
            cluster.env(),
            "--ray-address",
            cluster.address,
        )
        per_node = _actor_nodes(cluster.node_temp_dirs())
    finally:
        cluster.stop()
        commands = list(cluster.commands)
        shutil.rmtree(cluster.folder, ignore_errors=True)
    comparison = compare_datasets(local["dataset"], ray_run["dataset"])
    dead = f"127.0.0.1:{free_port()}"
    started = time.perf_counter()
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "r2s2r.cli",
            "generate",
            "-c",
            CONFIGURATION,
            "-n",
            "1",
            "-o",
            str(folder / "dead"),
            "--no-progress",
            "--ray-address",
            dead,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    refusal_s = time.perf_counter() - started
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    figures = [
        benchlib.Figure("local_successes", local["successes"], "ep", args.episodes),
        benchlib.Figure("ray_successes", ray_run["successes"], "ep", args.episodes),
        benchlib.Figure("same_episodes", comparison.episodes_a == comparison.episodes_b, "", True),
        benchlib.Figure("arrays_compared", comparison.arrays_compared, ""),
        benchlib.Figure(
            "arrays_bit_identical", comparison.bit_identical_arrays, "", comparison.arrays_compared
        ),
        benchlib.Figure("max_abs_difference", comparison.largest_difference, "", "<= 1e-6"),
        benchlib.Figure("dataset_differences", len(comparison.differences), "", 0),
        benchlib.Figure(
            "nodes_that_ran_workers",
            f"{sum(count > 0 for count in per_node)}/{len(per_node)}",
            "",
            f"{len(per_node)}/{len(per_node)}",
            note="a generation worker's (Ray actor's) log in the node's temp dir",
        ),
        benchlib.Figure("local_ep_per_min", round(local["episodes_per_min"], 1), "ep/min"),
        benchlib.Figure("ray_ep_per_min", round(ray_run["episodes_per_min"], 1), "ep/min"),
        benchlib.Figure("local_wall_s", round(local["wall_s"], 1), "s", note="whole command"),
        benchlib.Figure("ray_wall_s", round(ray_run["wall_s"], 1), "s", note="whole command"),
        benchlib.Figure(
            "episode_worker_s",
            round(local["episode_worker_s"], 2),
            "s",
            note="worker time per success (ledger timings)",
        ),
        benchlib.Figure("dead_address_exit", refused.returncode, "", "!= 0"),
        benchlib.Figure("dead_address_lines", len(lines), "", 1),
        benchlib.Figure("dead_address_refusal_s", round(refusal_s, 1), "s", "<= 30"),
    ]
    about = {
        "cluster_commands": commands,
        "dead_address_line": lines[-1] if lines else "",
        "episode_worker_s": local["episode_worker_s"],
        "dataset": str(local["dataset"]),
    }
    return figures, about


def _train(command: list[str], run_dir: Path, nodes: int = 1) -> tuple[list[float], float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    processes = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(nodes)
    ]
    outputs = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=3600)
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed: {stderr[-2000:]}")
        outputs.append(stdout)
    rates = [
        json.loads(line.split(" finished ", 1)[1])["samples_per_s"]
        for text in outputs
        for line in text.splitlines()
        if " finished " in line
    ]
    losses = json.loads((run_dir / "losses.json").read_text())["losses"]
    return losses, min(rates)


def training(
    args: Any, folder: Path, dataset: Path
) -> tuple[list[benchlib.Figure], dict[str, Any]]:
    """Part 3: one process vs two under torchrun, the paper preset's training config."""
    import yaml
    from r2s2r_testing.ray_cluster import free_port

    from r2s2r.experiment.config import load_preset
    from r2s2r.experiment.products import EpisodeDataset
    from r2s2r.experiment.training import train_config_for

    preset = load_preset("paper")
    source = EpisodeDataset(str(dataset), "bench")
    data = train_config_for(preset, source, source)
    data.update(
        steps=args.steps,
        checkpoint_every_steps=args.steps,
        num_threads=1,
        progress_bar=False,
        image_store_dir=None,
        cache_images=True,
        device="cpu",
    )
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "train_config.yaml"
    config.write_text(yaml.safe_dump(data))

    def train_args(name: str) -> list[str]:
        return [
            "-m",
            "r2s2r_policy.cli",
            "train",
            "--config",
            str(config),
            "--run-dir",
            str(folder / name),
            "--losses-out",
            str(folder / name / "losses.json"),
        ]

    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    one, one_rate = _train([sys.executable, *train_args("one")], folder / "one")
    # The control: one process on two threads sums in another order (rounding only).
    threads = folder / "train_config_2_threads.yaml"
    threads.write_text(yaml.safe_dump({**data, "num_threads": 2}))
    control_args = [*train_args("threads")]
    control_args[control_args.index(str(config))] = str(threads)
    control, _ = _train([sys.executable, *control_args], folder / "threads")
    two, two_rate = _train(
        [*torchrun, "--standalone", "--nproc_per_node", "2", *train_args("standalone")],
        folder / "standalone",
    )
    nnodes = [
        *torchrun,
        "--nnodes",
        "2",
        "--nproc_per_node",
        "1",
        "--rdzv_backend",
        "c10d",
        "--rdzv_endpoint",
        f"127.0.0.1:{free_port()}",
        "--rdzv_id",
        "bench",
        *train_args("nnodes"),
    ]
    nodes, nodes_rate = _train(nnodes, folder / "nnodes", nodes=2)

    def worst(other: list[float], steps: int) -> float:
        pairs = list(zip(one, other, strict=True))[:steps]
        return max(abs(a - b) / max(abs(a), 1e-12) for a, b in pairs)

    batch = data["batch_size"]
    figures = [
        benchlib.Figure("train_image_px", data["policy"]["image_height_px"], "px"),
        benchlib.Figure("train_batch", batch, "samples", note="global batch of a step"),
        benchlib.Figure(
            "standalone_loss_rel_diff_10",
            worst(two, 10),
            "",
            "<= 1e-5",
            note="largest over the first 10 steps vs one process",
        ),
        benchlib.Figure("nnodes_loss_rel_diff_10", worst(nodes, 10), "", "<= 1e-5"),
        benchlib.Figure(
            "threads_control_rel_diff",
            worst(control, args.steps),
            "",
            note=f"one process, 2 threads vs 1, all {args.steps} steps: rounding alone",
        ),
        benchlib.Figure(
            "standalone_loss_rel_diff",
            worst(two, args.steps),
            "",
            "~ threads control",
            note=f"all {args.steps} steps",
        ),
        benchlib.Figure("nnodes_loss_rel_diff", worst(nodes, args.steps), "", "~ threads control"),
        benchlib.Figure("one_process_step_s", round(batch / one_rate, 3), "s"),
        benchlib.Figure("standalone_step_s", round(batch / two_rate, 3), "s"),
        benchlib.Figure("nnodes_step_s", round(batch / nodes_rate, 3), "s"),
        benchlib.Figure(
            "ddp_speedup_2",
            round(two_rate / one_rate, 2),
            "x",
            note="2 processes on this machine's 2 cores",
        ),
    ]
    about = {
        "step_s": batch / one_rate,
        "ddp_speedup_2": two_rate / one_rate,
        "train_commands": [" ".join(["torchrun", *nnodes[3:]])],
    }
    return figures, about


def main() -> None:
    """Run the parts and print the figures."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--episodes", type=int, default=8, help="episodes per generation run")
    parser.add_argument("--nodes", type=int, default=2, help="Ray nodes (= local workers)")
    parser.add_argument("--steps", type=int, default=40, help="training steps per run")
    parser.add_argument(
        "--record",
        type=Path,
        default=benchlib.REPO / "results" / "experiment_reduced.json",
        help="experiment record for the projection's other unit costs",
    )
    args = parser.parse_args()
    figures: list[benchlib.Figure] = []
    about: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="r2s2r-bench-cluster-") as scratch:
        folder = Path(scratch)
        part, more = generation(args, folder)
        benchlib.print_table(part, "generation (printed as soon as measured)")
        figures += part
        about.update(more)
        part, more = training(args, folder / "train", Path(more["dataset"]))
        figures += part
        about.update(more)
    recorded, source = scaling_projection.recorded_costs(args.record, None)
    costs = scaling_projection.UnitCosts(
        **{
            **recorded,
            "episode_worker_s": about["episode_worker_s"],
            "step_s": about["step_s"],
            "ddp_speedup_2": about["ddp_speedup_2"],
        }
    )
    from r2s2r.experiment.config import load_preset

    size = scaling_projection.experiment_size(load_preset("paper"))
    for machines in (1, 2, 4, 8):
        hours = scaling_projection.project(costs, size, machines, args.nodes)["total_s"] / 3600
        figures.append(
            benchlib.Figure(
                f"paper_projected_{machines}m_h",
                round(hours, 1),
                "h",
                note="bench/scaling_projection.py",
            )
        )
    about["projection_costs"] = {
        "episode_worker_s": "this run",
        "step_s": "this run",
        "others": source,
    }
    benchlib.report("cluster", figures, **about)


if __name__ == "__main__":
    main()
