"""Before `agentledger run` creates a run: could this process reach the model its
spec names? Its provider says where its requests go and with which credential
(`agentledger.services.adapters.models.providers`): a spec whose model is anthropic
needs ANTHROPIC_API_KEY, and the API's address (ANTHROPIC_BASE_URL, else the SDK's
default; through the proxy the environment names for it, when one does) must take
a TCP connection; an OpenAI-compatible one likewise, with its own variables. Nothing is
sent that costs tokens: a connect to host:port with a short timeout, closed at
once. A refused connection, a host name that does not resolve, or no answer in
time is `ProviderUnready` (the CLI says it and exits 2; nothing is recorded).

`submit` does no such check: the workers that will serve the run hold their own
credentials (`agentledger workers` warns at start when it has no key). The
scripted and replay models need nothing."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable
from urllib.parse import urlsplit

from agentledger.schemas.spec import ModelSpec
from agentledger.services.adapters.models.providers import provider_of
from agentledger.services.errors import ProviderUnready
from agentledger.services.settings import Settings

CONNECT_TIMEOUT_S = 5.0
Connect = Callable[[tuple[str, int], float], socket.socket]


def check_provider(
    model: ModelSpec, settings: Settings, *, connect: Connect = socket.create_connection
) -> None:
    """Raise ProviderUnready when a run of `model` could not reach its provider from here."""
    endpoint_of = provider_of(model).endpoint
    if endpoint_of is None:
        return
    endpoint = endpoint_of(model, settings)
    if endpoint.key_required and not endpoint.key_set and endpoint.key_variable:
        raise ProviderUnready(
            f"{endpoint.key_variable} is not set",
            f"the spec's model is {model.provider} ({model.model_id}); export the key (or set "
            "`model: scripted`), then run again; nothing was recorded",
            variable=endpoint.key_variable,
        )
    url, variable = endpoint.url, endpoint.url_variable
    address = _address(url, variable)
    via = _proxy_for(url)
    where = f"{url} (through the proxy {via})" if via else url
    if via:
        address = _address(via, "the proxy variables")
    problem = _cannot_connect(address, connect)
    if problem is not None:
        named = f" ({variable})" if variable else ""
        raise ProviderUnready(
            "the model's API is unreachable",
            f"{problem} at {where}{named}; nothing was recorded",
            variable=variable,
        )


def _address(url: str, variable: str | None) -> tuple[str, int]:
    named = f" ({variable})" if variable else ""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise ProviderUnready(
            "the model's API address is not a URL",
            f"{url!r}{named} is not http(s)://host[:port]; nothing was recorded",
            variable=variable,
        )
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _proxy_for(url: str) -> str | None:
    """The proxy the SDK's HTTP client goes through for `url` (HTTPS_PROXY, ALL_PROXY…;
    NO_PROXY honoured), as the standard library reads the environment."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _cannot_connect(address: tuple[str, int], connect: Connect) -> str | None:
    """Why a TCP connection to `address` failed, or None when one was made."""
    try:
        connect(address, CONNECT_TIMEOUT_S).close()
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror as exc:
        return f"the host {address[0]!r} does not resolve ({exc.strerror or exc})"
    except TimeoutError:
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"cannot connect ({exc.strerror or exc})"
    return None
