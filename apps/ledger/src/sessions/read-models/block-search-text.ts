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

/**
 * Where a streaming text may be cut (0 if nowhere): before its last blank that is not inside a tag
 * or comment, which can hold blanks. Text tokenized from such a blank on gives the words the whole
 * text gives there; from just after it, it may not (`./configure` after a blank is the word
 * `/configure`). Tags and comments are read as PostgreSQL's parser reads them (`markupEnd`). No cut
 * follows markup still open at the end, a `<script` or `<style` tag (whose content the parser
 * skips), or markup this reading cannot be sure of.
 */
function lastCut(text: string): number {
  const firstLt = text.indexOf('<');
  // Most text has no markup: its last blank is the cut, found from the end.
  if (firstLt < 0) return lastBlankBefore(text, text.length);
  let cut = lastBlankBefore(text, firstLt);
  // A failed tag is read again from just after its `<`, as the parser does; a budget keeps that linear.
  const budget = { steps: 4 * text.length };
  for (let index = firstLt; index < text.length; index++) {
    if (text[index] === '<') {
      const end = markupEnd(text, index, budget);
      if (end === UNSURE) return cut;
      if (end !== NOT_MARKUP) index = end - 1;
    } else if (isBlank(text.charCodeAt(index))) cut = index;
  }
  return cut;
}

/** `markupEnd`: the `<` starts no tag or comment; it is text. */
const NOT_MARKUP = -1;
/** `markupEnd`: the text ends inside the markup, or its reading is not certain here. */
const UNSURE = -2;

const isAsciiLetter = (char: string) => (char >= 'a' && char <= 'z') || (char >= 'A' && char <= 'Z');
const isAsciiDigit = (char: string) => char >= '0' && char <= '9';
/** What PostgreSQL's `isspace` takes in ASCII. */
const isAsciiSpace = (char: string) => ' \t\n\r\v\f'.includes(char);
const isAscii = (char: string) => char <= '\x7f';
/** A tag whose content the parser skips until it closes. */
const SKIPPED_CONTENT = /^<(script|style)$/i;

/**
 * Where the tag or comment that starts at `lt` ends (the index after it), following the states of
 * PostgreSQL's default parser (`wparser_def.c`: `TPS_InTagFirst` to `TPS_InCommentEnd`).
 */
function markupEnd(text: string, lt: number, budget: { steps: number }): number {
  const at = (index: number): string | undefined => text[index];
  const inTag = (from: number): number => {
    for (let index = from; ; index++) {
      if (--budget.steps < 0) return UNSURE;
      const char = at(index);
      if (char === undefined) return UNSURE;
      if (char === '>') return index + 1;
      if (char === '"' || char === "'") {
        // A quoted value ends at its quote; a backslash takes the character after it.
        for (index++; at(index) !== char; index += at(index) === '\\' ? 2 : 1)
          if (at(index) === undefined || --budget.steps < 0) return UNSURE;
      } else if (isAsciiLetter(char) || isAsciiDigit(char) || isAsciiSpace(char) || '=-#/:.&?%~'.includes(char))
        continue;
      else return isAscii(char) ? NOT_MARKUP : UNSURE;
    }
  };
  const tagName = (from: number): number => {
    for (let index = from; ; index++) {
      if (--budget.steps < 0) return UNSURE;
      const char = at(index);
      if (char === undefined) return UNSURE;
      if (char === '/') return at(index + 1) === undefined ? UNSURE : at(index + 1) === '>' ? index + 2 : NOT_MARKUP;
      if (char === '>' || isAsciiSpace(char)) {
        if (SKIPPED_CONTENT.test(text.slice(lt, index))) return UNSURE;
        return char === '>' ? index + 1 : inTag(index + 1);
      }
      if (isAsciiLetter(char) || isAsciiDigit(char) || ':_.-'.includes(char)) continue;
      // Whether a letter beyond ASCII continues a tag name depends on the database's locale.
      return isAscii(char) ? NOT_MARKUP : UNSURE;
    }
  };
  const comment = (from: number): number => {
    let dashes = 0;
    for (let index = from; ; index++) {
      if (--budget.steps < 0) return UNSURE;
      const char = at(index);
      if (char === undefined) return UNSURE;
      if (char === '>' && dashes >= 2) return index + 1;
      dashes = char === '-' ? dashes + 1 : 0;
    }
  };
  const first = at(lt + 1);
  const second = at(lt + 2);
  if (first === undefined) return UNSURE;
  if (first === '!') {
    if (second === 'D' || second === 'd') return inTag(lt + 3);
    if (second !== '-') return second === undefined ? UNSURE : NOT_MARKUP;
    const third = at(lt + 3);
    if (third !== '-') return third === undefined ? UNSURE : NOT_MARKUP;
    return comment(lt + 4);
  }
  if (first === '?') return second === undefined ? UNSURE : second === 'x' ? inTag(lt + 3) : NOT_MARKUP;
  if (first === '/') return second === undefined ? UNSURE : isAsciiLetter(second) ? tagName(lt + 3) : NOT_MARKUP;
  if (isAsciiLetter(first) || first === ':' || first === '_') return tagName(lt + 2);
  return NOT_MARKUP;
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
