"""The web view's sign-in token: AGENTLEDGER_UI_TOKEN (a Kubernetes Secret, the
operator's settings) or, when it is unset, a token file in the state folder,
made on the first start (a random 256-bit token, mode 0600, its owner's only)
and read again on every later one. A file others may read is refused: anyone
holding the token is the operator."""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from agentledger.services.errors import ConfigError
from agentledger.services.settings import UI_TOKEN_MIN_CHARS, Settings

VARIABLE = "AGENTLEDGER_UI_TOKEN"
TOKEN_FILE = "ui-token"


@dataclass(frozen=True)
class UiToken:
    value: str
    file: str | None  # None: from AGENTLEDGER_UI_TOKEN


def ui_token(settings: Settings) -> UiToken:
    if settings.ui_token is not None:
        return UiToken(settings.ui_token, None)
    path = Path(settings.state_dir, TOKEN_FILE)
    return UiToken(_read(path) or _make(path), str(path))


def _make(path: Path) -> str:
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another `ui` made it first: theirs stands
        return _read(path) or token
    except OSError as exc:
        raise ConfigError(
            VARIABLE, f"cannot make the token file {str(path)!r}: {exc.strerror}"
        ) from None
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def _read(path: Path) -> str | None:
    try:
        st = path.stat()
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(
            VARIABLE, f"cannot read the token file {str(path)!r}: {exc.strerror}"
        ) from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            VARIABLE,
            f"the token file {str(path)!r} is open to others: `chmod 600` it (or remove it for a new token)",
        )
    if len(text) < UI_TOKEN_MIN_CHARS:
        raise ConfigError(
            VARIABLE,
            f"the token file {str(path)!r} holds fewer than {UI_TOKEN_MIN_CHARS} characters",
        )
    return text
