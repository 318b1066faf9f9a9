// Scenario form: fill the editable fields from a preset or a fine-tuning recipe, show the
// custom-architecture, explicit-layout, LoRA and frozen-layer fields only when they apply,
// and list only the prices of the chosen accelerator. The server builds and validates the
// scenario; this only helps fill the form (without scripts, every field shows and the
// recipe picker reloads the page with the recipe filled in).
(function () {
  "use strict";
  const form = document.getElementById("scenario-form");
  if (!form) return;
  const presets = JSON.parse(document.getElementById("preset-data").textContent);
  const field = (name) => form.elements.namedItem(name);
  const preset = field("model_preset");
  const custom = document.getElementById("custom-model");
  const note = document.getElementById("preset-note");
  const accelerator = field("accelerator");
  const price = field("price");
  const manual = document.getElementById("manual-layout");
  const method = field("training_method");
  const adapterOptions = document.getElementById("adapter-options");
  const fullOptions = document.getElementById("full-options");
  const recipeForm = document.getElementById("recipe-form");
  const recipeData = document.getElementById("recipe-data");
  const recipes = recipeData ? JSON.parse(recipeData.textContent) : {};

  function showPreset(fill) {
    const data = presets[preset.value];
    custom.hidden = Boolean(data);
    if (!data) {
      note.hidden = true;
      return;
    }
    if (fill) {
      field("seq_len").value = data.seq_len;
      field("tokens").value = data.tokens;
      field("global_batch_size").value = data.global_batch_size;
      field("precision").value = data.precision;
      for (const key of ["num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
        "ffn_hidden_size", "vocab_size"]) {
        field(key).value = data.model[key] ?? "";
      }
      field("model_name").value = data.model.name;
      field("gated_mlp").checked = Boolean(data.model.gated_mlp);
      field("tied_embeddings").checked = Boolean(data.model.tied_embeddings);
    }
    note.querySelector("[data-preset-notes]").textContent = data.notes;
    note.querySelector("[data-preset-source]").textContent = "Source: " + data.source;
    note.hidden = false;
  }

  function filterPrices() {
    const wanted = accelerator.value;
    let shown = 0;
    for (const option of price.querySelectorAll("option[data-accelerator]")) {
      const fits = option.dataset.accelerator === wanted || option.dataset.accelerator === "";
      option.hidden = !fits;
      option.disabled = !fits;
      if (fits) shown += 1;
      if (!fits && option.selected) price.value = "";
    }
    for (const group of price.querySelectorAll("optgroup")) {
      group.hidden = !group.querySelector("option:not([hidden])");
    }
    const first = price.querySelector("option[value='']");
    if (first) first.textContent = shown ? `Choose one of ${shown} prices for ${wanted}…` : `No price for ${wanted}: pick another accelerator or ask a pricing admin`;
  }

  function showLayout() {
    const chosen = form.querySelector("input[name=parallelism_mode]:checked");
    manual.hidden = !chosen || chosen.value !== "manual";
  }

  function showMethod() {
    const adapters = method.value === "lora" || method.value === "qlora";
    adapterOptions.hidden = !adapters;
    fullOptions.hidden = adapters;
  }

  function setField(name, value) {
    const element = field(name);
    if (!element) return;
    if (element.type === "checkbox") element.checked = Boolean(value);
    else element.value = value ?? "";  // also a radio group (RadioNodeList)
  }

  // A recipe fills every field it has; the scenario's name only while the user has not
  // typed one of their own.
  let recipeName = "";
  function useRecipe(id) {
    const recipe = recipes[id];
    const note = document.getElementById("recipe-note");
    if (!recipe) {
      note.hidden = true;
      return;
    }
    const name = field("name");
    const keepName = name.value.trim() && name.value !== recipeName;
    for (const [key, value] of Object.entries(recipe.fields)) {
      if (key !== "name" || !keepName) setField(key, value);
    }
    recipeName = recipe.fields.name;
    note.querySelector("[data-recipe-notes]").textContent = recipe.notes;
    note.querySelector("[data-recipe-source]").textContent = "Source: " + recipe.source;
    note.hidden = false;
    showPreset(false);
    filterPrices();
    showLayout();
    showMethod();
  }

  if (recipeForm) {
    const select = recipeForm.elements.namedItem("recipe");
    recipeName = recipes[select.value] ? recipes[select.value].fields.name : "";
    recipeForm.querySelector("[data-testid=use-recipe]").closest(".form-actions").hidden = true;
    select.addEventListener("change", () => {
      useRecipe(select.value);
      const chosen = field("recipe");  // sent with the scenario, so a failed save keeps it
      if (chosen) chosen.value = select.value;
    });
  }
  method.addEventListener("change", showMethod);
  preset.addEventListener("change", () => showPreset(true));
  accelerator.addEventListener("change", filterPrices);
  for (const radio of form.querySelectorAll("input[name=parallelism_mode]")) {
    radio.addEventListener("change", showLayout);
  }
  showPreset(false);
  filterPrices();
  showLayout();
  showMethod();
})();
