"""What to change when the sandbox itself fails (before the command runs): read
off bwrap's (or setpriv's) own message, the setting of the container or the
host that lets it work, or AGENTLEDGER_SANDBOX=off. One line each."""

from __future__ import annotations

OFF = "or set AGENTLEDGER_SANDBOX=off to run commands unsandboxed with the worker's rights"
MASKED_PROC = (
    "/proc is masked (a container's default): Kubernetes: securityContext.procMount: "
    "Unmasked (which needs hostUsers: false); Docker/compose: security_opt "
    f"systempaths=unconfined; {OFF}"
)
NO_USERNS = (
    "new namespaces are refused here (Docker's default seccomp and AppArmor profiles, or "
    "the host's user.max_user_namespaces / kernel.unprivileged_userns_clone): "
    "Kubernetes: securityContext seccompProfile and appArmorProfile Unconfined; "
    f"Docker/compose: security_opt seccomp=unconfined and apparmor=unconfined; {OFF}"
)
ROOT_MOUNTS = (
    "as root, bwrap mounts with the container's own capabilities: give it CAP_SYS_ADMIN "
    "(compose cap_add) and apparmor=unconfined, or better run the worker as a non-root "
    f"user (the deploy files do), which needs neither; {OFF}"
)
ROOT_SETPRIV = (
    "a root worker's commands become AGENTLEDGER_SANDBOX_UID/_GID through setpriv, "
    "which needs CAP_SETUID, CAP_SETGID and CAP_SETPCAP (and that uid mapped, in a "
    f"user namespace); or run the worker as a non-root user; {OFF}"
)


def explain(stderr: str, *, root: bool, network: bool = False) -> tuple[str, str]:
    """(what failed, what to change) for a sandbox that exited before its command ran."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    said = next((ln for ln in lines if ln.startswith(("bwrap:", "setpriv:", "prlimit:"))), None)
    said = said or (lines[-1] if lines else "no message")
    what = f"the sandbox failed before the command ran ({said[:300]})"
    if "Can't mount proc" in said:
        return what, MASKED_PROC
    if said.startswith("setpriv:"):
        return what, ROOT_SETPRIV
    if any(
        s in said
        for s in ("No permissions to creat", "Creating new namespace failed", "setting up uid map",
                  "unshare", "user namespace")
    ):  # fmt: skip
        return what, NO_USERNS
    if root and ("Can't mount" in said or "Operation not permitted" in said):
        return what, ROOT_MOUNTS
    return what, OFF.removeprefix("or ")
