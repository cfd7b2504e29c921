/** Times as the reader's clock shows them; durations in seconds. */
export const formatTime = (iso: string | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`;
}

export const shortHash = (hash: unknown) => (typeof hash === 'string' ? hash.slice(0, 12) : '—');

export const pretty = (value: unknown) => JSON.stringify(value, null, 2);

/**
 * `pretty`, with every character that shows nothing, shows as blank or turns the text around (format characters such
 * as bidi overrides, default-ignorable ones such as zero-width spaces, variation selectors and Hangul fillers, spaces
 * other than U+0020, line and paragraph separators, C1 controls) written as its `\u` escape: the same JSON value,
 * shown as it is, for what a person decides on.
 */
export const visibleJson = (value: unknown) =>
  pretty(value).replace(
    /[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}\u0080-\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/gu,
    (char) => {
      const units = Array.from({ length: char.length }, (_, index) => char.charCodeAt(index));
      return units.map((unit) => `\\u${unit.toString(16).padStart(4, '0')}`).join('');
    },
  );

/** A block's text: as recorded when a string, else its JSON. */
export const textOf = (content: unknown) =>
  typeof content === 'string' ? content : content === undefined || content === null ? '' : JSON.stringify(content);
