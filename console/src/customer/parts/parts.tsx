// Small parts of the customer's pages: the models they read, an issue's level as a badge, and the live issue
// stream (GET /issue/stream) as a hook.
import { useEffect, useRef } from 'preact/hooks';
import { eventStream } from '../../api.ts';
import { messages } from '../../i18n.ts';

export interface PinGroup {
  hashId: string;
  name: string;
  symbolKey: string;
  fields: Record<string, unknown>;
  deviceFields: Record<string, unknown>;
  deviceLinkHashId: string | null;
  level: number;
  mapLayer: string;
  mostRecentMeasurementAt: string | null;
  geometry: unknown;
}
export interface Pin {
  hashId: string;
  pinGroupHashId: string;
  name: string;
  fields: Record<string, unknown>;
  level: number;
}
export interface Issue {
  hashId: string;
  title: string;
  level: 0 | 1 | 2;
  pinGroupHashId: string;
  closedAt: string | null;
  createdAt: string;
  updatedAt: string;
  startAt: string;
  userHashId: string | null;
  typeKey?: string;
}
export interface IssueRow {
  issue: Issue;
  pinGroup: PinGroup;
  subscribed: boolean;
  userName: string | null;
}
export interface ValuePair {
  significand: number;
  orderOfMagnitude: number;
}
export interface Quantity {
  hashId: string;
  name: unknown;
  unit: string;
  color: string;
  defaultOrderOfMagnitude: number;
  defaultLowThreshold?: ValuePair | null;
  defaultHighThreshold?: ValuePair | null;
  defaultCriticallyLowThreshold?: ValuePair | null;
  defaultCriticallyHighThreshold?: ValuePair | null;
}

export const valueOf = (v: ValuePair | null | undefined): number | null => (v ? v.significand * 10 ** v.orderOfMagnitude : null);

const t = messages(
  { level0: 'Minor', level1: 'Serious', level2: 'Critical', noIssue: 'No open issue' },
  { level0: 'Gering', level1: 'Ernstig', level2: 'Kritiek', noIssue: 'Geen open melding' },
);

export const levelName = (level: number): string => (level >= 2 ? t('level2') : level === 1 ? t('level1') : t('level0'));

/** An issue's (or a pin group's worst open issue's) level, in words, never by colour alone. */
export function LevelBadge({ level, place = false }: { level: number; place?: boolean }) {
  return <span class={`level-badge level-${level}`}>{place && level === 0 ? t('noIssue') : levelName(level)}</span>;
}

export interface IssueEvent {
  kind: 'opened' | 'raised' | 'closed' | 'comment';
  issue: Issue;
}

/** Calls `onEvent` for each event of the environment's issue stream while the page is open. */
export function useIssueStream(onEvent: (e: IssueEvent) => void): void {
  const handler = useRef(onEvent);
  handler.current = onEvent;
  useEffect(() => {
    const source = eventStream('/issue/stream');
    source.addEventListener('issue', (e) => {
      try {
        handler.current(JSON.parse((e as MessageEvent<string>).data) as IssueEvent);
      } catch {
        // a malformed event is skipped
      }
    });
    return () => source.close();
  }, []);
}
