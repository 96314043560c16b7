"""One line to the machine's console and nowhere else: how the appliance's boot-time programs
show a secret once (the generated admin password, the store's recovery key, the verification
key). The units send their stdout to the journal too, which is on disk; this writes to the
console device itself. Plain Python, no logbox imports (the libexec programs load it)."""

from __future__ import annotations


def console(prog: str, msg: str, device: str = "/dev/console") -> bool:
    """`prog: msg` on the console device; False when it cannot be written (no console: the
    caller says so another way, never by printing the secret to the journal)."""
    try:
        with open(device, "a") as f:
            f.write(f"{prog}: {msg}\n")
        return True
    except OSError:
        return False
