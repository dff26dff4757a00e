// A pin group's chart (uPlot): the measurements over the range the page asked the chart route for, with the x axis
// over exactly that range (one point does not stretch it to years), the pin's thresholds as dashed lines, and a
// drag across the chart to zoom: the page then asks the chart route for the new range (the service reduces it),
// so zooming in on a year shows the measurements of the days chosen, not a magnified picture of the year.
// Screen readers get the figure's name and a table of the same numbers. The drawing follows the scheme.
import 'uplot/dist/uPlot.min.css';
import uPlot from 'uplot';
import { useEffect, useMemo, useRef } from 'preact/hooks';
import { align, type TimeSeries } from '../../charts/TimeChart.tsx';
import { formatDate, formatNumber, messages } from '../../i18n.ts';
import { scheme } from '../../shell/theme.ts';

const t = messages(
  { table: 'Show as a table', time: 'Time', noData: 'No measurements in this period.', drag: 'Drag across the chart to zoom in on a period.' },
  { table: 'Toon als tabel', time: 'Tijd', noData: 'Geen metingen in deze periode.', drag: 'Sleep over de grafiek om op een periode in te zoomen.' },
);

const COLOURS = {
  light: ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9'],
  dark: ['#56b4e9', '#e69f00', '#009e73', '#cc79a7', '#f0e442', '#d55e00'],
};

export interface ThresholdLine {
  label: string;
  value: number;
  critical: boolean;
}

export interface ChartProps {
  title: string;
  series: TimeSeries[];
  /** the x axis: [start, end] in ms */
  range: [number, number];
  thresholds?: ThresholdLine[];
  onZoom?: (start: number, end: number) => void;
  height?: number;
}

export function Chart({ title, series, range, thresholds = [], onZoom, height = 240 }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const zoom = useRef(onZoom);
  zoom.current = onZoom;
  const lines: TimeSeries[] = useMemo(
    () =>
      thresholds.map((th) => ({
        label: th.label,
        points: [
          [range[0], th.value],
          [range[1], th.value],
        ],
      })),
    [thresholds, range[0], range[1]],
  );
  const data = useMemo(() => align([...series, ...lines]), [series, lines]);
  const empty = series.every((s) => s.points.length === 0);
  const dark = scheme.value === 'dark';

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue('--fg').trim() || (dark ? '#e6edf3' : '#1b1f24');
    const grid = css.getPropertyValue('--line').trim() || (dark ? '#30363d' : '#d0d7de');
    const warning = css.getPropertyValue('--warning').trim() || '#b26a00';
    const error = css.getPropertyValue('--error').trim() || '#c62828';
    const colours = COLOURS[dark ? 'dark' : 'light'];
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const plot = new uPlot(
      {
        width: Math.max(200, el.clientWidth),
        height,
        legend: { show: true },
        cursor: { drag: { x: true, y: false, setScale: false } },
        axes: [axis, { ...axis, size: 56 }],
        scales: { x: { time: true, range: () => [range[0] / 1000, range[1] / 1000] } },
        series: [
          {},
          ...series.map((s, i) => ({ label: s.label, stroke: colours[i % colours.length], width: 2, spanGaps: false, points: { show: s.points.length < 60 } })),
          ...thresholds.map((th) => ({
            label: th.label,
            stroke: th.critical ? error : warning,
            width: 1,
            dash: [6, 4],
            points: { show: false },
            spanGaps: true,
          })),
        ],
        hooks: {
          setSelect: [
            (u) => {
              if (u.select.width < 5) return;
              const from = u.posToVal(u.select.left, 'x') * 1000;
              const to = u.posToVal(u.select.left + u.select.width, 'x') * 1000;
              u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
              zoom.current?.(Math.round(from), Math.round(to));
            },
          ],
        },
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
  }, [data, dark, height, range[0], range[1]]);

  const xs = data[0] as number[];
  return (
    <figure class="time-chart" aria-label={title}>
      <figcaption>{title}</figcaption>
      {empty ? <p class="muted">{t('noData')}</p> : null}
      <div ref={box} class="time-chart-canvas" aria-hidden="true" />
      {onZoom ? <p class="muted chart-hint">{t('drag')}</p> : null}
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
                {xs.map((x, i) =>
                  series.some((_, j) => data[j + 1][i] !== null && data[j + 1][i] !== undefined) ? (
                    <tr key={x}>
                      <th scope="row">{formatDate(new Date(x * 1000).toISOString())}</th>
                      {series.map((s, j) => {
                        const v = data[j + 1][i];
                        return <td key={s.label}>{v === null || v === undefined ? '–' : formatNumber(v)}</td>;
                      })}
                    </tr>
                  ) : null,
                )}
              </tbody>
            </table>
          </div>
        </details>
      )}
    </figure>
  );
}
