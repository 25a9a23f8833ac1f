// Draws a recmix report's charts from the page's JSON (script#report-data) with Chart.js.
// After drawing, each chart's figure carries data-drawn (the points handed to Chart.js) and the
// <html> element data-rendered (charts drawn), data-render-ms and data-errors (script errors
// seen), so that a test, or a curious reader, can tell that the page rendered.
(function () {
  'use strict';
  const root = document.documentElement;
  let errors = 0;
  window.addEventListener('error', function () { root.dataset.errors = String(++errors); });
  root.dataset.errors = '0';
  // Okabe-Ito, then darker tones: told apart by most colour-blind readers.
  const palette = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#000000',
    '#7F3C8D', '#11A579', '#3969AC', '#F2B701', '#E73F74', '#80BA5A', '#E68310', '#008695'];
  const color = (i) => palette[((i % palette.length) + palette.length) % palette.length];
  const withAlpha = (hex, a) => hex + Math.round(a * 255).toString(16).padStart(2, '0');
  const fmt = (v) => (v === null || v === undefined) ? 'n/a' :
    (Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0)) ? v.toExponential(3) : String(+v.toPrecision(6));

  function dataset(spec, s, chart) {
    const c = color(s.color);
    const points = s.x.map((x, i) => ({ x: x, y: s.y[i] }));
    switch (s.style) {
      case 'bar':
        return { type: 'bar', label: s.label, data: s.y, backgroundColor: withAlpha(c, 0.8), borderColor: c };
      case 'range':
      case 'band':  // a stretch of time over every lane (a stopped run): pale, without a border
        return { type: 'bar', label: s.label, backgroundColor: withAlpha(c, s.style === 'band' ? 0.15 : 0.75),
          borderColor: c, borderWidth: s.style === 'band' ? 0 : 1,
          data: s.ranges.map((r) => ({ x: [r[0], r[1]], y: spec.categories[r[2]] })), grouped: false,
          barPercentage: 0.9, categoryPercentage: 1.0 };
      case 'marker':
      case 'failure': {
        const failure = s.style === 'failure';
        const data = spec.categories.length && chart === 'range'
          ? s.x.map((x, i) => ({ x: x, y: spec.categories[s.y[i]] })) : points;
        return { type: 'scatter', label: s.label, data: data, showLine: false,
          pointStyle: failure ? 'crossRot' : 'triangle', pointRadius: 7, pointHoverRadius: 9, borderWidth: 2,
          borderColor: failure ? '#C00000' : c, backgroundColor: failure ? '#C00000' : withAlpha(c, 0.6) };
      }
      case 'points':
        return { type: 'scatter', label: s.label, data: points, showLine: false, pointRadius: 3,
          borderColor: c, backgroundColor: c };
      default:
        return { type: 'line', label: s.label, data: points, borderColor: s.style === 'faint' ? withAlpha(c, 0.4) : c,
          backgroundColor: c, borderWidth: s.style === 'dashed' ? 2 : 1.25, borderDash: s.style === 'dashed' ? [6, 3] : [],
          pointRadius: points.length <= 60 && s.style !== 'dashed' ? 2.5 : 0, spanGaps: false, tension: 0 };
    }
  }

  function draw(spec) {
    const figure = document.getElementById(spec.id);
    if (!figure) return 0;
    const kind = spec.series.some((s) => s.style === 'range') ? 'range'
      : spec.series.some((s) => s.style === 'bar') ? 'bar' : 'xy';
    const datasets = spec.series.map((s) => dataset(spec, s, kind));
    const title = (text) => ({ display: true, text: text, font: { weight: 'bold' } });
    const x = kind === 'bar' ? { type: 'category', title: title(spec.x_label) }
      : { type: 'linear', title: title(spec.x_label) };
    const y = kind === 'range' ? { type: 'category', labels: spec.categories, title: title(spec.y_label), offset: true }
      : { type: spec.y_log ? 'logarithmic' : 'linear', title: title(spec.y_label), beginAtZero: kind === 'bar' || spec.y_zero };
    const config = {
      type: kind === 'xy' ? 'scatter' : 'bar',
      data: { labels: kind === 'bar' ? spec.categories : (kind === 'range' ? spec.categories : undefined), datasets: datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: kind === 'xy' ? false : true,
        normalized: true, indexAxis: kind === 'range' ? 'y' : 'x',
        interaction: { mode: 'nearest', intersect: kind !== 'xy' },
        scales: { x: x, y: y },
        plugins: {
          // Past two dozen series a legend hides the chart: the table beside it names them.
          legend: { display: datasets.length <= 24, position: 'bottom', labels: { usePointStyle: true, boxHeight: 8 } },
          title: { display: false },
          tooltip: { callbacks: { label: function (ctx) {
            const raw = ctx.raw;
            if (raw && Array.isArray(raw.x)) return ctx.dataset.label + ': ' + fmt(raw.x[0]) + ' to ' + fmt(raw.x[1]) + ' (' + fmt(raw.x[1] - raw.x[0]) + ')';
            if (raw && typeof raw === 'object') return ctx.dataset.label + ': (' + fmt(raw.x) + ', ' + (typeof raw.y === 'number' ? fmt(raw.y) : raw.y) + ')';
            return ctx.dataset.label + ': ' + fmt(raw);
          } } }
        }
      }
    };
    if (kind === 'range') {
      config.options.scales.x.min = 0;
      config.options.scales.x.stacked = false;
      figure.querySelector('.canvas-box').style.height = Math.max(160, 40 + 34 * spec.categories.length) + 'px';
    }
    const chart = new Chart(figure.querySelector('canvas'), config);
    const drawn = datasets.reduce((n, d) => n + d.data.length, 0);
    figure.dataset.drawn = String(drawn);
    figure.dataset.width = String(chart.width);
    return 1;
  }

  const start = performance.now();
  const specs = JSON.parse(document.getElementById('report-data').textContent);
  let rendered = 0;
  for (const spec of specs) {
    try {
      rendered += draw(spec);
    } catch (e) {
      root.dataset.errors = String(++errors);
      console.error('chart ' + spec.id + ': ' + e);
    }
  }
  root.dataset.rendered = String(rendered);
  root.dataset.renderMs = (performance.now()).toFixed(0);
  root.dataset.drawMs = (performance.now() - start).toFixed(0);
})();
