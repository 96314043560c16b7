"""Boots the appliance image under qemu for tests: a qcow2 overlay over the built image (the
image itself is never written), blank data disks, user networking with the guest's ports
forwarded to 127.0.0.1 only, the serial console in a file, a QMP socket for an ACPI power-off,
and a first-boot configuration through fw_cfg. TCG unless KVM really works here (kvm_intel or
kvm_amd loaded: the nested kvm_pvm module of these machines cannot run the stock kernel)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from lbtest.wait import wait_until

# guest port -> what it is (APPLIANCE.md "Ports on the appliance")
GUEST_PORTS = {514: "syslog tcp", 601: "syslog octet-counted", 6514: "syslog tls", 443: "web ui",
               8444: "api"}  # fmt: skip


ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|[()][A-Z0-9]|[=>])")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kvm_usable() -> bool:
    """Whether KVM can run the guest: /dev/kvm usable and a hardware module loaded."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    return any(Path(f"/sys/module/{m}").is_dir() for m in ("kvm_intel", "kvm_amd"))


def accel() -> str:
    """The accelerator: $LOGBOX_QEMU_ACCEL, else kvm when usable, else tcg."""
    return os.environ.get("LOGBOX_QEMU_ACCEL") or ("kvm" if kvm_usable() else "tcg")


def blank_disk(path: Path, size: int = 1 << 30) -> Path:
    """A sparse raw file of size bytes, all zero."""
    path.unlink(missing_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def overlay(base: Path, path: Path) -> Path:
    """A qcow2 file over the raw image base: the guest's writes go there."""
    path.unlink(missing_ok=True)
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(base.resolve()),
         str(path)],
        check=True,
    )  # fmt: skip
    return path


