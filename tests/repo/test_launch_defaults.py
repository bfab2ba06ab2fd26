"""Launch defaults: the documented launch binds 127.0.0.1 only; deployment binds all."""

from __future__ import annotations

import tomllib

from prefshap_core.paths import repo_root

ROOT = repo_root()


def test_streamlit_config_binds_loopback_by_default() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    assert config["client"]["showErrorDetails"] == "none"
    # deep links set widget state before the widget's default on purpose (links.py)
    assert config["global"]["disableWidgetStateDuplicationWarning"] is True


def test_readme_launch_uses_the_default_and_says_so() -> None:
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "0.0.0.0" not in quickstart.split("```")[1]  # the launch command itself
    assert "127.0.0.1" in quickstart


def test_procfile_keeps_every_interface_for_deployment_and_readme_documents_it() -> None:
    assert "--server.address=0.0.0.0" in (ROOT / "Procfile").read_text()
    readme = (ROOT / "README.md").read_text()
    deploy = next(line for line in readme.splitlines() if line.startswith("- Deploy:"))
    assert "Procfile" in deploy and "0.0.0.0" in readme.split("- Deploy:", 1)[1][:300]
