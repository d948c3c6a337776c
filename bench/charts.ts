/**
 * Charts of the benchmark: bars for the peer comparison, one line chart per growth curve, written
 * as SVG into docs/benchmarks/ by a full run (or wherever `--charts <dir>` says).
 *
 * Why Vega-Lite rendered by `vega`: it renders SVG headless in Node (no browser, no canvas, no
 * native module: `View.toSVG()` with `renderer: 'none'`), about 50 ms a chart; a chart is a
 * declarative JSON spec, so a change of chart shows in review as a change of data or of a field,
 * and the SVG it writes is text that diffs too. Both are dev dependencies only.
 *
 * A section adds a curve in a few lines: build a {@link Curve} (an id, axis titles, points of
 * `{ x, series, y }`), put it in its report's `charts`, and put `curveTable(curve)` in its body
 * for the figures; run.ts renders every chart of every section that ran. For example:
 *
 * ```ts
 * const curve: Curve = {
 *   kind: 'line', id: 'tenant-keys', title: 'Tenant keys: cost per request vs tenants',
 *   x: { title: 'tenants', log: true }, y: { title: 'time per request', unit: 'seconds' },
 *   points: counts.map((n, i) => ({ x: n, series: 'cached lookup', y: perCall[i] })),
 * };
 * return { id, title, body: curveTable(curve), targets, charts: [curve] };
 * ```
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bytesText, table, timeText } from './report.ts';

/** How an axis's values read: seconds are shown as time, bytes as sizes, counts as numbers. */
type Unit = 'seconds' | 'bytes' | 'count' | 'ratio';

interface Axis {
  title: string;
  /** A log scale, for ranges over more than a decade or two. */
  log?: boolean;
  unit?: Unit;
}

/** One measured point of a line: `series` names the line it belongs to. */
export interface CurvePoint {
  x: number;
  series: string;
  y: number;
}

/** A growth curve: one or more lines over the same x axis. */
export interface Curve {
  kind: 'line';
  /** The file name, without `.svg`; unique in a run. */
  id: string;
  title: string;
  x: Axis;
  y: Axis;
  points: CurvePoint[];
}

/** One bar of a grouped bar chart: `group` is the category on the x axis, `series` the colour. */
interface Bar {
  group: string;
  series: string;
  y: number;
}

export interface BarChart {
  kind: 'bar';
  id: string;
  title: string;
  /** The title of the groups' axis. */
  x: { title: string };
  y: Axis;
  bars: Bar[];
  /** The order of the series (their colours and legend); by default as they first appear. */
  seriesOrder?: string[];
}

export type Chart = Curve | BarChart;

/** A value as the tables print it. */
function unitText(value: number, unit: Unit | undefined): string {
  if (unit === 'seconds') return timeText(value);
  if (unit === 'bytes') return bytesText(value);
  if (unit === 'ratio') return value.toFixed(2);
  return Math.round(value).toLocaleString('en-US');
}

/** A curve's points as a Markdown table: one row per x, one column per series. */
export function curveTable(curve: Curve): string {
  const series = [...new Set(curve.points.map((p) => p.series))];
  const xs = [...new Set(curve.points.map((p) => p.x))].sort((a, b) => a - b);
  const rows = xs.map((x) => [
    unitText(x, curve.x.unit),
    ...series.map((s) => {
      const point = curve.points.find((p) => p.x === x && p.series === s);
      return point === undefined ? '–' : unitText(point.y, curve.y.unit);
    }),
  ]);
  return table([curve.x.title, ...series], rows);
}

// Vega-Lite's types are loaded with the module; a spec is plain JSON, typed loosely here.
type Spec = Record<string, unknown>;

const WIDTH = 560;
const HEIGHT = 300;

