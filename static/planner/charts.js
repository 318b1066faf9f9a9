// Charts of the comparison and capacity pages, drawn with the vendored Chart.js
// (static/vendor/chartjs). The data comes from the server through json_script elements;
// nothing here computes a figure, it only draws what the page's table shows.
(function () {
  "use strict";
  if (typeof window.Chart === "undefined") return;
  const Chart = window.Chart;
  // 14 distinct colours: a capacity plan may chart a dozen accelerators at once.
  const PALETTE = [
    "#1f5fbf", "#e08a1e", "#2a9d8f", "#b9529f", "#7a8b99", "#c0392b", "#6c5ce7", "#8fb339",
    "#17becf", "#8c564b", "#f1c40f", "#34495e", "#e377c2", "#16a085",
  ];
  const STACK = ["#1f5fbf", "#7aa7e8", "#e08a1e", "#b9529f", "#2a9d8f", "#8d99ae"];

  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  Chart.defaults.color = "#5d6d7e";
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;

  const number = (digits) => new Intl.NumberFormat("en-GB", { maximumFractionDigits: digits });
  const compact = new Intl.NumberFormat("en-GB", { notation: "compact", maximumFractionDigits: 2 });

  function read(id) {
    const element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  }

  function line(ctx, x1, y1, x2, y2) {
    ctx.beginPath();
    ctx.moveTo(x1, y1);
    ctx.lineTo(x2, y2);
    ctx.stroke();
  }

  // P10-P90 bars in both directions around each point of datasets whose points carry
  // xMin/xMax/yMin/yMax (Chart.js has no error bars of its own).
  const errorBars = {
    id: "errorBars",
    afterDatasetsDraw(chart) {
      const { ctx, scales } = chart;
      chart.data.datasets.forEach((dataset, index) => {
        const meta = chart.getDatasetMeta(index);
        if (meta.hidden || !dataset.errorBars) return;
        ctx.save();
        ctx.strokeStyle = dataset.borderColor;
        ctx.lineWidth = 1.5;
        dataset.data.forEach((point) => {
          const x = scales.x.getPixelForValue(point.x);
          const y = scales.y.getPixelForValue(point.y);
          const x1 = scales.x.getPixelForValue(point.xMin);
          const x2 = scales.x.getPixelForValue(point.xMax);
          const y1 = scales.y.getPixelForValue(point.yMin);
          const y2 = scales.y.getPixelForValue(point.yMax);
          const cap = 5;
          line(ctx, x1, y, x2, y);
          line(ctx, x1, y - cap, x1, y + cap);
          line(ctx, x2, y - cap, x2, y + cap);
          line(ctx, x, y1, x, y2);
          line(ctx, x - cap, y1, x + cap, y1);
          line(ctx, x - cap, y2, x + cap, y2);
        });
        ctx.restore();
      });
    },
  };

  // Dashed marks at each bar's accelerator memory on a horizontal stacked bar chart.
  const capacityMarks = {
    id: "capacityMarks",
    afterDatasetsDraw(chart, args, options) {
      const values = options.values || [];
      if (!values.length) return;
      const { ctx, scales } = chart;
      const meta = chart.getDatasetMeta(0);
      ctx.save();
      ctx.strokeStyle = "#b42318";
      ctx.lineWidth = 2;
      ctx.setLineDash([5, 3]);
      meta.data.forEach((bar, index) => {
        const x = scales.x.getPixelForValue(values[index]);
        const half = (bar.height || 20) / 2 + 4;
        line(ctx, x, bar.y - half, x, bar.y + half);
      });
      ctx.restore();
    },
  };

  // Dashed deadline (vertical) and budget (horizontal) lines on the capacity chart.
  const limitLines = {
    id: "limitLines",
    afterDraw(chart, args, options) {
      const { ctx, chartArea, scales } = chart;
      ctx.save();
      ctx.setLineDash([6, 4]);
      ctx.lineWidth = 1.5;
      ctx.font = "12px " + Chart.defaults.font.family;
      if (options.deadline != null) {
        const x = scales.x.getPixelForValue(options.deadline);
        if (x >= chartArea.left && x <= chartArea.right) {
          ctx.strokeStyle = ctx.fillStyle = "#a66300";
          line(ctx, x, chartArea.top, x, chartArea.bottom);
          // Left of the line when the right would cut the word off at the chart's edge.
          const width = ctx.measureText("deadline").width;
          const left = x + 4 + width > chartArea.right ? x - 4 - width : x + 4;
          ctx.fillText("deadline", left, chartArea.top + 12);
        }
      }
      if (options.budget != null) {
        const y = scales.y.getPixelForValue(options.budget);
        if (y >= chartArea.top && y <= chartArea.bottom) {
          ctx.strokeStyle = ctx.fillStyle = "#b42318";
          line(ctx, chartArea.left, y, chartArea.right, y);
          ctx.fillText("budget", chartArea.right - 50, y - 5);
        }
      }
      ctx.restore();
    },
  };

  function costVersusDays(canvas, data) {
    const days = number(1);
    const money = number(0);
    const datasets = data.points.map((point, index) => {
      const colour = PALETTE[index % PALETTE.length];
      const marks = [point.cheapest ? "cheapest" : "", point.fastest ? "fastest" : ""].filter(Boolean);
      return {
        label: point.name + (marks.length ? ` (${marks.join(", ")})` : ""),
        data: [{
          x: point.days[1], y: point.cost[1],
          xMin: point.days[0], xMax: point.days[2], yMin: point.cost[0], yMax: point.cost[2],
        }],
        backgroundColor: colour,
        borderColor: colour,
        pointRadius: 7,
        pointHoverRadius: 9,
        pointStyle: point.cheapest || point.fastest ? "rectRot" : "circle",
        errorBars: true,
      };
    });
    const all = (key, at) => data.points.map((point) => point[key][at]);
    const pad = (low, high) => (high - low) * 0.12 || Math.abs(high) * 0.1 || 1;
    const [dayLow, dayHigh] = [Math.min(...all("days", 0)), Math.max(...all("days", 2))];
    const [costLow, costHigh] = [Math.min(...all("cost", 0)), Math.max(...all("cost", 2))];
    return new Chart(canvas, {
      type: "scatter",
      data: { datasets },
      plugins: [errorBars],
      options: {
        scales: {
          x: {
            title: { display: true, text: "Training days (P10 – P50 – P90)" },
            suggestedMin: Math.max(0, dayLow - pad(dayLow, dayHigh)),
            suggestedMax: dayHigh + pad(dayLow, dayHigh),
          },
          y: {
            title: { display: true, text: `Cost (${data.currency})` },
            suggestedMin: Math.max(0, costLow - pad(costLow, costHigh)),
            suggestedMax: costHigh + pad(costLow, costHigh),
            ticks: { callback: (value) => compact.format(value) },
          },
        },
        plugins: {
          legend: { position: "bottom" },
          tooltip: {
            callbacks: {
              label(context) {
                const p = context.raw;
                return `${context.dataset.label}: ${days.format(p.x)} days (${days.format(p.xMin)}–${days.format(p.xMax)}), ` +
                  `${money.format(p.y)} ${data.currency} (${money.format(p.yMin)}–${money.format(p.yMax)})`;
              },
            },
          },
        },
      },
    });
  }

  function stackedBars(canvas, block, unit, extra) {
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels: block.labels,
        datasets: block.parts.map((part, index) => ({
          label: part.label,
          data: part.values,
          backgroundColor: STACK[index % STACK.length],
          borderWidth: 0,
          maxBarThickness: 38,
        })),
      },
      plugins: extra ? [extra.plugin] : [],
      options: {
        indexAxis: "y",
        scales: {
          x: { stacked: true, title: { display: true, text: unit }, ...(extra ? extra.x : {}) },
          y: { stacked: true, ticks: { autoSkip: false } },
        },
        plugins: {
          legend: { position: "bottom", labels: { boxWidth: 12 } },
          tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${number(3).format(c.raw)} ${unit.split(" ")[0]}` } },
          ...(extra ? extra.options : {}),
        },
      },
    });
  }

  function comparisonCharts(data) {
    const scatter = document.getElementById("cost-vs-days-chart");
    if (scatter && data.points.length) costVersusDays(scatter, data);
    const step = document.getElementById("step-time-chart");
    if (step) stackedBars(step, data.step, "s per step");
    const memory = document.getElementById("memory-chart");
    if (memory) {
      const top = Math.max(...data.memory.capacity, ...data.memory.labels.map((_, i) =>
        data.memory.parts.reduce((sum, part) => sum + part.values[i], 0)));
      stackedBars(memory, data.memory, "GiB per GPU", {
        plugin: capacityMarks,
        options: { capacityMarks: { values: data.memory.capacity } },
        x: { suggestedMax: top * 1.05 },
      });
    }
  }

  // The ticks of a log axis: 1, 2 and 5 times a power of ten, or finer steps where that
  // gives fewer than four over the range. The axis runs from the tick at or below the smallest
  // value to the one at or above the largest, so that both ends carry a label and no point
  // sits on the edge.
  const LOG_STEPS = [[1, 2, 5], [1, 1.5, 2, 3, 5, 7], [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9]];
  function logTicks(low, high) {
    let ticks = [];
    for (const steps of LOG_STEPS) {
      const candidates = [];
      for (let power = Math.floor(Math.log10(low)) - 1; power <= Math.ceil(Math.log10(high)); power++) {
        for (const step of steps) candidates.push(Number((step * Math.pow(10, power)).toPrecision(12)));
      }
      const start = candidates.filter((value) => value <= low * (1 + 1e-9)).pop();
      const end = candidates.find((value) => value >= high * (1 - 1e-9));
      ticks = candidates.filter((value) => value >= start && value <= end);
      if (ticks.length >= 4) break;
    }
    return ticks;
  }

  // A log axis on those ticks, each labelled by ``text`` (its unit included).
  function logAxis(values, title, text) {
    const positive = values.filter((value) => value > 0);
    const ticks = logTicks(Math.min(...positive), Math.max(...positive));
    return {
      type: "logarithmic",
      min: ticks[0],
      max: ticks[ticks.length - 1],
      title: { display: true, text: title, font: { weight: "bold" } },
      afterBuildTicks: (scale) => { scale.ticks = ticks.map((value) => ({ value })); },
      ticks: { autoSkip: false, maxRotation: 0, callback: (value) => text(value) },
    };
  }

  // 250 k, 1.5 M, 2 B: a figure of a log axis, short and never in exponent notation.
  function shortNumber(value) {
    const units = [[1e9, "B"], [1e6, "M"], [1e3, "k"]];
    for (const [size, unit] of units) {
      if (value >= size) return `${number(2).format(value / size)} ${unit}`;
    }
    return number(2).format(value);
  }

  function capacityChart(canvas, data) {
    const days = number(1);
    const money = number(0);
    const groups = {};
    for (const point of data.points) (groups[point.accelerator] = groups[point.accelerator] || []).push(point);
    const datasets = Object.entries(groups).map(([accelerator, points], index) => {
      const colour = PALETTE[index % PALETTE.length];
      return {
        label: accelerator,
        data: points,
        borderColor: colour,
        backgroundColor: points.map((p) => (p.meets ? colour : "#ffffff")),
        borderWidth: 1.5,
        pointRadius: points.map((p) => (p.meets ? 5 : 4)),
      };
    });
    datasets.unshift({
      type: "line",
      label: "Pareto frontier",
      data: data.frontier,
      borderColor: "#17202a",
      backgroundColor: "#17202a",
      borderWidth: 2,
      pointRadius: 0,
      stepped: false,
    });
    return new Chart(canvas, {
      type: "scatter",
      data: { datasets },
      plugins: [limitLines],
      options: {
        scales: {
          x: logAxis(
            [...data.points.map((p) => p.x), data.deadline_days],
            "Training days (deterministic estimate, log scale)",
            (value) => `${shortNumber(value)} d`,
          ),
          y: logAxis(
            [...data.points.map((p) => p.y), ...(data.budget != null ? [data.budget] : [])],
            `Cost in ${data.currency} (log scale)`,
            (value) => `${shortNumber(value)} ${data.currency}`,
          ),
        },
        plugins: {
          legend: { position: "bottom", labels: { boxWidth: 10, font: { size: 11 } } },
          limitLines: { deadline: data.deadline_days, budget: data.budget },
          tooltip: {
            callbacks: {
              label: (c) => `${c.raw.gpus} × ${c.raw.accelerator} (${c.raw.option}): ${days.format(c.raw.x)} days, ${money.format(c.raw.y)} ${data.currency}${c.raw.meets ? "" : " (misses a limit)"}`,
            },
          },
        },
      },
    });
  }

  const comparison = read("comparison-data");
  if (comparison) comparisonCharts(comparison);
  const capacity = read("capacity-data");
  const capacityCanvas = document.getElementById("capacity-chart");
  if (capacity && capacityCanvas && capacity.points.length) capacityChart(capacityCanvas, capacity);
})();
