// Internal: the report page's style sheet and script, inlined into every
// report (no external resources).
#ifndef SACPLAN_REPORTS_SRC_PAGE_ASSETS_H_
#define SACPLAN_REPORTS_SRC_PAGE_ASSETS_H_

namespace sacplan::reports {

inline constexpr const char* kReportCss = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  margin: 0 auto; max-width: 1240px; padding: 12px 20px 40px; color: #222; }
h1 { font-size: 22px; margin: 4px 0 6px; }
h2 { font-size: 18px; margin: 26px 0 6px; border-bottom: 1px solid #ccc; }
.facts { margin: 2px 0; color: #444; }
.facts b { color: #000; }
.verdict { font-size: 17px; font-weight: 600; margin: 8px 0 4px; padding: 8px 12px;
  background: #f3f7fb; border-left: 4px solid #0072B2; }
.note { color: #555; font-size: 13px; margin: 2px 0 6px; }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart text { font-size: 13px; fill: #222; }
svg.chart .tick { font-size: 12px; fill: #444; }
svg.chart .axis-label { font-size: 14px; font-weight: 600; }
svg.chart .grid { stroke: #e6e6e6; stroke-width: 1; }
svg.chart .frame { fill: none; stroke: #888; }
svg.chart .budget-line { stroke: #000; stroke-width: 2; stroke-dasharray: 7 4; }
svg.chart .budget-label { font-weight: 600; }
svg.chart .peak { fill: none; stroke: #000; stroke-width: 2.5; }
svg.chart .peak-label { font-weight: 700; paint-order: stroke; stroke: #fff; stroke-width: 4px; }
svg.chart .frontier-line { fill: none; stroke: #0072B2; stroke-width: 2; }
svg.chart .frontier-point { fill: #0072B2; }
svg.chart .preset { fill: #E69F00; stroke: #000; stroke-width: 1; }
svg.chart .chosen { fill: none; stroke: #D55E00; stroke-width: 3.5; }
svg.chart .chosen-label { font-weight: 700; fill: #D55E00; }
svg.chart .point-label { font-size: 12px; paint-order: stroke; stroke: #fff; stroke-width: 3px; }
svg.chart .run-link { stroke: #777; stroke-width: 1.5; stroke-dasharray: 3 3; }
svg.chart .op-label { font-size: 11px; }
svg.chart .hover-line { stroke: #333; stroke-width: 1; }
svg.chart .hover-text { font-weight: 600; paint-order: stroke; stroke: #fff; stroke-width: 4px; }
.toggles button { font: inherit; font-size: 13px; margin: 0 4px 4px 0; padding: 3px 10px;
  border: 1px solid #888; background: #fff; border-radius: 3px; cursor: pointer; }
.toggles button[aria-pressed="true"] { background: #0072B2; color: #fff; border-color: #0072B2; }
.timeline-wrap[hidden] { display: none; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { padding: 3px 8px; border-bottom: 1px solid #e3e3e3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th { cursor: pointer; background: #f4f4f4; user-select: none; }
table.sortable th[aria-sort="ascending"]::after { content: " \25B2"; }
table.sortable th[aria-sort="descending"]::after { content: " \25BC"; }
#selfcheck { display: none; }
)css";

// Toggles between timelines, hover read-outs on the timelines, sortable
// tables, and a self-check the browser test reads from #selfcheck: chart
// marks, legends and axis titles counted, a sort, the toggles and a hover
// tried, errors caught.
inline constexpr const char* kReportJs = R"js(
(function () {
  'use strict';
  var errors = [];
  var out = document.getElementById('selfcheck');
  function report(extra) {
    var charts = [];
    document.querySelectorAll('svg.chart').forEach(function (svg) {
      var box = svg.getBoundingClientRect();
      charts.push({id: svg.id, kind: svg.getAttribute('data-chart'),
        marks: svg.querySelectorAll('.mark').length,
        legend_items: svg.querySelectorAll('.legend .legend-item').length,
        axis_labels: svg.querySelectorAll('.axis-label').length,
        visible: !svg.closest('[hidden]'), width_px: Math.round(box.width)});
    });
    var result = {errors: errors, charts: charts,
      render_ms: Math.round(performance.now() * 10) / 10};
    for (var k in extra) result[k] = extra[k];
    out.textContent = JSON.stringify(result);
  }
  window.addEventListener('error', function (e) {
    errors.push(String(e.message || e)); report({});
  });

  function setupToggles() {
    var buttons = document.querySelectorAll('.toggles button');
    buttons.forEach(function (button) {
      button.addEventListener('click', function () {
        document.querySelectorAll('.timeline-wrap').forEach(function (wrap) {
          wrap.hidden = wrap.id !== button.getAttribute('data-target');
        });
        buttons.forEach(function (b) { b.setAttribute('aria-pressed', String(b === button)); });
      });
    });
  }

  function setupHover() {
    document.querySelectorAll('svg.chart g.hover').forEach(function (g) {
      var svg = g.ownerSVGElement;
      var slots = JSON.parse(g.getAttribute('data-slots'));
      var left = +g.getAttribute('data-left'), width = +g.getAttribute('data-width');
      var line = g.querySelector('.hover-line'), text = g.querySelector('.hover-text');
      svg.addEventListener('mousemove', function (event) {
        var point = svg.createSVGPoint();
        point.x = event.clientX; point.y = event.clientY;
        var p = point.matrixTransform(svg.getScreenCTM().inverse());
        var i = Math.floor((p.x - left) / width * slots.length);
        if (i < 0 || i >= slots.length) { line.setAttribute('visibility', 'hidden'); return; }
        var s = slots[i];
        line.setAttribute('x1', p.x); line.setAttribute('x2', p.x);
        line.setAttribute('visibility', 'visible');
        text.textContent = s[0] + ' ms: ' + s[1] + ' GB live, ' + s[2];
      });
      svg.addEventListener('mouseleave', function () {
        line.setAttribute('visibility', 'hidden'); text.textContent = '';
      });
    });
  }

  function sortTable(table, column, type, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[column].getAttribute('data-sort');
      var y = b.cells[column].getAttribute('data-sort');
      var c = type === 'num' ? (+x) - (+y) : x.localeCompare(y);
      return descending ? -c : c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  function setupSort() {
    document.querySelectorAll('table.sortable').forEach(function (table) {
      var headers = table.tHead.rows[0].cells;
      Array.prototype.forEach.call(headers, function (th, column) {
        th.addEventListener('click', function () {
          var descending = th.getAttribute('aria-sort') === 'ascending';
          Array.prototype.forEach.call(headers, function (h) { h.removeAttribute('aria-sort'); });
          th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
          sortTable(table, column, th.getAttribute('data-type'), descending);
        });
      });
    });
  }

  // Clicks a numeric header of the op table twice and checks both orders,
  // then restores the original order.
  function checkSort() {
    var table = document.getElementById('op-table');
    if (!table) return 'no op table';
    var th = table.tHead.rows[0].cells[2];
    var original = Array.prototype.slice.call(table.tBodies[0].rows);
    function column() {
      return Array.prototype.map.call(table.tBodies[0].rows, function (r) {
        return +r.cells[2].getAttribute('data-sort');
      });
    }
    function ordered(values, descending) {
      for (var i = 1; i < values.length; ++i) {
        if (descending ? values[i] > values[i - 1] : values[i] < values[i - 1]) return false;
      }
      return true;
    }
    th.click();
    var up = ordered(column(), false);
    th.click();
    var down = ordered(column(), true);
    original.forEach(function (row) { table.tBodies[0].appendChild(row); });
    th.removeAttribute('aria-sort');
    return up && down ? 'ok' : 'wrong order';
  }

  // Clicks every plan button and checks that exactly its timeline shows,
  // then shows the chosen plan's again.
  function checkToggles() {
    var buttons = document.querySelectorAll('.toggles button');
    var ok = buttons.length > 0;
    buttons.forEach(function (button) {
      button.click();
      var shown = document.querySelectorAll('.timeline-wrap:not([hidden])');
      ok = ok && shown.length === 1 && shown[0].id === button.getAttribute('data-target');
    });
    if (buttons.length) buttons[0].click();
    return ok ? 'ok' : 'wrong timeline shown';
  }

  // Moves the pointer over the middle of the shown timeline: its read-out
  // must name a time, the live GB and a place in the step.
  function checkHover() {
    var wrap = document.querySelector('.timeline-wrap:not([hidden]) svg.chart');
    if (!wrap) return 'no timeline';
    var box = wrap.getBoundingClientRect();
    wrap.dispatchEvent(new MouseEvent('mousemove', {
      clientX: box.left + box.width / 2, clientY: box.top + box.height / 2, bubbles: true}));
    var text = wrap.querySelector('.hover-text').textContent;
    wrap.dispatchEvent(new MouseEvent('mouseleave'));
    return /^[0-9.]+ ms: [0-9.]+ GB live, [a-z]+/.test(text) ? 'ok' : 'read-out: ' + text;
  }

  var sort = 'not run', toggles = 'not run', hover = 'not run';
  try {
    setupToggles();
    setupHover();
    setupSort();
    sort = checkSort();
    toggles = checkToggles();
    hover = checkHover();
  } catch (e) {
    errors.push('setup: ' + e.message);
  }
  report({sort: sort, toggles: toggles, hover: hover, timelines: document.querySelectorAll('.timeline-wrap').length});
})();
)js";

}  // namespace sacplan::reports

#endif  // SACPLAN_REPORTS_SRC_PAGE_ASSETS_H_
