// "What moves the budget": the tornado chart of a run's sensitivity, drawn with the vendored
// Chart.js (static/vendor/chartjs). The figures come from the server in a json_script element
// (id "tornado-data": estimator.core.sensitivity's output); nothing here computes a figure, it
// only draws what the table under the chart lists. Strict CSP: no inline script or style.
(function () {
  "use strict";
  if (typeof window.Chart === "undefined") return;
  const source = document.getElementById("tornado-data");
  const canvas = document.getElementById("tornado-chart");
  if (!source || !canvas) return;
  const data = JSON.parse(source.textContent);
  if (!data || !data.baseline || !Array.isArray(data.inputs) || !data.inputs.length) return;
  const Chart = window.Chart;

  // The low end of each input's range, then the high end (as the PDF's SVG draws them).
  const LOW = "#1f5fbf";
  const HIGH = "#e08a1e";
  const currency = canvas.dataset.currency || "";
  const METRICS = {
    cost: { field: "cost", axis: `Cost (${currency})`, unit: currency, digits: 0 },
    days: { field: "training_days", axis: "Training days (wall clock)", unit: "days", digits: 1 },
  };

  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  Chart.defaults.color = "#5d6d7e";
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;

  const number = (digits) => new Intl.NumberFormat("en-GB", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 2 });
  const tick = new Intl.NumberFormat("en-GB", { maximumFractionDigits: 1 });
  const significant = new Intl.NumberFormat("en-GB", { maximumSignificantDigits: 3 });

  // An input's value by its unit, as planner.svgcharts.tornado_value_text writes it.
  function valueText(value, unit) {
    if (unit === "x") return number(2).format(value) + "×";
    if (unit === "share") return significant.format(value * 100) + " %";
    if (unit === "s") return number(0).format(value) + " s";
    if (unit === "tokens") return compact.format(value) + " tokens";
    if (unit === "per GPU-hour") return `${number(2).format(value)} ${currency}/GPU-h`;
    return `${significant.format(value)} ${unit}`.trim();
  }

  function figureText(value, metric) {
    const m = METRICS[metric];
    return `${number(m.digits).format(value)} ${m.unit}`.trim();
  }

  // The inputs of one figure, largest swing first (the price moves no day: last on days).
  function rows(metric) {
    const field = METRICS[metric].field;
    const swing = (input) => Math.abs(input[field][1] - input[field][0]);
    return data.inputs.map((input, index) => ({ input, index }))
      .sort((a, b) => swing(b.input) - swing(a.input) || a.index - b.index)
      .map((row) => row.input);
  }

  function line(ctx, x1, y1, x2, y2) {
    ctx.beginPath();
    ctx.moveTo(x1, y1);
    ctx.lineTo(x2, y2);
    ctx.stroke();
  }

  // The central case as a dashed vertical line, labelled above the bars.
  const centralLine = {
    id: "centralLine",
    afterDatasetsDraw(chart, args, options) {
      if (options.value == null) return;
      const { ctx, chartArea, scales } = chart;
      const x = scales.x.getPixelForValue(options.value);
      ctx.save();
      ctx.strokeStyle = ctx.fillStyle = "#17202a";
      ctx.lineWidth = 1.5;
      ctx.setLineDash([5, 3]);
      line(ctx, x, chartArea.top, x, chartArea.bottom);
      ctx.restore();
    },
  };

  // The input's value beyond the end of each bar; one text for a row of no width. The ends
  // are placed from the figures (the bar elements order a floating bar's ends their own way).
  const endValues = {
    id: "endValues",
    afterDatasetsDraw(chart, args, options) {
      const inputs = options.inputs || [];
      const { ctx, scales } = chart;
      const rowsDrawn = chart.getDatasetMeta(0).data;
      const base = scales.x.getPixelForValue(options.baseline);
      ctx.save();
      ctx.fillStyle = "#17202a";
      ctx.font = "11px " + Chart.defaults.font.family;
      ctx.textBaseline = "middle";
      inputs.forEach((input, row) => {
        if (!rowsDrawn[row]) return;
        const y = rowsDrawn[row].y;
        const texts = [valueText(input.low_value, input.unit), valueText(input.high_value, input.unit)];
        const figures = input[options.field];
        if (figures.every((value) => value === options.baseline)) {
          ctx.textAlign = "left";
          ctx.fillText(texts[0] === texts[1] ? texts[0] : "no effect", base + 4, y);
          return;
        }
        figures.forEach((value, side) => {
          if (value === options.baseline) return;
          const x = scales.x.getPixelForValue(value);
          const after = value >= options.baseline;
          ctx.textAlign = after ? "left" : "right";
          ctx.fillText(texts[side], x + (after ? 4 : -4), y);
        });
      });
      ctx.restore();
    },
  };

  function config(metric) {
    const m = METRICS[metric];
    const ordered = rows(metric);
    const baseline = data.baseline[m.field];
    const span = Math.max(...ordered.flatMap((input) => input[m.field].map((v) => Math.abs(v - baseline)))) ||
      Math.abs(baseline) * 0.05 || 1;
    const bars = (side, colour, label) => ({
      label,
      data: ordered.map((input) => [baseline, input[m.field][side]]),
      backgroundColor: colour,
      borderWidth: 0,
      grouped: false,
      maxBarThickness: 22,
    });
    return {
      type: "bar",
      data: {
        labels: ordered.map((input) => input.label),
        datasets: [
          bars(0, LOW, "Input at the low end of its range"),
          bars(1, HIGH, "Input at the high end of its range"),
        ],
      },
      plugins: [centralLine, endValues],
      options: {
        indexAxis: "y",
        scales: {
          // Symmetric around the central case, with room for the values beyond the bar ends.
          x: {
            beginAtZero: false,
            suggestedMin: Math.max(0, baseline - span * 1.5),
            suggestedMax: baseline + span * 1.5,
            title: { display: true, text: `${m.axis}; central case ${figureText(baseline, metric)}` },
            ticks: { callback: (value) => (metric === "cost" ? compact.format(value) : tick.format(value)) },
          },
          y: { ticks: { autoSkip: false } },
        },
        plugins: {
          legend: { position: "bottom", labels: { boxWidth: 12 } },
          centralLine: { value: baseline },
          endValues: { inputs: ordered, field: m.field, baseline },
          tooltip: {
            callbacks: {
              label(context) {
                const input = ordered[context.dataIndex];
                const side = context.datasetIndex;
                const value = input[m.field][side];
                const change = baseline ? ` (${value >= baseline ? "+" : ""}${number(1).format((value / baseline - 1) * 100)} %)` : "";
                const at = side === 0 ? input.low_value : input.high_value;
                return `${input.label} at ${valueText(at, input.unit)}: ${figureText(value, metric)}${change}`;
              },
            },
          },
        },
      },
    };
  }

  let metric = "cost";
  const chart = new Chart(canvas, config(metric));
  const buttons = Array.from(document.querySelectorAll("[data-tornado-metric]"));

  function show(wanted) {
    if (!METRICS[wanted]) return;
    metric = wanted;
    const next = config(metric);
    chart.data = next.data;
    chart.options = next.options;
    chart.update();
    canvas.setAttribute("aria-label", canvas.dataset[`label${metric === "cost" ? "Cost" : "Days"}`] || canvas.getAttribute("aria-label"));
    buttons.forEach((button) => {
      const pressed = button.dataset.tornadoMetric === metric;
      button.setAttribute("aria-pressed", String(pressed));
      button.classList.toggle("ghost", !pressed);
    });
  }

  buttons.forEach((button) => {
    button.hidden = false;
    button.addEventListener("click", () => show(button.dataset.tornadoMetric));
  });
})();
