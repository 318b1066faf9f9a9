// The budget request form: show the amount the chosen basis gives, and grey out the
// contingency when the basis is P90 (the service ignores it then). The server computes the
// amount again on save; this is only a preview.
(function () {
  "use strict";
  const form = document.querySelector("[data-testid=budget-form]");
  if (!form) return;
  const p50 = Number(form.dataset.p50);
  const p90 = Number(form.dataset.p90);
  const currency = form.dataset.currency;
  const contingency = form.querySelector("[name=contingency]");
  const preview = form.querySelector("[data-testid=amount-preview]");
  const money = (value) =>
    value.toLocaleString("en-GB", { minimumFractionDigits: 2, maximumFractionDigits: 2 });

  function update() {
    const basis = form.querySelector("[name=basis]:checked");
    const isP90 = basis && basis.value === "p90";
    contingency.disabled = isP90;
    let amount = p90;
    let how = "the P90 cost";
    if (!isP90) {
      const typed = contingency.value.trim() === "" ? p90 - p50 : Number(contingency.value);
      if (!Number.isFinite(typed) || typed < 0) {
        preview.textContent = "";
        return;
      }
      amount = p50 + typed;
      how = `P50 ${money(p50)} + contingency ${money(typed)}`;
    }
    preview.innerHTML = "";
    const strong = document.createElement("strong");
    strong.textContent = `${money(amount)} ${currency}`;
    preview.append("Amount requested: ", strong, ` (${how})`);
  }

  form.addEventListener("change", update);
  contingency.addEventListener("input", update);
  update();
})();
