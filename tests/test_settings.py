"""Tests for daemon.settings: sources, priority, and readable errors."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pytest

from daemon.settings import ConfigError, Settings, check_config, load_settings, redacted


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in list(os.environ):
        if var.upper().startswith("CHORUS_") or var == "CREDENTIALS_DIRECTORY":
            monkeypatch.delenv(var)
    # Keep a real /etc/chorus/chorus.toml on the test machine out of the picture.
    monkeypatch.setattr("daemon.settings.DEFAULT_CONFIG", tmp_path / "absent.toml")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chorus.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_file() -> None:
    settings = load_settings()
    assert settings == Settings()
    assert settings.house.day1 == date(2025, 1, 1)
    assert settings.house.timezone == "UTC"
    assert settings.store.path == Path("var/chorus.sqlite")
    assert settings.retrieval.budget == 15
    assert settings.mqtt.host is None and settings.mqtt.port == 1883


def test_toml_values_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[house]\nday1 = 2024-08-15\ntimezone = "Europe/Berlin"\n'
        '[retrieval]\nbudget = 40\n[mqtt]\nhost = "broker.local"\nport = 8883\n',
    )
    settings = load_settings(path)
    assert settings.house.day1 == date(2024, 8, 15)
    assert settings.house.timezone == "Europe/Berlin"
    assert settings.retrieval.budget == 40
    assert settings.retrieval.asker == "A1_JAKE"
    assert (settings.mqtt.host, settings.mqtt.port) == ("broker.local", 8883)


def test_chorus_config_env_picks_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_CONFIG", str(write(tmp_path, "[retrieval]\nbudget = 7\n")))
    assert load_settings().retrieval.budget == 7


def test_env_overrides_toml_and_kwargs_override_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "[house]\nday1 = 2024-01-01\n[mqtt]\nport = 1000\n")
    monkeypatch.setenv("CHORUS__HOUSE__DAY1", "2024-08-15")
    monkeypatch.setenv("CHORUS__MQTT__PORT", "1884")
    settings = load_settings(path)
    assert settings.house.day1 == date(2024, 8, 15)
    assert settings.mqtt.port == 1884
    assert load_settings(path, mqtt={"port": 2000}).mqtt.port == 2000


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[mqtt]\nbogus = "x"\n', "mqtt.bogus: unknown setting"),
        ("[nonsense]\nkey = 1\n", "nonsense: unknown setting"),
    ],
)
def test_unknown_toml_key_is_an_error(tmp_path: Path, toml: str, expected: str) -> None:
    settings, problems = check_config(write(tmp_path, toml))
    assert settings is None
    assert problems == [expected]


def test_unknown_env_var_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS__HOUSE__NOPE", "1")
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "CHORUS__HOUSE__NOPE" in message
    assert "CHORUS__HOUSE__DAY1" in message and "CHORUS__MQTT__PASSWORD" in message


def test_bad_date_is_readable(tmp_path: Path) -> None:
    settings, problems = check_config(write(tmp_path, '[house]\nday1 = "2024-13-45"\n'))
    assert settings is None
    assert len(problems) == 1
    assert problems[0].startswith("house.day1: Input should be a valid date")
    assert problems[0].endswith("(got '2024-13-45')")


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "", "../etc/passwd"])
def test_bad_timezone_is_an_error(tmp_path: Path, zone: str) -> None:
    settings, problems = check_config(write(tmp_path, f'[house]\ntimezone = "{zone}"\n'))
    assert settings is None
    assert len(problems) == 1 and problems[0].startswith("house.timezone: ")
    assert "time zone" in problems[0]


def test_out_of_range_values_are_errors(tmp_path: Path) -> None:
    _, problems = check_config(write(tmp_path, "[retrieval]\nbudget = 0\n[mqtt]\nport = 70000\n"))
    assert sorted(line.split(":")[0] for line in problems) == ["mqtt.port", "retrieval.budget"]


def test_toml_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[house\nday1 = \n")
    settings, problems = check_config(path)
    assert settings is None
    assert len(problems) == 1 and problems[0].startswith(f"{path}: TOML syntax error: ")


def test_credentials_directory_sets_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = tmp_path / "credentials"
    creds.mkdir()
    (creds / "mqtt__password").write_text("hunter2-secret\n", encoding="utf-8")
    (creds / "mqtt__username").write_text("chorus-user", encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    path = write(tmp_path, '[mqtt]\nusername = "from-toml"\npassword = "toml-pass"\n')
    settings = load_settings(path)
    assert settings.mqtt.password is not None
    assert settings.mqtt.password.get_secret_value() == "hunter2-secret"
    assert settings.mqtt.username == "chorus-user"
    dump = redacted(settings)
    assert dump["mqtt"]["password"] == "***"
    assert "hunter2" not in json.dumps(dump)
    monkeypatch.setenv("CHORUS__MQTT__PASSWORD", "from-env")
    assert load_settings(path).mqtt.password.get_secret_value() == "from-env"


def test_redacted_leaves_unset_password_none() -> None:
    assert redacted(load_settings())["mqtt"]["password"] is None


def test_missing_explicit_path_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml")
    monkeypatch.setenv("CHORUS_CONFIG", str(tmp_path / "also-nope.toml"))
    settings, problems = check_config()
    assert settings is None and "also-nope.toml" in problems[0]


def test_security_settings_reach_the_link_and_the_example_config_checks(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from daemon import build

    monkeypatch.setenv("CHORUS__DAEMON__ALLOW_AGENTS", '["robot1", "A1_JAKE"]')
    monkeypatch.setenv("CHORUS__MQTT__TLS", "true")
    monkeypatch.setenv("CHORUS__MQTT__PASSWORD", "pw-from-env")
    s = load_settings(None, mqtt={"username": "chorus"})
    assert s.daemon.allow_agents == ["robot1", "A1_JAKE"]
    cfg = build.link_config(s, "127.0.0.1", 8883)
    assert (cfg.username, cfg.password, cfg.tls, cfg.receive_max) == ("chorus", "pw-from-env", True, 1000)
    assert "pw-from-env" not in repr(s) and "pw-from-env" not in json.dumps(redacted(s))
    assert build.client_kwargs(s)["tls_context"] is not None
    example = Path(__file__).resolve().parents[1] / "systemd" / "chorus.example.toml"
    settings, problems = check_config(example)
    assert problems == [] and settings.mqtt.tls_ca is not None and settings.store.reserve_mb > 0
