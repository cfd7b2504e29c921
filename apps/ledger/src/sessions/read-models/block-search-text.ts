import type { MessageBlock } from '#core';

/** The first code points of a text block that search covers, so that no row outgrows a tsvector (1 MB). */
const SEARCHED_CODE_POINTS = 65_536;

/**
 * How much of a block's text its search vector covers, in code points as PostgreSQL counts
 * characters (decision 0042). Only text blocks are searched.
 */
export interface SearchedText {
  /**
   * While the block streams, the code points before its last cut (`lastCut`): their words are
   * finished, and the projection tokenizes only the text from the cut on that it has not seen. Once
   * the block stops streaming, all of them.
   */
  readonly search_finished_chars: number;
  /** The code points search covers: the text's first 65,536. */
  readonly searched_chars: number;
}

export function searchedText(block: MessageBlock): SearchedText {
  if (block.type !== 'main_text' || typeof block.content !== 'string')
    return { search_finished_chars: 0, searched_chars: 0 };
  const searched = leadingCodePoints(block.content, SEARCHED_CODE_POINTS);
  const searchedChars = codePointLength(searched);
  const finished = block.status === 'streaming' ? codePointLength(searched.slice(0, lastCut(searched))) : searchedChars;
  return { search_finished_chars: finished, searched_chars: searchedChars };
}

/** Space, tab, line feed, carriage return. */
const isBlank = (code: number) => code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;

/** `<` opens a tag or comment when one of these follows it (or nothing yet), as in PostgreSQL's parser. */
const TAG_AFTER_LT = /[A-Za-z/!?:_]/;

/**
 * Where a streaming text may be cut (0 if nowhere): before its last blank that is not inside what
 * PostgreSQL's parser may read as a tag or comment, which can hold blanks. Text tokenized from such
 * a blank on gives the words the whole text gives there; from just after it, it may not
 * (`./configure` after a blank is the word `/configure`). A tag closes at a `>` outside quotes
 * (where a backslash escapes), a comment (`<!--`) at `-->`. Where the parser gives up on a tag
 * sooner, this holds it open longer, which only cuts less.
 */
function lastCut(text: string): number {
  const firstLt = text.indexOf('<');
  // Most text has no markup: its last blank is the cut, found from the end.
  if (firstLt < 0) return lastBlankBefore(text, text.length);
  let cut = lastBlankBefore(text, firstLt);
  /** What closes the markup the scan is in: `>` for a tag, `-->` for a comment, a quote inside a tag; '' outside. */
  let closer = '';
  for (let index = firstLt; index < text.length; index++) {
    const char = text[index];
    if (closer === '') {
      if (isBlank(text.charCodeAt(index))) cut = index;
      else if (char === '<' && (index + 1 === text.length || TAG_AFTER_LT.test(text[index + 1])))
        closer = text.startsWith('<!--', index) ? '-->' : '>';
    } else if (closer === '-->') {
      if (text.startsWith('-->', index)) [closer, index] = ['', index + 2];
    } else if (closer === '>') {
      if (char === '>') closer = '';
      else if (char === '"' || char === "'") closer = char;
    } else if (char === '\\') index++;
    else if (char === closer) closer = '>';
  }
  return cut;
}

/** The index of the last blank before `end`, 0 if none. */
function lastBlankBefore(text: string, end: number): number {
  const from = end - 1;
  return Math.max(0, ...[' ', '\t', '\n', '\r'].map((blank) => text.lastIndexOf(blank, from)));
}

const SURROGATE = /[\uD800-\uDFFF]/;

const isSurrogatePair = (text: string, index: number) =>
  (text.charCodeAt(index) & 0xfc00) === 0xd800 && (text.charCodeAt(index + 1) & 0xfc00) === 0xdc00;

/** The first `count` code points of `text`. */
function leadingCodePoints(text: string, count: number): string {
  if (text.length <= count) return text;
  let end = 0;
  for (let points = 0; points < count && end < text.length; points++) end += isSurrogatePair(text, end) ? 2 : 1;
  return text.slice(0, end);
}

/** Code points in `text`: a surrogate pair is one character to PostgreSQL. */
function codePointLength(text: string): number {
  if (!SURROGATE.test(text)) return text.length;
  let length = 0;
  for (let index = 0; index < text.length; length++) index += isSurrogatePair(text, index) ? 2 : 1;
  return length;
}
