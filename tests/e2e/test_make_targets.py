"""`make sandbox` and `make browser` (which `make run` and `make test` depend on)
install system packages only as root with apt-get, and say which before they do.
Run here with stand-ins as the only PATH (`id` says who runs it, `apt-get` writes
down what it was asked and puts stand-in programs in place): nothing is
installed on this machine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

MAKE = shutil.which("make")
MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"
SANDBOX_PROGRAMS = ("bwrap", "slirp4netns", "ip", "prlimit", "setpriv", "nsenter")

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def stand_ins(folder: Path, *, uid: int, present: tuple[str, ...] = ()) -> Path:
    """A PATH of one folder: `id`, `apt-get` and the programs `present`."""
    folder.mkdir()

    def script(name: str, body: str) -> None:
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)

    script("id", f"echo {uid}")
    made = " ".join((*SANDBOX_PROGRAMS, "chromium"))
    script(
        "apt-get",
        f'echo "apt-get $*" >> {folder}/apt.log\n'
        f'if [ "$1" = install ]; then for p in {made}; do '
        f"printf '#!/bin/sh\\n' > {folder}/$p; /bin/chmod +x {folder}/$p; done; fi",
    )
    for name in present:
        script(name, "")
    return folder


def make(target: str, path: Path) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None
    return subprocess.run(
        [MAKE, "--no-print-directory", "-f", str(MAKEFILE), target],
        cwd=path.parent, env={"PATH": str(path)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def apt_log(path: Path) -> list[str]:
    log = path / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_make_sandbox_as_root_says_which_packages_it_installs_before_installing_them(
    tmp_path: Path,
) -> None:
    path = stand_ins(tmp_path / "bin", uid=0)
    done = make("sandbox", path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "make sandbox: missing bwrap slirp4netns ip prlimit setpriv nsenter; installing system "
        "packages as root: apt-get install -y bubblewrap slirp4netns iproute2 util-linux"
    )
    assert apt_log(path) == ["apt-get install -y -q bubblewrap slirp4netns iproute2 util-linux"]


def test_make_sandbox_says_nothing_and_installs_nothing_when_the_programs_are_there(
    tmp_path: Path,
) -> None:
    path = stand_ins(tmp_path / "bin", uid=0, present=SANDBOX_PROGRAMS)
    done = make("sandbox", path)
    assert (done.returncode, done.stderr, apt_log(path)) == (0, "", [])


def test_make_sandbox_not_as_root_installs_nothing_and_says_the_command(tmp_path: Path) -> None:
    path = stand_ins(tmp_path / "bin", uid=1000)
    done = make("sandbox", path)
    assert done.returncode != 0  # bwrap is missing
    assert "sudo apt-get install -y bubblewrap slirp4netns iproute2 util-linux" in done.stderr
    assert apt_log(path) == []


def test_make_browser_as_root_says_it_installs_chromium_before_installing_it(
    tmp_path: Path,
) -> None:
    path = stand_ins(tmp_path / "bin", uid=0)
    done = make("browser", path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "make browser: chromium is missing; installing a system package as root: "
        "apt-get install -y chromium"
    )
    assert apt_log(path) == ["apt-get install -y -q chromium"]
