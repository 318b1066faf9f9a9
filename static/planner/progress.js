// Live progress of queued and running estimation runs: poll each run's status.json about once
// a second, move its bar, and reload the page when every run on it has finished.
(function () {
  "use strict";
  const widgets = Array.from(document.querySelectorAll("[data-run-status-url]"));
  if (!widgets.length) return;
  const INTERVAL_MS = 1000;
  const pending = new Set(widgets);

  function show(widget, data) {
    const bar = widget.querySelector(".progress");
    // A percentage only while a worker is on the run: waiting or lost, it would look frozen.
    // A capacity plan's share of chunks done is known in every state ("determinate").
    const live = data.determinate || data.state === "running" || data.finished;
    const percent = data.percent != null ? data.percent : live ? Math.round((data.progress || 0) * 100) : 0;
    widget.dataset.runState = data.state;
    bar.classList.toggle("indeterminate", !live);
    bar.classList.toggle("failed", data.status === "failed");
    bar.classList.toggle("succeeded", data.status === "succeeded");
    bar.querySelector(".bar").style.width = percent + "%";
    if (live) {
      bar.setAttribute("aria-valuenow", String(percent));
      bar.removeAttribute("aria-valuetext");
    } else {
      bar.removeAttribute("aria-valuenow");
      bar.setAttribute("aria-valuetext", data.state_message);
    }
    const message = widget.querySelector("[data-progress-message]");
    if (message) message.textContent = data.state_message || data.status_label;
    const label = widget.querySelector("[data-progress-percent]");
    if (label) label.textContent = live ? percent + " %" : "";
    const badge = document.querySelector(`[data-run-badge="${data.id}"]`);
    if (badge) {
      badge.className = "status " + data.status;
      badge.dataset.status = data.status;
      badge.textContent = data.status_label;
    }
  }

  async function poll(widget) {
    try {
      const response = await fetch(widget.dataset.runStatusUrl, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        cache: "no-store",
      });
      if (!response.ok) throw new Error(response.statusText);
      const data = await response.json();
      show(widget, data);
      if (data.finished) pending.delete(widget);
    } catch (error) {
      const message = widget.querySelector("[data-progress-message]");
      if (message) message.textContent = "Could not reach the server; retrying…";
    }
  }

  async function tick() {
    await Promise.all(Array.from(pending).map(poll));
    if (pending.size) {
      window.setTimeout(tick, INTERVAL_MS);
    } else {
      window.location.reload();
    }
  }
  window.setTimeout(tick, INTERVAL_MS);
})();
