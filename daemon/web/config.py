"""The `web` settings section: where the page listens, and the token it wants off localhost."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class WebSettings(BaseModel):
    """The web page and HTTP API of the daemon."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Serve the web page and HTTP API.")
    host: str = Field("127.0.0.1", description="Address to listen on; anything but loopback needs a token.")
    port: int = Field(8420, ge=1, le=65535, description="TCP port of the page and API.")
    token: SecretStr | None = Field(None, description="Wanted on every request when set (Authorization: Bearer, "
                                    "?token= or the cookie the page sets); required off loopback. Best given "
                                    "as the credential web__token.")

    @field_validator("token")
    @classmethod
    def _long_enough(cls, v: SecretStr | None) -> SecretStr | None:
        # a field error: `config check` names web.token and never prints its value
        if v is not None and len(v.get_secret_value().strip()) < 16:
            raise ValueError("must be at least 16 characters (e.g. `openssl rand -hex 24`)")
        return v

    @model_validator(mode="after")
    def _token_off_loopback(self) -> WebSettings:
        if self.enabled and not is_loopback(self.host) and self.token is None:
            raise ValueError(f"web.host {self.host!r} is not loopback: set web.token (the credential web__token) "
                             "or listen on 127.0.0.1 behind a reverse proxy")
        return self
