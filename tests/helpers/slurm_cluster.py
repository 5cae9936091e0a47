"""A real one-node SLURM cluster for the tests: munged + slurmctld + slurmd on this machine, in a temp folder.

Debian's ``slurm-wlm`` and ``munge`` (``WORLDRECALL_SETUP_CLUSTER=1 scripts/setup.sh`` installs them). Nothing
global is touched: its own munge key and socket, its own ``slurm.conf`` (clients find it through
``SLURM_CONF``), its own ports, state and spool folders; every daemon runs in the foreground as a child of
the test process and is stopped at the end. Needs root (slurmd launches jobs as the submitting user).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "sbatch", "squeue", "scancel")


def missing_reason() -> str | None:
    """Why no cluster can be started here (None when one can)."""
    missing = [b for b in BINARIES if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists()]
    if missing:
        return (f"SLURM/munge binaries missing ({', '.join(missing)}); install Debian's slurm-wlm and munge "
                f"(WORLDRECALL_SETUP_CLUSTER=1 scripts/setup.sh)")
    if os.geteuid() != 0:
        return "starting slurmd needs root (it launches jobs as the submitting user)"
    if shutil.which("runuser") is None:
        return "no runuser (util-linux) to start munged as the munge user"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' user (the munge package creates it)"
    return None


def _bin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_line(host: str) -> str:
    """This machine as slurm.conf describes a node (``slurmd -C``: CPUs, sockets/cores/threads, memory)."""
    out = subprocess.run([_bin("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
    first = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
    fields = [f for f in first.split() if not f.startswith(("NodeName=", "UpTime="))]
    return f"NodeName={host} NodeAddr=127.0.0.1 " + " ".join(fields) + " State=UNKNOWN"


class SlurmCluster:
    """Start with :meth:`start`, stop with :meth:`stop`; :attr:`env` is what a client command needs."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="wr-slurm-"))
        self.root.chmod(0o755)  # munged (user munge) must reach its own folder below
        self.host = socket.gethostname().split(".")[0]  # `hostname -s`
        self.procs: list[subprocess.Popen] = []
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    # -- munge -------------------------------------------------------------------------------------------
    def _start_munge(self) -> None:
        m = self.root / "munge"
        m.mkdir()
        m.chmod(0o755)  # munged: the socket folder must be searchable by every client
        key = m / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        uid, gid = pwd.getpwnam("munge").pw_uid, pwd.getpwnam("munge").pw_gid
        for p in (m, key):
            os.chown(p, uid, gid)
        self.munge_socket = m / "munge.socket"
        cmd = ["runuser", "-u", "munge", "--", _bin("munged"), "-F", f"--key-file={key}",
               f"--socket={self.munge_socket}", f"--pid-file={m / 'munged.pid'}", f"--seed-file={m / 'seed'}",
               f"--log-file={m / 'munged.log'}", "--num-threads=2"]
        self._spawn(cmd, "munged")
        self._wait(lambda: self.munge_socket.exists(), 20, "munged socket", m / "munged.log")

    # -- slurm -------------------------------------------------------------------------------------------
    def _write_conf(self) -> None:
        for d in ("state", "spool", "log"):
            (self.root / d).mkdir()
        self.conf.write_text("\n".join([
            "ClusterName=worldrecall-test",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool'}",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.root / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",  # no cgroup setup needed
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1",
            "MpiDefault=none",
            "JobCompType=jobcomp/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "ReturnToService=2",
            "SlurmdTimeout=60",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=300",  # finished jobs stay visible to squeue/sacct-less submitit polling
            node_line(self.host),
            f"PartitionName=test Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]))

    def start(self, timeout_s: float = 60.0) -> SlurmCluster:
        try:
            self._start_munge()
            self._write_conf()
            self._spawn([_bin("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld")
            self._spawn([_bin("slurmd"), "-D", "-N", self.host, "-f", str(self.conf)], "slurmd")
            self._wait(self._answers, timeout_s, "`sinfo` to show an idle node", self.root / "log" / "slurmctld.log")
            out = self.client("srun", "-N1", "-n1", "hostname", timeout=timeout_s)
            if out.strip() != self.host:
                raise RuntimeError(f"srun hostname answered {out!r}, expected {self.host!r}")
        except BaseException:
            self.stop()
            raise
        return self

    def _answers(self) -> bool:
        r = subprocess.run([_bin("sinfo"), "-h", "-o", "%T"], capture_output=True, text=True, env=self.env, check=False)
        return r.returncode == 0 and r.stdout.strip() in ("idle", "mixed", "allocated")

    def client(self, *cmd: str, timeout: float = 60.0) -> str:
        """Run a SLURM client command against this cluster; its stdout (raises with stderr on failure)."""
        r = subprocess.run([_bin(cmd[0]), *cmd[1:]], capture_output=True, text=True, env=self.env, timeout=timeout, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
        return r.stdout

    def stop(self) -> None:
        """Cancel every job, then stop the daemons (slurmd, slurmctld, munged) and remove the folder."""
        if self.conf.exists() and any(p.poll() is None for p in self.procs):
            subprocess.run([_bin("scancel"), "--full", "-u", "root"], env=self.env, capture_output=True, timeout=30, check=False)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------------------
    def _spawn(self, cmd: list[str], name: str) -> None:
        log = open(self.root / f"{name}.out", "wb")  # noqa: SIM115  (kept open for the daemon's lifetime)
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                           start_new_session=True))

    def _wait(self, ok, timeout_s: float, what: str, log: Path) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ok():
                return
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                break
            time.sleep(0.2)
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        outs = "".join((self.root / f"{n}.out").read_text(errors="replace")[-1000:]
                       for n in ("munged", "slurmctld", "slurmd") if (self.root / f"{n}.out").exists())
        raise RuntimeError(f"timed out waiting for {what} ({self.root}):\n{tail}\n{outs}")
