"""The rooms' models belong to the one app ``planner``: its label, its tables, its registry."""

from __future__ import annotations

from django.apps import apps

import planner.models

ROOM_MODELS = {"planner.scenarios.models", "planner.budgets.models", "planner.capacity.models"}


def test_every_model_of_the_app_lives_in_a_room() -> None:
    models = list(apps.get_app_config("planner").get_models())
    assert {model.__module__ for model in models} == ROOM_MODELS


def test_the_rooms_models_keep_the_app_label_and_tables() -> None:
    for model in apps.get_app_config("planner").get_models():
        assert model._meta.app_label == "planner"
        assert model._meta.db_table == f"planner_{model._meta.model_name}"


def test_planner_models_still_names_every_model() -> None:
    for model in apps.get_app_config("planner").get_models():
        assert getattr(planner.models, model.__name__) is model
