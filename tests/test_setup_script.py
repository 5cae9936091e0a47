"""scripts/setup.sh: a second call is a no-op (no pip at all) until pyproject.toml or the script changes.

The script runs for real, in a copy of the checkout's two input files, against a stand-in ``.venv`` whose
``python`` records every ``-m pip`` call instead of installing (and ``apt-get``/``ldconfig`` stand-ins, so
nothing on the machine is touched).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _fake_checkout(tmp: Path) -> tuple[Path, Path, dict[str, str]]:
    repo = tmp / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    shutil.copy(REPO / "requirements.lock", repo / "requirements.lock")
    (repo / "worldrecall").mkdir()
    (repo / "worldrecall" / "__init__.py").write_text("")  # what an editable install of this checkout imports
    log = tmp / "pip_calls.log"
    bin_ = repo / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "$*" >> {log}; exit 0; fi\n'
        f'PYTHONPATH={repo} exec {sys.executable} -S "$@"\n')
    (bin_ / "python").chmod(0o755)
    (bin_ / "activate").write_text(f'export PATH="{bin_}:$PATH"\n')
    stubs = tmp / "stubs"
    stubs.mkdir()
    for name, body in (("ldconfig", "echo 'libusb-1.0.so.0 (libc6,x86-64) => /lib/libusb-1.0.so.0'"),
                       ("apt-get", f"echo apt-get >> {log}; exit 1"), ("sudo", "exit 1")):
        (stubs / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (stubs / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}
    return repo, log, env


def _setup(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/setup.sh"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def _pip_calls(log: Path) -> list[str]:
    return [x for x in log.read_text().splitlines() if "pip" in x] if log.exists() else []


def test_second_setup_call_runs_no_pip_until_pyproject_changes(tmp_path):
    repo, log, env = _fake_checkout(tmp_path)
    first = _setup(repo, env)
    assert first.returncode == 0, first.stderr
    calls = _pip_calls(log)
    assert any("--require-hashes -r requirements.lock" in c for c in calls), calls
    assert "\ngunicorn==" in (repo / "requirements.lock").read_text()  # the ui extra: `mlflow ui` works
    n = len(calls)
    second = _setup(repo, env)
    assert second.returncode == 0, second.stderr
    assert len(_pip_calls(log)) == n  # nothing installed, nothing rebuilt
    assert "is current" in second.stdout and (second.stdout + second.stderr).count("\n") == 1  # one line
    with open(repo / "pyproject.toml", "a") as f:
        f.write("\n# a changed dependency list\n")
    third = _setup(repo, env)
    assert third.returncode == 0 and len(_pip_calls(log)) > n  # changed metadata: installed again
    n = len(_pip_calls(log))
    with open(repo / "requirements.lock", "a") as f:
        f.write("\n# a re-locked set\n")
    assert _setup(repo, env).returncode == 0 and len(_pip_calls(log)) > n  # a new lock: installed again


def test_a_second_call_prints_one_line_even_where_the_cluster_cannot_be_installed(tmp_path):
    """./run-demo.sh then ./run-tests.sh on a machine where apt-get cannot install slurm-wlm: the second call
    (which asks for the cluster) neither reinstalls the Python packages nor says more than one line, and the
    third does not try apt-get again."""
    repo, log, env = _fake_checkout(tmp_path)
    env = {**env, "WORLDRECALL_SBIN": str(tmp_path / "no-sbin")}  # no slurmctld, no munged
    first = _setup(repo, {**env, "WORLDRECALL_SETUP_CLUSTER": "0"})  # ./run-demo.sh
    assert first.returncode == 0, first.stderr
    n = len(_pip_calls(log))
    apt = log.read_text().count("apt-get")
    second = _setup(repo, {**env, "WORLDRECALL_SETUP_CLUSTER": "1"})  # ./run-tests.sh
    assert second.returncode == 0, second.stderr
    assert len(_pip_calls(log)) == n  # the missing cluster does not reinstall the Python packages
    assert log.read_text().count("apt-get") > apt  # it did try to install the cluster, once
    assert "could not install slurm-wlm/munge" in second.stderr
    apt = log.read_text().count("apt-get")
    third = _setup(repo, {**env, "WORLDRECALL_SETUP_CLUSTER": "1"})
    assert third.returncode == 0 and log.read_text().count("apt-get") == apt and len(_pip_calls(log)) == n
    assert (third.stdout + third.stderr).count("\n") == 1 and "is current" in third.stdout


def test_setup_installs_the_locked_set_unless_asked_for_the_newest(tmp_path):
    """By default every dependency comes from requirements.lock, hash-checked, and worldrecall itself without
    dependencies; WORLDRECALL_UNPINNED=1 resolves pyproject.toml's ranges instead (and is a new stamp)."""
    repo, log, env = _fake_checkout(tmp_path)
    assert _setup(repo, env).returncode == 0
    calls = _pip_calls(log)
    assert any("--require-hashes -r requirements.lock" in c for c in calls), calls
    assert any(c.endswith("--no-deps -e .") for c in calls) and not any('.[all,ui,dev]' in c for c in calls)
    n = len(calls)
    assert _setup(repo, {**env, "WORLDRECALL_UNPINNED": "1"}).returncode == 0
    new = _pip_calls(log)[n:]
    assert any(c.endswith("-e .[all,ui,dev]") for c in new) and not any("requirements.lock" in c for c in new), new


def test_the_lock_pins_every_dependency_with_hashes():
    """Each requirement in requirements.lock is one exact version with at least one sha256."""
    text = (REPO / "requirements.lock").read_text()
    blocks = [b for b in text.replace("\\\n", " ").splitlines() if b and not b.startswith("#")]
    assert len(blocks) > 100
    for b in blocks:
        assert "==" in b.split()[0] and "--hash=sha256:" in b, b
    names = {b.split("==")[0].lower() for b in blocks}
    assert {"numpy", "open3d-cpu", "opencv-python-headless", "torch", "mlflow", "hydra-core"} <= names


def test_the_editable_install_notice_is_filtered_by_its_message():
    """pip >= 25 shows a build backend's warnings under -q; setuptools' "Editable installation." notice (a
    block of asterisks on every editable install) is information only: the filter setup.sh gives pip's build
    (``PYTHONWARNINGS``, inherited by the backend's process) drops it and nothing else."""
    script = (REPO / "scripts" / "setup.sh").read_text()
    line = next(x for x in script.splitlines() if x.startswith("export PYTHONWARNINGS="))
    value = line.split('PYTHONWARNINGS="', 1)[1].split('"', 1)[0].replace("${PYTHONWARNINGS:+,$PYTHONWARNINGS}", "")
    emit = ("from setuptools.warnings import InformationOnly, SetuptoolsDeprecationWarning\n"
            "InformationOnly.emit('Editable installation.', 'Please be careful with folders …')\n"
            "SetuptoolsDeprecationWarning.emit('Something else.', 'still shown')\n")
    done = subprocess.run([sys.executable, "-c", emit], env={**os.environ, "PYTHONWARNINGS": value},
                          capture_output=True, text=True, check=True)
    assert "Editable installation" not in done.stderr and "careful with folders" not in done.stderr
    assert "Something else." in done.stderr


def test_license_is_an_spdx_string():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"  # a string (PEP 639), not the deprecated {text = ...} table
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    assert any(r.startswith("setuptools>=77") for r in build)  # the first setuptools that reads SPDX strings
