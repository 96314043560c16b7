# Scenario: the repository keeps its promises to a new user: every top-level folder says what it
# owns, CI runs the README's test command, and the README shows both commands.
from __future__ import annotations

import subprocess
from pathlib import Path

FOLDERS = ["appliance", "collector", "indexer", "webui", "rpc", "image", "tests"]


def test_every_folder_has_a_readme(top: Path) -> None:
    for name in FOLDERS:
        readme = top / name / "README.md"
        assert readme.is_file(), f"{name}/ has no README.md"
        assert len(readme.read_text().strip()) > 40


def test_ci_runs_the_readme_test_command(top: Path) -> None:
    ci = (top / ".ci" / "run").read_text()
    readme = (top / "README.md").read_text()
    assert "make test" in ci
    assert "make test" in readme and "make run" in readme


def test_cli_version_matches_header(top: Path, bin_dir: Path) -> None:
    header = (top / "indexer" / "lib" / "logbox.h").read_text()
    version = header.split('#define LB_VERSION "', 1)[1].split('"', 1)[0]
    out = subprocess.run(
        [str(bin_dir / "logbox"), "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"logbox {version}"
