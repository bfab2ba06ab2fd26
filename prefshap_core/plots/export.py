"""Figure and table export: PNG/SVG (kaleido + Chromium), interactive HTML, CSV.

Static images need kaleido 1.x and a Chromium-family browser. Starting the browser
costs seconds, so one is kept running between exports (a process-wide
``StaticExporter``). We run our own small server rather than
``kaleido.start_sync_server()``: that one waits forever when the browser fails to
start (its worker thread dies, the caller blocks on a queue with no timeout) and hands
results to whichever thread asks first when several export at once (Streamlit runs
each session in its own thread). Here every wait has a timeout, exports are
serialised, and every failure becomes a ``StaticExportUnavailable`` so the caller can
offer HTML instead.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.metadata
import os
import shutil
import signal
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Literal

import plotly.graph_objects as go

from prefshap_core.csv_safety import to_csv_bytes
from prefshap_core.errors import StaticExportUnavailable
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interaction_explanation import InteractionExplanation

DEFAULT_WIDTH = 820
DEFAULT_HEIGHT = 500
_BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_browser() -> tuple[str | None, str]:
    """(path, how it was found) of a Chromium-family browser, or (None, why not).

    Order: ``BROWSER_PATH`` (kaleido's own variable; if set it must be right, so a
    typo is reported rather than silently replaced), Debian's /usr/bin/chromium, the
    usual names on PATH, then kaleido's own search (which also finds the copy
    ``kaleido_get_chrome`` downloads).
    """
    env_path = os.environ.get("BROWSER_PATH")
    if env_path:
        if _is_executable(env_path):
            return env_path, f"BROWSER_PATH={env_path}"
        return None, f"BROWSER_PATH={env_path!r} is not an executable file"
    if _is_executable("/usr/bin/chromium"):
        return "/usr/bin/chromium", "/usr/bin/chromium"
    for name in _BROWSER_NAMES:
        found = shutil.which(name)
        if found and _is_executable(found):
            return found, f"{name} on PATH ({found})"
    try:
        from choreographer.browsers.chromium import Chromium

        found = Chromium.find_browser(skip_local=False)
    except Exception:  # any failure of a best-effort search means "not found"
        found = None
    if found and _is_executable(found):
        return str(found), f"kaleido's browser search ({found})"
    return None, (
        "no Chromium or Chrome found: install the 'chromium' package "
        "(apt-get install -y chromium) or set BROWSER_PATH to a Chrome executable"
    )


def _is_executable(path: str) -> bool:
    p = Path(path)
    return p.is_file() and os.access(p, os.X_OK)


def _kaleido_problem() -> str | None:
    """Why kaleido cannot be used, or None when kaleido >= 1 is installed."""
    try:
        version = importlib.metadata.version("kaleido")
    except importlib.metadata.PackageNotFoundError:
        return "the 'kaleido' package (version 1 or later) is not installed"
    if int(version.split(".")[0]) < 1:
        return f"kaleido {version} is too old: static export needs kaleido 1 or later"
    return None


class StaticExporter:
    """One headless Chromium, started on first use and kept for later exports.

    Thread-safe: exports are serialised. A browser that fails to start is remembered
    (``available()`` then says why, and exports fail fast instead of retrying a
    multi-second start on every click); a browser that dies later is restarted once
    on the next export.
    """

    def __init__(
        self,
        browser_path: str | None = None,
        *,
        start_timeout_s: float = 60.0,
        render_timeout_s: float = 60.0,
    ) -> None:
        self._browser_path = browser_path
        self._start_timeout_s = start_timeout_s
        self._render_timeout_s = render_timeout_s
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._kaleido: Any = None
        self._opening: Any = None  # a browser being started, so a timeout can close it
        self._start_failure: str | None = None

    # -- public -------------------------------------------------------------------
    def available(self) -> tuple[bool, str]:
        """Cheap check (starts nothing): can static export be attempted, and why not."""
        problem = _kaleido_problem()
        if problem:
            return False, problem
        if self._start_failure:
            return False, self._start_failure
        path, how = self._resolve_browser()
        if path is None:
            return False, how
        state = "running" if self._kaleido is not None else "starts on first export"
        return True, f"Chromium from {how} ({state})"

    def export(self, fig: go.Figure, fmt: Literal["png", "svg"], *, scale: float = 1.0) -> bytes:
        """The figure as PNG or SVG bytes, at the figure's own width and height."""
        spec = _figure_spec(fig)
        opts = {
            "format": fmt,
            "width": spec["layout"].get("width") or DEFAULT_WIDTH,
            "height": spec["layout"].get("height") or DEFAULT_HEIGHT,
            "scale": scale,
        }
        with self._lock:
            for attempt in range(2):
                kaleido_obj = self._ensure_started()
                try:
                    return self._run(
                        kaleido_obj.calc_fig(spec, opts=opts), self._render_timeout_s + 10
                    )
                except FutureTimeout:
                    self._shutdown()
                    raise StaticExportUnavailable(
                        f"rendering the figure took longer than {self._render_timeout_s:.0f} s"
                    ) from None
                except Exception as exc:
                    if attempt == 0 and _browser_died(exc):
                        self._shutdown()  # restart once: a crashed browser is not a verdict
                        continue
                    raise StaticExportUnavailable(
                        f"rendering the figure failed: {_describe(exc)}"
                    ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Stop the browser (a later export starts a fresh one)."""
        with self._lock:
            self._shutdown()

    @property
    def running(self) -> bool:
        return self._kaleido is not None

    @property
    def browser_pid(self) -> int | None:
        """Process id of the running browser (its wrapper process), for diagnostics."""
        proc = getattr(self._kaleido, "subprocess", None)
        return None if proc is None else int(proc.pid)

    # -- internals ----------------------------------------------------------------
    def _resolve_browser(self) -> tuple[str | None, str]:
        if self._browser_path is None:
            return find_browser()
        if _is_executable(self._browser_path):
            return self._browser_path, self._browser_path
        return None, f"{self._browser_path!r} is not an executable file"

    def _ensure_started(self) -> Any:
        if self._kaleido is not None:
            return self._kaleido
        ok, reason = self.available()
        if not ok:
            raise StaticExportUnavailable(f"static export unavailable: {reason}")
        path, _ = self._resolve_browser()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="prefshap-kaleido", daemon=True
        )
        self._thread.start()
        try:
            self._kaleido = self._run(self._open(path), self._start_timeout_s)
        except Exception as exc:
            self._shutdown(graceful=False)
            why = (
                f"the browser did not start within {self._start_timeout_s:.0f} s"
                if isinstance(exc, FutureTimeout)
                else f"the browser ({path}) failed to start: {_describe(exc)}"
            )
            self._start_failure = why
            raise StaticExportUnavailable(f"static export unavailable: {why}") from exc
        return self._kaleido

    async def _open(self, path: str | None) -> Any:
        import kaleido

        # mathjax=False: its default is a CDN script, and we render no LaTeX; offline
        # machines would otherwise wait on the network at every page load.
        k = kaleido.Kaleido(n=1, timeout=self._render_timeout_s, mathjax=False, path=path)
        self._opening = k
        await k.open()
        self._opening = None
        return k

    def _run(self, coroutine: Any, timeout: float) -> Any:
        # On timeout the task is left running (not cancelled): _shutdown kills the
        # browser, which ends it, and its outcome is still collected by the future.
        assert self._loop is not None
        future: Future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=timeout)

    def _shutdown(self, *, graceful: bool = True) -> None:
        """Close the browser (politely when it still answers), then make sure its
        process group is gone and stop the event-loop thread."""
        loop, kaleido_obj = self._loop, self._kaleido or self._opening
        self._kaleido = self._opening = None
        if loop is None:
            return
        if kaleido_obj is not None and graceful and loop.is_running():
            # A broken browser may not close politely; it is killed below anyway.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(kaleido_obj.close(), loop).result(timeout=8)
        _kill_browser_processes(kaleido_obj)
        if loop.is_running():
            # Pending tasks of a dead browser: nothing left to save.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_cancel_other_tasks(), loop).result(timeout=5)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        if not loop.is_running():
            loop.close()
        self._loop, self._thread = None, None


async def _cancel_other_tasks() -> None:
    me = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not me]
    for task in others:
        task.cancel()
    await asyncio.wait(others, timeout=3) if others else None


def _kill_browser_processes(kaleido_obj: Any) -> None:
    """SIGKILL the browser's process group. choreographer starts the browser (through
    a small wrapper process) in a new session, so the group is exactly the processes
    this exporter started; killing it leaves no orphaned Chromium behind."""
    proc = getattr(kaleido_obj, "subprocess", None)
    if proc is None or not hasattr(os, "killpg"):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):  # reaping is best effort; the kill is done
        proc.wait(timeout=5)


def _describe(exc: BaseException) -> str:
    """The readable part of an error (choreographer packs several strings in args)."""
    first = exc.args[0] if exc.args else None
    return first if isinstance(first, str) and first else (str(exc) or type(exc).__name__)


def _browser_died(exc: BaseException) -> bool:
    try:
        from kaleido.errors import BrowserClosedError, BrowserFailedError
    except ImportError:  # pragma: no cover - kaleido is checked before we get here
        return False
    return isinstance(exc, BrowserClosedError | BrowserFailedError)


def _figure_spec(fig: go.Figure | dict) -> dict:
    spec = fig.to_plotly_json() if isinstance(fig, go.Figure) else dict(fig)
    spec.setdefault("layout", {})
    spec.setdefault("data", [])
    return spec


_default_exporter: StaticExporter | None = None
_default_lock = threading.Lock()


def default_exporter() -> StaticExporter:
    """The process-wide exporter every module-level function below uses."""
    global _default_exporter
    with _default_lock:
        if _default_exporter is None:
            _default_exporter = StaticExporter()
            atexit.register(_default_exporter.close)
        return _default_exporter


# -- the public functions ----------------------------------------------------------------
def static_export_available() -> tuple[bool, str]:
    """(True, where the browser is) or (False, why PNG/SVG cannot be made here)."""
    return default_exporter().available()


def figure_to_png(fig: go.Figure, scale: float = 2) -> bytes:
    """PNG bytes (``scale`` x the figure's pixel size). Raises StaticExportUnavailable."""
    return default_exporter().export(fig, "png", scale=scale)


def figure_to_svg(fig: go.Figure) -> bytes:
    """SVG bytes (UTF-8). Raises StaticExportUnavailable."""
    return default_exporter().export(fig, "svg", scale=1)


def figure_to_html(fig: go.Figure, include_plotlyjs: bool | str = "cdn") -> str:
    """A standalone interactive HTML page; ``True`` embeds plotly.js (works offline,
    ~4 MB), ``"cdn"`` links it (small, needs internet to view)."""
    return fig.to_html(include_plotlyjs=include_plotlyjs, full_html=True)


def explanation_to_csv(expl: Explanation) -> bytes:
    """UTF-8 CSV of ``expl.to_frame``: one row per duel, one column per player, then
    ``se:<player>`` standard errors when the explanation has them."""
    frame = expl.to_frame(standard_errors=expl.standard_errors is not None)
    return to_csv_bytes(frame)


def with_provenance(fig: go.Figure, text: str) -> go.Figure:
    """A copy of ``fig`` with a small line saying where it comes from (dataset, model,
    duel count) under the plot, for exported files: a figure away from the dashboard
    still says what it shows."""
    out = go.Figure(fig)
    bottom = (out.layout.margin.b or 60) + 28
    out.add_annotation(
        text=text, xref="paper", yref="paper", x=0.0, y=0.0, xanchor="left", yanchor="top",
        yshift=-(bottom - 22), showarrow=False, font={"size": 10, "color": "#666666"},
    )  # fmt: skip
    out.update_layout(margin={"b": bottom})
    return out


def interactions_to_csv(inter: InteractionExplanation) -> bytes:
    """UTF-8 CSV of ``inter.to_frame``: one row per duel, one ``<a>*<b>`` column per pair."""
    return to_csv_bytes(inter.to_frame())
