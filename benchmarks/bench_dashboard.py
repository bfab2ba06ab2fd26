"""The dashboard against the CLI: training time, the server's own CPU, cancel and queue waits.

    python benchmarks/bench_dashboard.py [--runs 5] [--centres 200] [--model cgpm]
                                         [--cancels 10] [--load 3] [--skip-browser]

Prints, with the load (``os.getloadavg``) before and after each part:

1. The same training (the sample upload, ``--model``, ``--centres``) from the Train
   page of a live server driven by Chromium, and by ``prefshap train`` with the form's
   defaults (``--baseline``: the page fits the UPM baseline too), interleaved,
   ``--runs`` times each; medians and their ratio. The dashboard time runs from the
   click on Train to the result on the page; the CLI time is the process's wall time
   (torch import included) and the training seconds it reports.
2. While each dashboard training runs: the server's CPU per thread
   (``/proc/PID/task``), split into the job's threads (named ``prefshap-job`` by
   :mod:`dashboard.jobs`; the BLAS/OpenMP workers a job thread starts inherit the
   name) and everything else (Streamlit's threads), as a fraction of one core.
3. Cancel latency (in this process, through :class:`dashboard.jobs.Job`): ``--cancels``
   cancels at random points of running trainings and explanations of a generated data
   set (within each kind's uncancelled duration; ``--load N`` busy processes beside them),
   seconds from ``cancel()`` to idle (the job's thread ended and the process below
   5 % of a core).
4. A small explanation (estimated < 5 s) started behind a heavy training: seconds
   until it runs, and until it is done.

Needs Chromium and Playwright for parts 1-2 (``--skip-browser`` leaves them out). The
server's disk cache is a temporary folder; trained models are removed from it before
every run, so each run trains.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SAMPLE = ROOT / "sample_data"
CHROMIUM = "/usr/bin/chromium"
JOB_THREAD = "prefshap-job"  # dashboard.jobs.JOB_THREAD_NAME
TICK = os.sysconf("SC_CLK_TCK")


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of every thread of ``pid``, with its name."""
    out: dict[int, tuple[str, float]] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
        except OSError:  # the thread has just ended
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(task)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def cpu_split(before: dict, after: dict, seconds: float) -> dict[str, float]:
    """Fractions of one core over ``seconds``: job threads, the rest, and the busiest
    other thread (threads that ended in between count what they had at ``before``: 0)."""
    job = other = 0.0
    busiest = ("", 0.0)
    for tid, (name, cpu) in after.items():
        used = cpu - before.get(tid, (name, 0.0))[1]
        if name.startswith(JOB_THREAD):
            job += used
        else:
            other += used
            if used > busiest[1]:
                busiest = (f"{name}[{tid}]", used)
    return {
        "job": job / seconds,
        "streamlit": other / seconds,
        "busiest_other": busiest[1] / seconds,
        "busiest_name": busiest[0],
    }


