/** A stringOrTranslations as stored: one text, or one per locale (a noun with its singular and plural). */
export type Name = string | Record<string, string | { singular: string; plural: string }>;

/** The display text of a stringOrTranslations (search and sorting use it): English, else the first locale's. */
export function nameText(name: Name): string {
  if (typeof name === 'string') return name;
  const text = name.en ?? Object.values(name)[0] ?? '';
  return typeof text === 'string' ? text : text.singular;
}