class Vm:
    """One qemu guest. Use as a context manager: the process is killed on the way out."""

    def __init__(
        self,
        workdir: Path,
        boot: Path,
        data_disks: list[Path],
        name: str = "vm",
        firstboot: str | None = None,
        memory_mb: int = 2048,
        cpus: int = 2,
        write_bps: dict[int, int] | None = None,
        firmware: str = "bios",
        tpm: Path | None = None,
    ) -> None:
        self.workdir = workdir
        self.name = name
        self.boot = boot
        self.data_disks = data_disks
        self.firstboot = firstboot
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.write_bps = write_bps or {}  # data disk index -> write throttle (bytes/s)
        if firmware not in ("bios", "uefi"):
            raise ValueError(f"firmware: bios or uefi, not {firmware!r}")
        self.firmware = firmware  # bios: qemu's SeaBIOS; uefi: OVMF (Debian's ovmf package)
        # a TPM2 (swtpm) keeping its state in this directory: the same directory is the same
        # TPM at the next boot
        self.tpm = tpm
        self.swtpm: subprocess.Popen | None = None
        self.serial = workdir / f"{name}.serial.log"
        self.qmp_path = workdir / f"{name}.qmp"
        self.ports = {gp: free_port() for gp in GUEST_PORTS}
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.accel = accel()

    def command(self) -> list[str]:
        """The qemu command line."""
        fwd = ",".join(f"hostfwd=tcp:127.0.0.1:{hp}-:{gp}" for gp, hp in self.ports.items())
        cmd = [
            "qemu-system-x86_64",
            "-name", self.name,
            "-machine", "pc",
            "-accel", "kvm" if self.accel == "kvm" else "tcg,thread=multi",
            "-smp", str(self.cpus),
            "-m", str(self.memory_mb),
            "-display", "none",
            "-monitor", "none",
            "-serial", f"file:{self.serial}",
            "-qmp", f"unix:{self.qmp_path},server=on,wait=off",
            "-nic", f"user,model=virtio-net-pci,{fwd}",
            "-drive", f"file={self.boot},if=none,id=boot,format=qcow2,cache=unsafe",
            "-device", "virtio-blk-pci,drive=boot,bootindex=0",
        ]  # fmt: skip
        if self.accel == "kvm":
            cmd += ["-cpu", "host"]
        if self.firmware == "uefi":
            # the firmware's code read-only, its variable store a copy of its own
            code, varstore = ovmf_files()
            mine = self.workdir / f"{self.name}.ovmf-vars.fd"
            shutil.copyfile(varstore, mine)
            cmd += ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={code}",
                    "-drive", f"if=pflash,format=raw,unit=1,file={mine}"]  # fmt: skip
        for i, d in enumerate(self.data_disks):
            fmt = "qcow2" if d.suffix == ".qcow2" else "raw"
            bps = self.write_bps.get(i)
            throttle = f",throttling.bps-write={bps}" if bps else ""
            cmd += ["-drive", f"file={d},if=none,id=data{i},format={fmt},cache=unsafe{throttle}",
                    "-device", f"virtio-blk-pci,drive=data{i},serial=logbox-data{i}"]  # fmt: skip
        if self.tpm is not None:
            cmd += ["-chardev", f"socket,id=chrtpm,path={self.tpm_socket}",
                    "-tpmdev", "emulator,id=tpm0,chardev=chrtpm",
                    "-device", "tpm-tis,tpmdev=tpm0"]  # fmt: skip
        if self.firstboot is not None:
            cfg = self.workdir / f"{self.name}.firstboot.toml"
            cfg.write_text(self.firstboot)
            cmd += ["-fw_cfg", f"name=opt/logbox/firstboot,file={cfg}"]
        return cmd

    @property
    def tpm_socket(self) -> Path:
        return self.workdir / f"{self.name}.swtpm.sock"

    def start_tpm(self) -> None:
        """swtpm, a TPM2 emulator, on its control socket (it ends when qemu lets go of it)."""
        assert self.tpm is not None
        if self.swtpm is not None and self.swtpm.poll() is None:  # a start that failed before
            self.swtpm.kill()
            self.swtpm.wait(10)
        self.tpm.mkdir(parents=True, exist_ok=True)
        self.tpm_socket.unlink(missing_ok=True)
        log = self.workdir / f"{self.name}.swtpm.log"
        self.swtpm = subprocess.Popen(
            ["swtpm", "socket", "--tpm2", "--tpmstate", f"dir={self.tpm}",
             "--ctrl", f"type=unixio,path={self.tpm_socket}", "--terminate",
             "--log", f"file={log},level=1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(lambda: self.tpm_socket.exists() or self.swtpm.poll() is not None,
                   "swtpm listening", 30, interval=0.05)  # fmt: skip
        assert self.swtpm.poll() is None, f"swtpm exited ({self.swtpm.returncode}): {log}"

    def start(self, attempts: int = 4) -> Vm:
        """Starts qemu (see _start); nothing is left running when it fails."""
        try:
            return self._start(attempts)
        except BaseException:
            self.kill()
            raise

    def _start(self, attempts: int) -> Vm:
        """Starts qemu (returns once it has set up its devices). The forwarded ports are free
        when picked but may be taken before qemu binds them: qemu then exits at once ("Could
        not set up host forwarding rule"), and it is started again on other ports."""
        for attempt in range(attempts):
            if self.tpm is not None:
                self.start_tpm()
            self.serial.unlink(missing_ok=True)
            self.qmp_path.unlink(missing_ok=True)
            log = open(self.qemu_log, "wb")  # noqa: SIM115
            self.started = time.monotonic()
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
            log.close()
            try:  # the QMP socket appears once the command line is accepted
                wait_until(lambda: self.qmp_path.exists() or self.proc.poll() is not None,
                           "qemu accepted its command line", 30, interval=0.05)  # fmt: skip
            except AssertionError:
                pass  # slow to start: wait_console reports what comes next
            if self.proc.poll() is None or self.proc.returncode == 0:
                return self
            if "host forwarding" not in self.qemu_output() or attempt == attempts - 1:
                raise AssertionError(
                    f"qemu exited ({self.proc.returncode}) at start:\n{self.qemu_output()}"
                )
            self.ports = {gp: free_port() for gp in GUEST_PORTS}
        return self

    @property
    def qemu_log(self) -> Path:
        """qemu's own stdout and stderr."""
        return self.workdir / f"{self.name}.qemu.log"

    def qemu_output(self, limit: int = 4000) -> str:
        """The end of qemu's own output."""
        try:
            return self.qemu_log.read_bytes()[-limit:].decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def console(self) -> str:
        """The serial log so far, without terminal escapes and carriage returns (bytes that are
        not UTF-8 replaced)."""
        try:
            text = self.serial.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""
        return ESCAPES.sub("", text).replace("\r", "")

    def wait_console(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first match of the regular expression on the serial log's complete lines; fails
        with the log's tail when qemu exits or timeout seconds pass."""
        rx = re.compile(pattern, re.M)

        def alive() -> None:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"qemu exited ({self.proc.returncode}) before /{pattern}/:\n{self.tail()}"
                    f"\nqemu said:\n{self.qemu_output()}"
                )

        def complete() -> str:  # a line still being written must not match
            text = self.console()
            return text[: text.rfind("\n") + 1]

        return wait_until(
            lambda: rx.search(complete()),
            f"/{pattern}/ is on the console",
            timeout,
            interval=0.5,
            check=alive,
            detail=self.tail,
        )

    def tail(self, lines: int = 60) -> str:
        """The last lines of the serial log."""
        return "\n".join(self.console().splitlines()[-lines:])

    def qmp(self, command: str, **arguments: object) -> dict:
        """Runs one QMP command; its answer."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(str(self.qmp_path))
            f = s.makefile("rwb")
            json.loads(f.readline())  # greeting
            for cmd in ({"execute": "qmp_capabilities"}, {"execute": command}):
                if cmd["execute"] == command and arguments:
                    cmd["arguments"] = arguments
                f.write(json.dumps(cmd).encode() + b"\n")
                f.flush()
                while True:
                    answer = json.loads(f.readline())
                    if "return" in answer or "error" in answer:
                        break
            return answer

    def powerdown(self, timeout: float = 180) -> float:
        """ACPI power button (QMP system_powerdown), then waits for qemu to exit; seconds it
        took. Fails when the guest does not power off in time."""
        t0 = time.monotonic()
        answer = self.qmp("system_powerdown")
        assert "return" in answer, answer
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the guest did not power off in {timeout} s:\n{self.tail()}"
            ) from None
        assert rc == 0, f"qemu exited {rc}"
        return time.monotonic() - t0

    def kill(self) -> None:
        """Kills qemu if it runs (and swtpm)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        if self.swtpm is not None and self.swtpm.poll() is None:
            self.swtpm.send_signal(signal.SIGKILL)
            self.swtpm.wait(10)

    def __enter__(self) -> Vm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


OVMF = Path("/usr/share/OVMF")


def ovmf_files() -> tuple[Path, Path]:
    """OVMF's code and variable-store templates (4 MiB build, no Secure Boot)."""
    return OVMF / "OVMF_CODE_4M.fd", OVMF / "OVMF_VARS_4M.fd"


def have_ovmf() -> str | None:
    """None when OVMF (UEFI firmware for qemu) is installed, else what is missing."""
    for f in ovmf_files():
        if not f.is_file():
            return str(f)
    return None


def have_qemu() -> str | None:
    """None when qemu, qemu-img and swtpm (a TPM2 for the guest) are installed, else what is
    missing."""
    for tool in ("qemu-system-x86_64", "qemu-img", "swtpm"):
        if shutil.which(tool) is None:
            return tool
    return None
