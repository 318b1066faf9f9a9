"""The scenario form's fine-tuning fields and its recipes: training method, LoRA rank and
targets, frozen layers, optimizer and CPU offload, to and from the contract's ``training`` keys
(left out at their defaults), the estimator's refusals on the field at fault, and the
"Start from a recipe" picker."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from estimator.core import estimate, validate_scenario
from estimator.core.presets import load_recipes, recipe_scenario
from estimator.core.scenario import OFFLOAD_MODES, OPTIMIZERS
from planner.common import labels
from planner.scenarios.forms import ScenarioForm, recipes_for_page
from planner.scenarios.models import Project, Scenario
from planner.scenarios.services import scenario_update
from pricing.models import PriceEntry, VendorQuote
from tests.planner.conftest import _client, _form_refusal_check, book_price, list_price

pytestmark = pytest.mark.django_db

LORA_RECIPE = "llama3-8b-lora-r16-8xh100"


def _scenario_form(price: PriceEntry | VendorQuote, /, **changes: Any) -> dict[str, Any]:
    """The create form as a browser posts it: Llama 3 8B on 8 H100, pre-training defaults."""
    source = "vendor_quote" if isinstance(price, VendorQuote) else "price_entry"
    return {
        "name": "Llama 3 8B fine-tune",
        "description": "",
        "model_preset": "llama3-8b",
        "tokens": "1B",
        "seq_len": "4096",
        "global_batch_size": "128",
        "precision": "bf16",
        "training_method": "full",
        "lora_rank": "16",
        "lora_targets": "both",
        "frozen_layers": "0",
        "optimizer": "adamw",
        "offload": "none",
        "accelerator": "H100-SXM",
        "num_gpus": "8",
        "parallelism_mode": "auto",
        "framework": "auto",
        "zero_stage": "1",
        "recompute": "selective",
        "framework_overhead": "0.10",
        "network_jitter": "0.05",
        "pue": "1.20",
        "utilisation_low": "0.900",
        "utilisation_high": "1.000",
        "price": f"{source}:{price.pk}",
        **changes,
    }


def _create(user: User, project: Project, **changes: Any) -> Scenario:
    url = reverse("planner:scenario-create", args=[project.pk])
    response = _client(user).post(url, _scenario_form(list_price("H100-SXM"), **changes))
    assert response.status_code == 302, response.context["form"].errors
    return Scenario.objects.get(name=changes.get("name", "Llama 3 8B fine-tune"))


def _as_posted(form: ScenarioForm) -> dict[str, Any]:
    """What a browser posts back of a form it was given (unticked boxes and blanks left out)."""
    shown = {name: form[name].value() for name in form.fields}
    return {k: ("on" if v is True else v) for k, v in shown.items() if v not in (None, False)}


def _post_initial(user: User, project: Project, initial: dict[str, Any], price: Any) -> Any:
    """Post a form's initial values back, as a browser submits a page it was given."""
    data = {key: value for key, value in initial.items() if value is not None}
    data = {
        key: ("on" if value is True else value) for key, value in data.items() if value is not False
    }
    source = "vendor_quote" if isinstance(price, VendorQuote) else "price_entry"
    data.update(pue="1.20", utilisation_low="0.900", utilisation_high="1.000")
    data["price"] = f"{source}:{price.pk}"
    url = reverse("planner:scenario-create", args=[project.pk])
    return _client(user).post(url, data)


# --- To the contract ---------------------------------------------------------------------------


def test_a_lora_scenario_at_the_contract_defaults_writes_only_the_type(
    requester: User, project: Project, prices: None
) -> None:
    scenario = _create(requester, project, training_method="lora")
    assert scenario.spec["training"] == {
        "tokens": 1e9, "global_batch_size": 128, "precision": "bf16", "method": {"type": "lora"},
    }  # fmt: skip
    assert estimate(scenario.spec)["training_method"]["rank"] == 16


def test_a_qlora_scenario_with_its_own_rank_and_targets(
    requester: User, project: Project, prices: None
) -> None:
    scenario = _create(
        requester, project, training_method="qlora", lora_rank="64", lora_targets="attention",
        optimizer="adamw8bit",
    )  # fmt: skip
    training = scenario.spec["training"]
    assert training["method"] == {"type": "qlora", "rank": 64, "targets": ["attention"]}
    assert training["optimizer"] == "adamw8bit"
    assert "framework" not in scenario.spec  # "auto" resolves to a profile that runs QLoRA
    assert estimate(scenario.spec)["framework"]["id"] == "hf-peft"


def test_full_training_with_frozen_layers_an_optimizer_and_offload(
    requester: User, project: Project, prices: None
) -> None:
    scenario = _create(
        requester, project, frozen_layers="8", frozen_embeddings="on", optimizer="sgd",
        offload="optimizer",
    )  # fmt: skip
    training = scenario.spec["training"]
    assert training["method"] == {"type": "full", "frozen_layers": 8, "frozen_embeddings": True}
    assert (training["optimizer"], training["offload"]) == ("sgd", "optimizer")


