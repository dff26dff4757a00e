// Which groups of rows `npm run bench` runs for a command line (names, --only, --all, the older --x on|off switches),
// and how bench/results.json keeps the rows of groups a run did not touch. No benchmark row runs here.
import { describe, expect, it } from 'vitest';
import { readCli } from '../../scripts/cli.ts';
import { GROUPS, HEADLINE, mergeResults, OPTIONS, selectGroups, type ResultsFile } from '../../bench/run.ts';

/** The groups a command line selects, or its error. */
function select(...args: string[]): string[] | string {
  const outcome = readCli(args, OPTIONS, { usage: '', positionals: true });
  if (outcome.kind !== 'ok') throw new Error(`command line not parsed: ${outcome.kind}`);
  const selection = selectGroups(outcome.parsed);
  return 'error' in selection ? selection.error : selection.groups;
}

describe('bench group selection', () => {
  it('runs the headline when no group is named: HTTPS and CoAP ingest and command delivery', () => {
    expect(HEADLINE).toEqual(['https', 'commands', 'coap']);
    expect(select()).toEqual(HEADLINE);
    expect(select('--seconds', '5', '--coap-rate', '400')).toEqual(HEADLINE);
  });

  it('runs the groups named as arguments or with --only, in run order', () => {
    expect(select('coap', 'https')).toEqual(['https', 'coap']);
    expect(select('--only', 'coap,https')).toEqual(['https', 'coap']);
    expect(select('tiles', '--only', 'dtls')).toEqual(['dtls', 'tiles']);
    expect(select('exports')).toEqual(['exports']);
  });

  it('runs every group with --all, less those switched off', () => {
    expect(select('--all')).toEqual(GROUPS.map((g) => g.name));
    expect(select('--all', '--fleet', 'off', '--commands', '0')).toEqual(GROUPS.map((g) => g.name).filter((g) => g !== 'fleet' && g !== 'commands'));
  });

  it('keeps the older switches: on names a group, off (or 0) leaves it out', () => {
    expect(select('--coap', 'off')).toEqual(['https', 'commands']);
    expect(select('--dtls', 'off')).toEqual(HEADLINE);
    expect(select('--cid', 'on')).toEqual(['cid']);
    expect(select('--kept-sessions', '5000')).toEqual(['kept']);
    expect(select('coap', '--coap', 'off', 'dtls')).toEqual(['dtls']);
    // the full run of docs/speed.md's tables, written before groups had names
    expect(
      select(
        '--seconds',
        '10',
        '--warmup',
        '2',
        '--layouts',
        '1',
        '--webhooks',
        'off',
        '--commands',
        '0',
        '--dtls',
        'on',
        '--coap',
        'on',
        '--coap-closed',
        'on',
        '--embedded',
        'on',
        '--linked',
        'on',
        '--thresholds',
        'on',
      ),
    ).toEqual(['https', 'embedded', 'dtls', 'coap', 'thresholds']);
  });

  it('reads --layouts as the HTTPS groups it names: 1 is https, 2 and 3 are https-split', () => {
    expect(select('--layouts', 'all')).toEqual(['https', 'https-split']);
    expect(select('--layouts', '2')).toEqual(['https-split']);
    expect(select('--layouts', '1,3')).toEqual(['https', 'https-split']);
    expect(select('--layouts', 'none', 'coap', 'https')).toEqual(['coap']);
  });

  it('refuses an unknown group and a selection with nothing left, naming why', () => {
    expect(select('tile')).toMatch(/^unknown group "tile" \(the groups: https, /);
    expect(select('--only', 'coap,nope')).toMatch(/^unknown group "nope"/);
    expect(select('--layouts', 'none', '--commands', '0', '--coap', 'off')).toMatch(/^no group left to run/);
  });
});

describe('bench/results.json after a partial run', () => {
  const row = (group: string, name: string, measuredAt: string) => ({ group, measuredAt, name, value: 1, unit: 'x', target: '' });
  const current: ResultsFile = {
    date: '2026-12-02T10:00:00.000Z',
    node: 'v24',
    cpus: 2,
    seconds: 15,
    devices: 100,
    groups: { coap: { measuredAt: '2026-12-02T10:00:00.000Z', seconds: 200, args: ['coap'] } },
    rows: [],
    commandRows: [],
    dtlsRows: [row('coap', 'coap new', '2026-12-02T10:00:00.000Z')],
  };

  it('keeps the rows of groups not run, with when they were measured, and replaces those run', () => {
    const previous = {
      ...current,
      date: '2026-12-01T08:00:00.000Z',
      groups: {
        dtls: { measuredAt: '2026-12-01T08:00:00.000Z', seconds: 180, args: [] },
        coap: { measuredAt: '2026-12-01T08:05:00.000Z', seconds: 210, args: [] },
        tiles: { measuredAt: '2026-12-01T08:10:00.000Z', seconds: 400, args: [] },
      },
      dtlsRows: [
        row('dtls', 'dtls old', '2026-12-01T08:00:00.000Z'),
        row('coap', 'coap old', '2026-12-01T08:05:00.000Z'),
        row('tiles', 'tiles old', '2026-12-01T08:10:00.000Z'),
      ],
    };
    const merged = mergeResults(previous, current);
    expect(merged.dtlsRows.map((r) => [r.name, r.measuredAt])).toEqual([
      ['dtls old', '2026-12-01T08:00:00.000Z'],
      ['coap new', '2026-12-02T10:00:00.000Z'],
      ['tiles old', '2026-12-01T08:10:00.000Z'],
    ]);
    expect(Object.keys(merged.groups)).toEqual(['dtls', 'coap', 'tiles']);
    expect(merged.groups.coap.measuredAt).toBe('2026-12-02T10:00:00.000Z');
    expect(merged.date).toBe(current.date);
  });

  it('replaces a file written before groups (its rows name no group) or one that is not JSON of ours', () => {
    expect(mergeResults({ date: 'x', rows: [{ name: 'old' }], dtlsRows: [{ name: 'old' }] }, current)).toEqual(current);
    expect(mergeResults(undefined, current)).toEqual(current);
    expect(mergeResults([1, 2], current)).toEqual(current);
  });
});
