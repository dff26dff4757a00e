// A time-series chart (uPlot) any page may use: series of {label, points: [t (ms), value][]}. The canvas is a
// picture for the eye; screen readers get the figure's name and a table of the same numbers (behind a disclosure
// everyone can open). Follows the light/dark scheme; resizes with its container. uPlot is loaded with this module,
// so only the pages that import it (dynamically) pay for it.
import 'uplot/dist/uPlot.min.css';
import './TimeChart.css';
import uPlot from 'uplot';
import { useEffect, useMemo, useRef } from 'preact/hooks';
import { formatNumber, locale, messages } from '../i18n.ts';
import { scheme } from '../shell/theme.ts';

const t = messages(
  { table: 'Show as a table', time: 'Time', noData: 'No data in this period.' },
  { table: 'Toon als tabel', time: 'Tijd', noData: 'Geen gegevens in deze periode.' },
);

export interface TimeSeries {
  label: string;
  points: [number, number][];
}

export interface TimeChartProps {
  /** the chart's accessible name (and visible caption) */
  title: string;
  series: TimeSeries[];
  height?: number;
  /** bars suit counts per period (e.g. per hour) of one series; with several series bars would hide each other, so they are drawn as lines */
  kind?: 'line' | 'bars';
  /** the time format of the table and the axis: 'hour' leaves out seconds */
  precision?: 'hour' | 'second';
}

// colours distinguishable in both schemes and by most colour-blind readers (Okabe–Ito)
const COLOURS = {
  light: ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9'],
  dark: ['#56b4e9', '#e69f00', '#009e73', '#cc79a7', '#f0e442', '#d55e00'],
};

/** The x values of every series, sorted and once each, and each series' value at them (null where it has none). */
export function align(series: TimeSeries[]): uPlot.AlignedData {
  const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const columns = series.map((s) => {
    const col: (number | null)[] = xs.map(() => null);
    for (const [x, v] of s.points) col[index.get(x)!] = v;
    return col;
  });
  return [xs.map((x) => x / 1000), ...columns] as uPlot.AlignedData;
}

/** Half the smallest distance between two x values (seconds), or half an hour when there is one value. */
function halfStep(data: uPlot.AlignedData): number {
  const xs = data[0] as number[];
  let step = Infinity;
  for (let i = 1; i < xs.length; i++) step = Math.min(step, xs[i] - xs[i - 1]);
  return (Number.isFinite(step) ? step : 3600) / 2;
}

function formatTime(ms: number, precision: 'hour' | 'second'): string {
  return new Date(ms).toLocaleString(
    locale.value === 'nl' ? 'nl-NL' : 'en-GB',
    precision === 'hour' ? { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit' } : undefined,
  );
}

export function TimeChart({ title, series, height = 220, kind = 'line', precision = 'second' }: TimeChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const data = useMemo(() => align(series), [series]);
  const dark = scheme.value === 'dark';
  const bars = kind === 'bars' && series.length === 1;
  const empty = data[0].length === 0;

  useEffect(() => {
    const el = box.current;
    if (!el || empty) return;
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue('--fg').trim() || (dark ? '#e6edf3' : '#1b1f24');
    const grid = css.getPropertyValue('--line').trim() || (dark ? '#30363d' : '#d0d7de');
    const colours = COLOURS[dark ? 'dark' : 'light'];
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const barPaths = bars ? uPlot.paths.bars!({ size: [0.8, 40], align: 0 }) : undefined;
    const plot = new uPlot(
      {
        width: Math.max(200, el.clientWidth),
        height,
        legend: { show: true },
        cursor: { drag: { x: true, y: false } },
        axes: [axis, { ...axis, size: 50 }],
        // bars stand on their period: half a step of room at either end, so the first and the last are whole
        scales: { x: bars ? { time: true, range: (_u, min, max) => [min - halfStep(data), max + halfStep(data)] } : { time: true } },
        series: [
          {},
          ...series.map((s, i) => ({
            label: s.label,
            stroke: colours[i % colours.length],
            fill: bars ? `${colours[i % colours.length]}cc` : undefined,
            width: bars ? 1 : 2,
            paths: barPaths,
            points: { show: bars ? false : undefined },
            spanGaps: false,
          })),
        ],
      },
      data,
      el,
    );
    const observer = new ResizeObserver(() => plot.setSize({ width: Math.max(200, el.clientWidth), height }));
    observer.observe(el);
    return () => {
      observer.disconnect();
      plot.destroy();
    };
  }, [data, dark, bars, height, empty]);

  return (
    <figure class="time-chart" aria-label={title}>
      <figcaption>{title}</figcaption>
      {empty ? <p class="muted">{t('noData')}</p> : <div ref={box} class="time-chart-canvas" aria-hidden="true" />}
      {!empty && (
        <details>
          <summary>{t('table')}</summary>
          <div class="time-chart-table">
            <table>
              <caption class="sr-only">{title}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('time')}</th>
                  {series.map((s) => (
                    <th scope="col" key={s.label}>
                      {s.label}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {(data[0] as number[]).map((x, i) => (
                  <tr key={x}>
                    <th scope="row">{formatTime(x * 1000, precision)}</th>
                    {series.map((s, j) => {
                      const v = data[j + 1][i];
                      return <td key={s.label}>{v === null || v === undefined ? '–' : formatNumber(v)}</td>;
                    })}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </details>
      )}
    </figure>
  );
}