/** An axis; `values` (the measured x values) puts ticks where the points are, not at powers of ten. */
function axisSpec(axis: Axis, values?: number[]): Spec {
  const format = axis.unit === 'bytes' ? { labelExpr: bytesLabelExpr } : axis.unit === 'seconds' ? { labelExpr: secondsLabelExpr } : {};
  return { title: axis.title, labelAngle: 0, ...format, ...(values === undefined ? {} : { values }) };
}

// Axis labels in the units the tables use (Vega expressions, evaluated by vega).
const bytesLabelExpr =
  "datum.value >= 1048576 ? format(datum.value / 1048576, '~r') + ' MiB' : datum.value >= 1024 ? format(datum.value / 1024, '~r') + ' KiB' : format(datum.value, '~r') + ' B'";
const secondsLabelExpr =
  "datum.value == 0 ? '0' : datum.value >= 1 ? format(datum.value, '~r') + ' s' : datum.value >= 1e-3 ? format(datum.value * 1e3, '~r') + ' ms' : datum.value >= 1e-6 ? format(datum.value * 1e6, '~r') + ' µs' : format(datum.value * 1e9, '~r') + ' ns'";

function scale(axis: Axis): Spec {
  return axis.log ? { type: 'log' } : { zero: axis.unit === 'ratio' ? false : true };
}

/** The Vega-Lite spec of a chart (exported for the tests and for anyone who wants the JSON). */
function chartSpec(chart: Chart): Spec {
  const base = { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', title: chart.title, width: WIDTH, height: HEIGHT, background: 'white' };
  if (chart.kind === 'line') {
    return {
      ...base,
      data: { values: chart.points },
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'x', type: 'quantitative', scale: scale(chart.x), axis: axisSpec(chart.x, [...new Set(chart.points.map((p) => p.x))]) },
        y: { field: 'y', type: 'quantitative', scale: scale(chart.y), axis: axisSpec(chart.y) },
        color: { field: 'series', type: 'nominal', title: null, sort: null, legend: { orient: 'bottom', columns: 2, labelLimit: 400 } },
      },
    };
  }
  const order = chart.seriesOrder ?? [...new Set(chart.bars.map((b) => b.series))];
  const groups = [...new Set(chart.bars.map((b) => b.group))];
  return {
    ...base,
    data: { values: chart.bars },
    mark: 'bar',
    encoding: {
      x: { field: 'group', type: 'nominal', sort: groups, axis: { title: chart.x.title, labelAngle: 0 } },
      xOffset: { field: 'series', type: 'nominal', sort: order },
      // Bars start at zero: a log scale would make their lengths meaningless.
      y: { field: 'y', type: 'quantitative', scale: { zero: true }, axis: axisSpec(chart.y) },
      color: { field: 'series', type: 'nominal', title: null, sort: order, legend: { orient: 'bottom', columns: 2, labelLimit: 400 } },
    },
  };
}

/** Renders a chart to SVG text, in Node, without a browser. */
async function renderSvg(chart: Chart): Promise<string> {
  const [vega, vegaLite] = await Promise.all([import('vega'), import('vega-lite')]);
  const compiled = vegaLite.compile(chartSpec(chart) as unknown as Parameters<typeof vegaLite.compile>[0]);
  const view = new vega.View(vega.parse(compiled.spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Writes every chart as `<dir>/<id>.svg`; returns the paths written. */
export async function writeCharts(charts: readonly Chart[], dir: string): Promise<string[]> {
  const ids = new Set<string>();
  for (const chart of charts) {
    if (!/^[a-z0-9-]+$/.test(chart.id)) throw new TypeError(`a chart id is lower-case letters, digits and dashes; got ${JSON.stringify(chart.id)}`);
    if (ids.has(chart.id)) throw new TypeError(`two charts have the id ${chart.id}`);
    ids.add(chart.id);
  }
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  for (const chart of charts) {
    const path = join(dir, `${chart.id}.svg`);
    writeFileSync(path, `${(await renderSvg(chart)).trim()}\n`);
    written.push(path);
  }
  return written;
}
