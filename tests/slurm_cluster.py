"""A single-node SLURM on this machine, on loopback only, for the scheduler test (issue 48).

Debian's packages (slurmctld, slurmd, slurmdbd, slurm-client, munge, mariadb-server; .ci/run installs
them where it runs as root) run from a private folder: their own configuration, state, sockets,
logs and a fresh MariaDB data folder, nothing of the system's /etc/slurm, /etc/munge or
/var/lib/mysql. Every daemon runs in the foreground as a child of this process and is stopped by
its PID. Accounting (slurmdbd on MariaDB) is needed because the SLURM executor plugin reads job
states with `sacct`. No cgroups (proctrack/linuxproc, task/none); the node advertises 8 CPUs, 64 GB
and one GPU declared as a GRES on /dev/null (config_overrides), so a job asking for more than the
machine has is still accepted (measured facts: /work/shared/notes/single-node-slurm.md).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PROGRAMS = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "mariadb-install-db", "sbatch", "sacct")
NODE = "dpnode"
NODE_CPUS = 8
NODE_MEM_MB = 64000
# Where SLURM's clients look for a configuration when SLURM_CONF is unset: a machine with either is
# a SLURM machine already, whose configuration the test must neither use nor replace.
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
CONFIG_CACHE = Path("/run/slurm/conf")


def missing_reason() -> str | None:
    """Why a SLURM cannot be started here, or None."""
    if os.name != "posix" or os.geteuid() != 0:
        return "the scheduler test starts SLURM's daemons and needs root (CI runs as root)"
    absent = [
        name for name in PROGRAMS if shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") is None
    ]
    if absent:
        return (
            f"SLURM not installed ({', '.join(absent)} missing): apt-get install slurmctld slurmd slurmdbd "
            "slurm-client munge mariadb-server"
        )
    for path in (SYSTEM_CONF, CONFIG_CACHE):
        if path.exists() or path.is_symlink():
            return f"{path} exists: this machine has a SLURM of its own"
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e '.[test]')"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def program(name: str) -> str:
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or name


class LocalSlurm:
    """Start with `start()`, stop with `stop()` (or use as a context manager)."""

    def __init__(self):
        # Short path: unix sockets are limited to 107 characters.
        self.root = Path(tempfile.mkdtemp(prefix="dpslurm-"))
        self.processes: dict[str, subprocess.Popen] = {}
        self.host = socket.gethostname()
        self.ports = {name: free_port() for name in ("mysql", "dbd", "ctld", "slurmd")}
        self.conf = self.root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self) -> None:
        for name in ("state", "spool", "log", "mysql", "munge"):
            (self.root / name).mkdir(mode=0o700)
        self._start_munge()
        self._start_mariadb()
        self._write_slurm_conf()
        # srun inside a job finds no SLURM_CONF (the plugin's job step drops SLURM_* variables) and
        # reads the default path: a link to this configuration, removed by cleanup().
        if not SYSTEM_CONF.parent.is_dir():
            raise RuntimeError(f"{SYSTEM_CONF.parent} is missing (the slurm-client package creates it)")
        SYSTEM_CONF.symlink_to(self.conf)
        self._spawn("slurmdbd", [program("slurmdbd"), "-D"])
        self._wait(lambda: self._port_open(self.ports["dbd"]), "slurmdbd", 60)
        self._spawn("slurmctld", [program("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self._port_open(self.ports["ctld"]), "slurmctld", 60)
        self._spawn("slurmd", [program("slurmd"), "-D", "-N", NODE, "-f", str(self.conf)])
        self._wait(self._node_idle, "slurmd (node idle)", 90)

    def stop(self) -> None:
        """Stop every daemon this object started, by its PID, the last started first."""
        for proc in reversed(list(self.processes.values())):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
        self.processes.clear()

    def cleanup(self) -> None:
        """Remove this object's folder and its link at SLURM's default configuration path."""
        if SYSTEM_CONF.is_symlink() and os.readlink(SYSTEM_CONF) == str(self.conf):
            SYSTEM_CONF.unlink()
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ daemons

    def _spawn(self, name: str, command: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")  # noqa: SIM115 (kept open for the daemon)
        self.processes[name] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )

    def _wait(self, ready, name: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            proc = self.processes.get(name.split()[0])
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}): {self.log_tail(name.split()[0])}")
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{name} not ready after {seconds:g} s: {self.log_tail(name.split()[0])}")

    def log_tail(self, name: str, lines: int = 20) -> str:
        texts = []
        for path in sorted((self.root / "log").glob(f"{name}*")):
            texts.append("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(texts)

    @staticmethod
    def _port_open(port: int) -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            return probe.connect_ex(("127.0.0.1", port)) == 0

    def _start_munge(self) -> None:
        munge = self.root / "munge"
        key = munge / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        self.munge_socket = munge / "munge.socket"
        self._spawn(
            "munged",
            [
                program("munged"),
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={self.munge_socket}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={self.root / 'log' / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
            ],
        )
        self._wait(self.munge_socket.exists, "munged", 30)

    def _start_mariadb(self) -> None:
        data = self.root / "mysql"
        self.mysql_socket = self.root / "mysql.sock"
        install = subprocess.run(
            [program("mariadb-install-db"), "--no-defaults", "--user=root", f"--datadir={data}",
             "--auth-root-authentication-method=socket", "--skip-test-db"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if install.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {install.stderr[-2000:]}")
        self._spawn(
            "mariadbd",
            [
                program("mariadbd"),
                "--no-defaults",
                "--user=root",
                f"--datadir={data}",
                f"--socket={self.mysql_socket}",
                f"--pid-file={self.root / 'mariadbd.pid'}",
                f"--port={self.ports['mysql']}",
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                f"--log-error={self.root / 'log' / 'mariadbd.log'}",
            ],
        )
        self._wait(lambda: self._port_open(self.ports["mysql"]), "mariadbd", 120)
        sql = (
            "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm-test';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )
        subprocess.run(
            [program("mariadb"), "--no-defaults", f"--socket={self.mysql_socket}", "-uroot", "-e", sql],
            check=True, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    def _write_slurm_conf(self) -> None:
        auth = f"AuthInfo=socket={self.munge_socket}"
        self.conf.write_text(
            f"""ClusterName=depthprune-test
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={self.ports["ctld"]}
SlurmdPort={self.ports["slurmd"]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
{auth}
StateSaveLocation={self.root / "state"}
SlurmdSpoolDir={self.root / "spool" / "slurmd-%n"}
SlurmctldPidFile={self.root / "slurmctld.pid"}
SlurmdPidFile={self.root / "slurmd.pid"}
SlurmctldLogFile={self.root / "log" / "slurmctld.log"}
SlurmdLogFile={self.root / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={self.ports["dbd"]}
AccountingStoragePass={self.munge_socket}
MailProg=/bin/true
AccountingStoreFlags=job_comment
AccountingStorageTRES=gres/gpu
GresTypes=gpu
NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={self.host} CPUs={NODE_CPUS} RealMemory={NODE_MEM_MB} Gres=gpu:1 State=UNKNOWN
PartitionName=main Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""
        )
        (self.root / "gres.conf").write_text(f"NodeName={NODE} Name=gpu File=/dev/null\n")
        dbd = self.root / "slurmdbd.conf"
        dbd.write_text(
            f"""{auth}
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self.ports["dbd"]}
SlurmUser=root
LogFile={self.root / "log" / "slurmdbd.log"}
PidFile={self.root / "slurmdbd.pid"}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.ports["mysql"]}
StorageUser=slurm
StoragePass=slurm-test
StorageLoc=slurm_acct_db
"""
        )
        dbd.chmod(0o600)

    def _node_idle(self) -> bool:
        proc = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%T", "-n", NODE], env=self.env, capture_output=True, text=True, timeout=30
        )
        return proc.returncode == 0 and proc.stdout.strip() == "idle"

    # ------------------------------------------------------------------ queries

    def run(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), env=self.env, capture_output=True, text=True, timeout=timeout)
