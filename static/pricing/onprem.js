// On-prem calculator: send the form's figures to the server's calculation endpoint as the user
// types and show the price and breakdown it returns. The maths lives on the server only.
(function () {
  "use strict";
  const form = document.getElementById("onprem-form");
  const picker = document.getElementById("profile-picker");
  if (picker) {
    picker.querySelector("select").addEventListener("change", () => picker.submit());
  }
  // "Save as a new profile" (pricing admins): send what the calculator shows now, copying each
  // figure into the save form's hidden fields as it is sent.
  const save = document.getElementById("onprem-save");
  if (save) {
    save.addEventListener("submit", () => {
      for (const copy of save.querySelectorAll("[data-copy-of]")) {
        const input = document.getElementById(copy.dataset.copyOf);
        if (input) copy.value = input.value.trim();
      }
    });
  }
  if (!form) return;
  const status = document.querySelector("[data-testid=calc-status]");
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  let timer = null;
  let latest = 0;

  function figures() {
    const body = { currency: form.dataset.currency };
    for (const input of form.querySelectorAll("input[type=number]")) {
      body[input.name] = input.value.trim();
    }
    return body;
  }

  function lookup(data, path) {
    return path.split(".").reduce((value, key) => (value == null ? value : value[key]), data);
  }

  function show(data) {
    for (const cell of document.querySelectorAll("[data-cost]")) {
      const value = lookup(data, cell.dataset.cost);
      if (value != null) cell.textContent = value;
    }
  }

  function showErrors(errors) {
    for (const slot of form.querySelectorAll("[data-error-for]")) {
      const messages = errors[slot.dataset.errorFor];
      slot.textContent = messages ? [].concat(messages).join(" ") : "";
    }
  }

  async function recalculate() {
    const request = ++latest;
    status.textContent = "Calculating…";
    try {
      const response = await fetch(form.dataset.calculateUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json" },
        body: JSON.stringify(figures()),
      });
      const data = await response.json();
      if (request !== latest) return; // a newer request is on its way
      if (response.ok) {
        showErrors({});
        show(data);
        form.closest(".onprem").classList.remove("stale");
        status.textContent = "Recalculated on the server.";
      } else {
        showErrors(data);
        form.closest(".onprem").classList.add("stale");
        status.textContent = data.detail || "Check the highlighted figures: the result is out of date.";
      }
    } catch (error) {
      if (request === latest) status.textContent = "Could not reach the server: " + error.message;
    }
  }

  form.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(recalculate, 250);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    recalculate();
  });
})();
