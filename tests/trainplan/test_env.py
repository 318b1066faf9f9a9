import pytest

from trainplan import env


def test_env_bool_reads_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "Yes")
    assert env.env_bool("X_FLAG") is True
    monkeypatch.setenv("X_FLAG", "off")
    assert env.env_bool("X_FLAG", default=True) is False


def test_env_bool_uses_default_when_blank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "  ")
    assert env.env_bool("X_FLAG", default=True) is True


def test_env_bool_refuses_unknown_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ValueError, match="X_FLAG"):
        env.env_bool("X_FLAG")


def test_env_int_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_INT", "12x")
    with pytest.raises(ValueError, match="X_INT: expected an integer"):
        env.env_int("X_INT", 3)
    monkeypatch.setenv("X_INT", "12")
    assert env.env_int("X_INT", 3) == 12


def test_env_list_splits_and_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_LIST", " a.example, b.example ,,")
    assert env.env_list("X_LIST", []) == ["a.example", "b.example"]


def test_env_secret_prefers_file(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    secret_file = tmp_path / "key"
    secret_file.write_text("from-file\n")
    monkeypatch.setenv("X_SECRET", "from-env")
    monkeypatch.setenv("X_SECRET_FILE", str(secret_file))
    assert env.env_secret("X_SECRET") == "from-file"


def test_local_secret_key_is_stable_and_private(tmp_path) -> None:
    path = tmp_path / "var" / "secret_key"
    first = env.local_secret_key(path)
    assert len(first) >= 50
    assert env.local_secret_key(path) == first
    assert path.stat().st_mode & 0o077 == 0
