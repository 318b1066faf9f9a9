// Scenario form: fill the editable fields from a preset, show the custom-architecture and
// explicit-layout fields only when they apply, and list only the prices of the chosen
// accelerator. The server builds and validates the scenario; this only helps fill the form.
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

  preset.addEventListener("change", () => showPreset(true));
  accelerator.addEventListener("change", filterPrices);
  for (const radio of form.querySelectorAll("input[name=parallelism_mode]")) {
    radio.addEventListener("change", showLayout);
  }
  showPreset(false);
  filterPrices();
  showLayout();
})();