def test_the_scenario_page_names_the_training_method(
    requester: User, project: Project, prices: None
) -> None:
    lora = _create(requester, project, name="LoRA", training_method="lora", lora_rank="8")
    plain = _create(requester, project, name="Plain")
    body = _client(requester).get(lora.get_absolute_url()).content.decode()
    assert '<td data-testid="training-summary">LoRA r=8 on attention and MLP · AdamW</td>' in body
    body = _client(requester).get(plain.get_absolute_url()).content.decode()
    assert 'data-testid="training-summary"' not in body  # as pre-training pages were


def test_the_fields_of_the_other_method_are_ignored(
    requester: User, project: Project, prices: None
) -> None:
    # Without scripts the page shows every field; only the chosen method's count.
    lora = _create(requester, project, name="LoRA", training_method="lora", frozen_layers="4",
                   frozen_embeddings="on")  # fmt: skip
    full = _create(requester, project, name="Full", lora_rank="64", lora_targets="mlp")
    assert lora.spec["training"]["method"] == {"type": "lora"}
    assert "method" not in full.spec["training"]


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        # The estimator's refusals, each on the field of the key it names.
        ({"training_method": "qlora", "framework": "megatron-lm"}, "training_method",
         "trains ['full', 'lora']"),
        ({"optimizer": "lion", "framework": "megatron-lm"}, "optimizer", "offers"),
        ({"offload": "optimizer_and_params", "framework": "megatron-lm"}, "offload", "offers"),
        ({"frozen_layers": "33"}, "frozen_layers", "at most 32"),
        # The form's own bounds, the schema's (the estimator's maximum rank).
        ({"training_method": "lora", "lora_rank": "5000"}, "lora_rank",
         "less than or equal to 4096"),
        ({"training_method": "qlora", "precision": "fp32"}, "precision", "16 bits"),
        ({"training_method": "dora"}, "training_method", "select a valid choice"),
        ({"training_method": "lora", "lora_rank": "0"}, "lora_rank", "greater than or equal"),
    ],
)  # fmt: skip
def test_a_refused_fine_tuning_setting_shows_on_its_field(
    requester: User,
    project: Project,
    prices: None,
    changes: dict[str, str],
    field: str,
    message: str,
) -> None:
    data = _scenario_form(list_price("H100-SXM"), **changes)
    _form_refusal_check(requester, project, data, field, message)


def test_every_estimator_choice_has_a_field_choice_and_a_label() -> None:
    form = ScenarioForm()
    for name, values in (("optimizer", OPTIMIZERS), ("offload", OFFLOAD_MODES)):
        assert [value for value, _ in form.fields[name].choices] == list(values)  # type: ignore[attr-defined]
    assert {key for key, _ in labels.OPTIMIZERS} == set(OPTIMIZERS)
    assert {key for key, _ in labels.OFFLOAD_MODES} == set(OFFLOAD_MODES)


# --- From the contract -------------------------------------------------------------------------


def test_the_edit_form_shows_a_lora_scenario_and_saves_it_unchanged(
    requester: User, project: Project, prices: None
) -> None:
    scenario = _create(requester, project, training_method="qlora", lora_rank="64",
                       lora_targets="mlp", offload="optimizer", framework="hf-peft")  # fmt: skip
    before = scenario.spec
    client = _client(requester)
    url = reverse("planner:scenario-edit", args=[scenario.pk])
    form = client.get(url).context["form"]
    shown = {name: form[name].value() for name in form.fields}
    assert {key: shown[key] for key in ("training_method", "lora_rank", "lora_targets")} == {
        "training_method": "qlora", "lora_rank": 64, "lora_targets": "mlp",
    }  # fmt: skip
    assert (shown["optimizer"], shown["offload"], shown["framework"]) == (
        "adamw", "optimizer", "hf-peft",
    )  # fmt: skip
    response = client.post(url, _as_posted(form))
    assert response.status_code == 302, response.context["form"].errors
    scenario.refresh_from_db()
    assert scenario.spec == before


def test_the_edit_form_keeps_targets_and_dropout_it_cannot_show(
    requester: User, project: Project, prices: None
) -> None:
    scenario = _create(requester, project, training_method="lora")
    training = {
        **scenario.spec["training"],
        "method": {"type": "lora", "rank": 8, "targets": ["q_proj", "v_proj"], "dropout": 0.05},
        "master_weights": False,
    }
    scenario_update(user=requester, scenario=scenario, spec={**scenario.spec, "training": training})
    client = _client(requester)
    url = reverse("planner:scenario-edit", args=[scenario.pk])
    page = client.get(url)
    form = page.context["form"]
    assert form["lora_targets"].value() == "as-json"
    assert "q_proj, v_proj (as in the JSON)" in page.content.decode()
    data = _as_posted(form)
    data["lora_rank"] = "32"
    assert client.post(url, data).status_code == 302
    scenario.refresh_from_db()
    assert scenario.spec["training"]["method"] == {
        "type": "lora", "rank": 32, "targets": ["q_proj", "v_proj"], "dropout": 0.05,
    }  # fmt: skip
    assert scenario.spec["training"]["master_weights"] is False
    data.update(training_method="full")  # dropout belongs to adapters: it goes with them
    assert client.post(url, data).status_code == 302
    scenario.refresh_from_db()
    assert "method" not in scenario.spec["training"]