# -- 1, 2: a live server in Chromium ---------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(cache: Path):
    port = free_port()
    env = {**os.environ, "PREFSHAP_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    log = (cache / "streamlit.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "dashboard/app.py", "--server.headless",
         "true", "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "no server"
                time.sleep(0.3)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def job_window(pid: int, timeout_s: float = 60) -> tuple[dict, float]:
    """The server's threads once a job thread runs (or after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        threads = thread_cpu(pid)
        if time.monotonic() > deadline or any(
            name.startswith(JOB_THREAD) for name, _ in threads.values()
        ):
            return threads, time.perf_counter()
        time.sleep(0.05)


def job_seconds(threads: dict[int, tuple[str, float]]) -> float:
    """CPU seconds of the job threads so far. The BLAS / OpenMP workers a job thread
    starts inherit its name and outlive it (an idle pool), so a job runs while this
    grows, not while such threads exist."""
    return sum(cpu for name, cpu in threads.values() if name.startswith(JOB_THREAD))


def wait_until_no_job(pid: int, timeout_s: float = 600) -> None:
    """Until the server's job threads have used no CPU for 2 s (or ``timeout_s``)."""
    deadline, quiet_since = time.monotonic() + timeout_s, time.monotonic()
    used = job_seconds(thread_cpu(pid))
    while time.monotonic() < deadline and time.monotonic() - quiet_since < 2.0:
        time.sleep(0.1)
        now = job_seconds(thread_cpu(pid))
        if now > used + 0.005:
            quiet_since = time.monotonic()
        used = now


def cli_train(model: str, centres: int | None, out: Path) -> tuple[float, float]:
    """(process wall seconds, the training seconds it reports)."""
    command = [sys.executable, "-m", "prefshap_core.cli", "train", "--items",
               str(SAMPLE / "items.csv"), "--duels", str(SAMPLE / "duels.csv"),
               "--model", model, "--out", str(out), "--quiet"]  # fmt: skip
    if centres:
        command += ["--n-centres", str(centres)]
    # The same training as the Train page's: its form starts from the spec defaults,
    # where the UPM baseline is on; on the command line it is opt-in.
    from prefshap_core.models.params import spec

    if spec("baseline").default:
        command += ["--baseline"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    reported = float("nan")
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            seconds = json.loads(line).get("seconds", {})
            reported = float(seconds.get("total", sum(seconds.values()) if seconds else "nan"))
    return wall, reported


def dashboard_runs(args: argparse.Namespace) -> None:
    from playwright.sync_api import sync_playwright

    cache = Path(tempfile.mkdtemp(prefix="bench_dashboard_"))
    page_s, cli_s, cli_reported, shares = [], [], [], []
    try:
        with server(cache) as (url, proc), sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(600_000)
            page.goto(url)
            page.get_by_text("All test duels").first.wait_for()  # the demo is ready
            page.get_by_role("link", name="Data").click()
            page.get_by_text("Upload CSV files").click()
            drops = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
            drops.nth(0).set_input_files(str(SAMPLE / "items.csv"))
            drops.nth(1).set_input_files(str(SAMPLE / "duels.csv"))
            page.get_by_text("it is now the active dataset").wait_for()
            page.get_by_role("link", name="Train").click()
            page.get_by_text("Dataset: Upload").wait_for()
            model_label = {"gpm": "GPM", "cgpm": "C-GPM", "upm": "UPM"}.get(args.model)
            radio = page.get_by_role("radio", name=model_label, exact=True)
            if model_label and radio.count():
                radio.first.check(force=True)
                time.sleep(1.0)
            if args.centres:
                page.get_by_text("Advanced: override the automatic hyperparameters").click()
                box = page.get_by_role("spinbutton", name="Nyström centres")
                box.fill(str(args.centres))
                box.press("Enter")
                time.sleep(2.0)
            wait_until_no_job(proc.pid)  # the demo's explanations, started on the first page
            models = cache / "models"
            bar = page.locator('[data-testid="stProgress"]')
            for run in range(args.runs):
                shutil.rmtree(models, ignore_errors=True)  # every run trains
                time.sleep(1.0)
                for _ in range(3):  # a click during a rerun can be dropped: click again
                    started = time.perf_counter()
                    page.get_by_role("button", name="Train", exact=True).click()
                    with contextlib.suppress(Exception):
                        bar.first.wait_for(timeout=20_000)
                        break
                before, t0 = job_window(proc.pid)
                last = now = before, t0
                stages: list[str] = []  # what the progress bar said (queued? which stage?)
                busy_at, drawn_at = time.perf_counter(), None
                while time.perf_counter() - busy_at < 2.0:  # job threads idle for 2 s: done
                    time.sleep(0.2)
                    if drawn_at is None and not bar.count():  # the rerun that drew the result
                        drawn_at = time.perf_counter()
                    now = thread_cpu(proc.pid), time.perf_counter()
                    if job_seconds(now[0]) > job_seconds(last[0]) + 0.005:
                        last, busy_at = now, now[1]  # the last look while the job still ran
                    with contextlib.suppress(Exception):
                        head, _, timing = bar.first.inner_text(timeout=500).partition(" — ")
                        stage = head.rsplit(": ", 1)[-1].strip()
                        if stage and (not stages or not stages[-1].startswith(stage)):
                            stages.append(f"{stage} (at {timing.split('·')[-1].strip()})")
                try:
                    # The Train page's headline (a hidden table header has the same words).
                    headline = re.compile(r"(UPM|GPM|C-GPM) ROC AUC \((test|\d+-fold CV)\)")
                    page.get_by_text(headline).first.wait_for(timeout=120_000)
                except Exception:
                    shot = ROOT / "artifacts" / "bench_dashboard_failure.png"
                    shot.parent.mkdir(exist_ok=True)
                    page.screenshot(path=str(shot), full_page=True)
                    print(f"no result on the page: see {shot}")
                    raise
                while bar.count():  # the page has drawn the result
                    time.sleep(0.05)
                page_s.append((drawn_at or time.perf_counter()) - started)
                if last[1] - t0 > 0.5:
                    shares.append(cpu_split(before, last[0], last[1] - t0))
                wall, reported = cli_train(args.model, args.centres, cache / f"cli{run}.npz")
                cli_s.append(wall)
                cli_reported.append(reported)
                share = shares[-1] if shares else {}
                print(f"run {run + 1}: dashboard {page_s[-1]:.1f} s, CLI {wall:.1f} s "
                      f"(reports {reported:.1f} s training); server CPU during the job: "
                      f"job threads {share.get('job', float('nan')):.0%}, others "
                      f"{share.get('streamlit', float('nan')):.1%} of a core (busiest "
                      f"{share.get('busiest_name', '')} {share.get('busiest_other', 0):.1%}); "
                      f"{load()}", flush=True)  # fmt: skip
                print("   progress:", " | ".join(stages[:12]), "…" if len(stages) > 12 else "")
            # Idle, after the jobs: what the server spends with the page open.
            before, t0 = thread_cpu(proc.pid), time.perf_counter()
            time.sleep(10)
            idle = cpu_split(before, thread_cpu(proc.pid), time.perf_counter() - t0)
            browser.close()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    med_page, med_cli = statistics.median(page_s), statistics.median(cli_s)
    print(f"\ntraining ({args.model}, sample upload, centres {args.centres or 'default'}), "
          f"median of {args.runs}: dashboard {med_page:.1f} s, CLI {med_cli:.1f} s wall "
          f"({statistics.median(cli_reported):.1f} s reported): "
          f"ratio {med_page / med_cli:.2f}")  # fmt: skip
    if shares:
        print(f"server CPU outside the job's threads while a job runs: median "
              f"{statistics.median(s['streamlit'] for s in shares):.1%}, max "
              f"{max(s['streamlit'] for s in shares):.1%} of a core")  # fmt: skip
    print(f"server CPU with the page open and no job: {idle['streamlit']:.1%} of a core")


# -- 3, 4: cancel latency and the small-job lane, in this process ------------------------------
def process_busy_fraction(seconds: float = 0.3) -> float:
    pid = os.getpid()
    before, t0 = thread_cpu(pid), time.perf_counter()
    time.sleep(seconds)
    after = thread_cpu(pid)
    used = sum(cpu - before.get(tid, (n, 0.0))[1] for tid, (n, cpu) in after.items())
    return used / (time.perf_counter() - t0)


def generated_data(n_duels: int, n_items: int, seed: int = 0):
    """A duel set with 4 numeric features and a noisy linear utility."""
    import numpy as np

    from prefshap_core.data.duel_data import DuelData
    from prefshap_core.data.feature_space import FeatureSpace

    rng = np.random.default_rng(seed)
    names = ("a", "b", "c", "d")
    space = FeatureSpace(names, names, np.arange(4), np.zeros(4), np.ones(4))
    features = rng.normal(size=(n_items, 4))
    left = rng.integers(0, n_items, n_duels)
    right = (left + 1 + rng.integers(0, n_items - 1, n_duels)) % n_items
    score = features @ np.array([1.0, -0.5, 0.3, 0.0])
    noisy = score[left] - score[right] + rng.normal(size=n_duels)
    return DuelData(
        name="generated", item_ids=np.array([f"i{k}" for k in range(n_items)]),
        items=features, item_space=space, left=left, right=right,
        y=np.where(noisy > 0, 1, -1).astype(np.int8),
        duel_ids=np.array([str(k) for k in range(n_duels)]),
    )  # fmt: skip


def train_work(data, seed: int):
    from prefshap_core.workflow.settings import TrainSettings
    from prefshap_core.workflow.training import train

    return lambda progress: train(data, TrainSettings(kind="gpm", seed=seed), progress)


def explain_work(function, data, duels):
    from prefshap_core.workflow.explaining import explain_duels

    return lambda progress: explain_duels(function, data, duels, progress=progress)


@contextmanager
def background_load(n_processes: int):
    """``n_processes`` busy processes while the block runs (the load the criteria name)."""
    spin = [sys.executable, "-c", "while True: pass"]
    spinners = [subprocess.Popen(spin) for _ in range(n_processes)]
    try:
        # The 1-minute load average climbs with a 1-minute time constant: wait until it
        # shows the spinners (at most 2 minutes) before the first cancel.
        waited = time.perf_counter()
        while spinners and os.getloadavg()[0] < 0.9 * n_processes:
            if time.perf_counter() - waited > 120:
                break
            time.sleep(1.0)
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def cancel_latencies(n_cancels: int, seed: int = 0) -> None:
    """``n_cancels`` cancels of running jobs, alternately training and explaining.

    Each kind's job is first run once uncancelled; every cancel then falls at a uniform
    random point of that run's duration (5-95 %), so each lands inside a running job.
    A job that still ends before its cancel (the load moved) is counted as a miss and
    drawn again, up to ``3 * n_cancels`` jobs.
    """
    import numpy as np

    from dashboard.jobs import HeavyJobGate, Job
    from prefshap_core.workflow.settings import TrainSettings
    from prefshap_core.workflow.training import train

    rng = random.Random(seed)
    data = generated_data(3000, 1800)
    trained = train(data, TrainSettings(kind="gpm", seed=0, n_centres=300))
    test = np.asarray(trained.split.test)[:400]
    gate = HeavyJobGate(1)

    def start(kind: str, k: int) -> Job:
        work = (
            train_work(data, k) if kind == "train" else explain_work(trained.function, data, test)
        )
        return Job(f"{kind}{k}", kind, work, heavy=True, gate=gate).start()

    duration: dict[str, float] = {}
    for kind in ("train", "explain"):
        began = time.perf_counter()
        start(kind, 0).wait()
        duration[kind] = time.perf_counter() - began
    print("  uncancelled: " + ", ".join(f"{k} {d:.2f} s" for k, d in duration.items()) +
          f"; {load()}", flush=True)  # fmt: skip
    latencies: list[tuple[str, float, float]] = []
    misses = 0
    for k in range(1, 3 * n_cancels + 1):
        if len(latencies) == n_cancels:
            break
        kind = "train" if len(latencies) % 2 == 0 else "explain"
        at = rng.uniform(0.05, 0.95) * duration[kind]
        job = start(kind, k)
        time.sleep(at)
        if job.finished:
            misses += 1
            print(f"  {kind} {k}: ended before its cancel at {at:.2f} s")
            continue
        stage = job.update.stage if job.update is not None else "starting"
        clicked = time.perf_counter()
        job.cancel()
        job.wait()
        ended = time.perf_counter() - clicked
        while process_busy_fraction(0.2) >= 0.05:
            pass
        latencies.append((kind, ended, time.perf_counter() - clicked - 0.2))
        print(f"  {kind} cancel {len(latencies)} at {at:.2f} s ({stage}): job thread ended "
              f"{ended:.2f} s after the cancel, idle after {latencies[-1][2]:.2f} s "
              f"({job.state}); {load()}", flush=True)  # fmt: skip
    if latencies:
        idle = [t for _, _, t in latencies]
        print(f"cancel to idle over {len(idle)} cancels ({misses} drawn again): median "
              f"{statistics.median(idle):.2f} s, max {max(idle):.2f} s; {load()}")  # fmt: skip


def small_behind_heavy() -> None:
    import numpy as np

    from dashboard.jobs import Job
    from prefshap_core.workflow.explaining import explain_duels
    from prefshap_core.workflow.settings import TrainSettings
    from prefshap_core.workflow.training import train

    data = generated_data(3000, 1800, seed=1)
    small = generated_data(200, 30, seed=2)
    model = train(small, TrainSettings(kind="gpm", seed=0, n_centres=50))
    heavies = [
        Job(
            f"heavy{i}", "heavy", lambda p, i=i: train(data, TrainSettings(seed=i), p), heavy=True
        ).start()
        for i in range(3)
    ]  # more than the heavy lane holds: some wait in line
    time.sleep(1.0)
    began = threading.Event()

    def explain(progress):
        began.set()
        return explain_duels(model.function, small, np.arange(25), progress=progress)

    clicked = time.perf_counter()
    job = Job("small", "small", explain, heavy=True, estimate_s=1.0).start()
    began.wait(60)
    waited = time.perf_counter() - clicked
    job.wait()
    print(f"25-duel explanation behind {len(heavies)} heavy trainings: started after "
          f"{waited:.2f} s, done after {time.perf_counter() - clicked:.2f} s ({job.state}); "
          f"{load()}")  # fmt: skip
    for heavy in heavies:
        heavy.cancel()
    for heavy in heavies:
        heavy.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="cgpm")
    parser.add_argument("--centres", type=int, default=200, help="0: the default")
    parser.add_argument("--cancels", type=int, default=10)
    parser.add_argument("--skip-browser", action="store_true")
    parser.add_argument("--skip-cancels", action="store_true")
    parser.add_argument(
        "--load", type=int, default=0, help="busy processes beside the cancels (2 cores: 3 for ~4)"
    )
    args = parser.parse_args()
    print(f"cores {os.cpu_count()}; {load()}", flush=True)
    if not args.skip_browser:
        dashboard_runs(args)
    if not args.skip_cancels:
        with background_load(args.load):
            print(f"\ncancels, {args.load} busy processes beside them ({load()})", flush=True)
            cancel_latencies(args.cancels)
    print(flush=True)
    small_behind_heavy()


if __name__ == "__main__":
    main()