def test_a_scenario_switched_back_to_the_defaults_loses_the_keys(
    requester: User, project: Project, prices: None
) -> None:
    scenario = _create(requester, project, training_method="lora", optimizer="adamw8bit",
                       offload="optimizer", framework="hf-peft")  # fmt: skip
    url = reverse("planner:scenario-edit", args=[scenario.pk])
    form = _scenario_form(list_price("H100-SXM"), framework="hf-peft")
    assert _client(requester).post(url, form).status_code == 302
    scenario.refresh_from_db()
    assert set(scenario.spec["training"]) == {"tokens", "global_batch_size", "precision"}


# --- Recipes -----------------------------------------------------------------------------------


def test_the_new_scenario_page_offers_the_recipes(requester: User, project: Project) -> None:
    page = _client(requester).get(reverse("planner:scenario-create", args=[project.pk]))
    body = page.content.decode()
    assert 'data-testid="recipe-form"' in body
    for recipe in load_recipes().values():
        assert f'<option value="{recipe.id}">' in body
    assert page.context["form"]["training_method"].value() == "full"  # no recipe: as before
    assert page.context["recipes"][LORA_RECIPE]["fields"]["lora_rank"] == 16
    assert 'id="recipe-data"' in body  # the fields the page's script fills in


def test_a_recipe_fills_the_form_without_scripts(requester: User, project: Project) -> None:
    url = reverse("planner:scenario-create", args=[project.pk])
    page = _client(requester).get(url, {"recipe": LORA_RECIPE})
    form = page.context["form"]
    values = {name: form[name].value() for name in (
        "name", "model_preset", "tokens", "seq_len", "global_batch_size", "training_method",
        "lora_rank", "lora_targets", "optimizer", "accelerator", "num_gpus", "framework",
    )}  # fmt: skip
    assert values == {
        "name": load_recipes()[LORA_RECIPE].name, "model_preset": "llama3-8b", "tokens": "1B",
        "seq_len": 4096, "global_batch_size": 128, "training_method": "lora", "lora_rank": 16,
        "lora_targets": "both", "optimizer": "adamw", "accelerator": "H100-SXM", "num_gpus": 8,
        "framework": "hf-peft",
    }  # fmt: skip
    body = page.content.decode()
    assert f'<option value="{LORA_RECIPE}" selected>' in body
    assert "Source: " + load_recipes()[LORA_RECIPE].source[:40] in body


def test_an_unknown_recipe_gives_the_usual_new_form(requester: User, project: Project) -> None:
    url = reverse("planner:scenario-create", args=[project.pk])
    page = _client(requester).get(url, {"recipe": "llama9-dora"})
    assert page.status_code == 200
    assert page.context["form"].initial == ScenarioForm.initial_for_preset()


def test_the_edit_page_has_no_recipe_picker(
    requester: User, project: Project, prices: None
) -> None:
    scenario = _create(requester, project)
    page = _client(requester).get(reverse("planner:scenario-edit", args=[scenario.pk]))
    assert 'data-testid="recipe-form"' not in page.content.decode()


@pytest.mark.parametrize("recipe_id", list(load_recipes()))
def test_a_recipe_saved_from_the_form_is_the_recipes_scenario(
    requester: User, project: Project, prices: None, recipe_id: str
) -> None:
    recipe = load_recipes()[recipe_id]
    price = book_price(recipe.cluster["accelerator"])  # the demo book prices every recipe
    response = _post_initial(requester, project, recipes_for_page()[recipe_id]["fields"], price)
    assert response.status_code == 302, response.context["form"].errors
    scenario = Scenario.objects.get(name=recipe.name)
    assert validate_scenario(scenario.spec) == validate_scenario(recipe_scenario(recipe))
    assert scenario.model_preset == recipe.model_preset


def test_a_failed_save_keeps_the_recipe_chosen(requester: User, project: Project) -> None:
    recipe = "llama3-8b-qlora-r64-1xl40s"
    initial = recipes_for_page()[recipe]["fields"]
    data = {key: value for key, value in initial.items() if value not in (None, False)}
    data = {key: ("on" if value is True else value) for key, value in data.items()}
    data.update(pue="1.20", utilisation_low="0.900", utilisation_high="1.000", recipe=recipe)
    url = reverse("planner:scenario-create", args=[project.pk])
    response = _client(requester).post(url, data)  # no price chosen: refused
    assert response.status_code == 200
    assert response.context["form"].errors["price"]
    body = response.content.decode()
    assert f'<option value="{recipe}" selected>' in body
    assert f'name="recipe" value="{recipe}"' in body  # sent again with the next save
    assert not Scenario.objects.exists()
