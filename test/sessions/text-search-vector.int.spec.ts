import { randomUUID } from 'node:crypto';
import { parseChunks } from '#core';
import type { EventLog } from '#event-log';
import type pg from 'pg';
import { runMigrations } from '../../apps/ledger/src/database/migrations.js';
import { inTransaction } from '../../apps/ledger/src/database/transaction.js';
import { rebuildProjection } from '../../apps/ledger/src/projections/rebuild.js';
import { handleBatch } from '../../apps/ledger/src/projections/projection.js';
import { blockReadModelsProjection } from '../../apps/ledger/src/sessions/read-models/block-read-models.projection.js';
import { BLOCK_READ_MODEL_TABLES } from '../../apps/ledger/src/sessions/read-models/block-read-model-tables.js';
import { type SessionRepository, type SessionAuthor } from '../../apps/ledger/src/sessions/session-repository.js';
import { assistantMessageCommand, openSessionCommand } from '../support/session-commands.js';
import { sessionLogDatabase, type SessionLogDatabase } from '../support/session-log-database.js';
import { undoMigrationsThrough, type TestDatabase } from '../support/test-database.js';

/**
 * A text block's search vector is written word by word while the block streams (decision 0042).
 * Whatever the cuts between deltas (inside words, inside tags and comments, around astral
 * characters, past the 65,536 code points search covers), its words must be those PostgreSQL finds
 * in the text so far, at the same positions; once the block has ended, exactly the vector of its
 * whole text. Replays, rebuilds and the migration must not add a word twice.
 */
describe('text search vector of a streaming block', () => {
  const author: SessionAuthor = { actor: 'producer', subject: 'producer' };
  let database: TestDatabase;
  let log: EventLog;
  let repository: SessionRepository;
  let pool: pg.Pool;
  let projected = 0n;
  const projection = blockReadModelsProjection();

  let fixture: SessionLogDatabase;

  beforeAll(async () => {
    fixture = await sessionLogDatabase();
    ({ database, log, repository, pool } = fixture);
  });

  afterAll(() => fixture.close());

  /** Projects what the log holds beyond what was projected, as the live runner does: one batch, one transaction. */
  async function project(definition = projection, fromPosition = projected): Promise<void> {
    const { events } = await log.readAllForProjections({ fromPosition, filter: { streamPrefixes: ['session-'] } });
    if (events.length === 0) return;
    const client = await pool.connect();
    try {
      await inTransaction(client, (held) => handleBatch(definition, events, { client: held, eventLog: log }));
    } finally {
      client.release();
    }
    if (definition === projection) projected = events.at(-1)!.position;
  }

  interface SearchRow {
    status: string;
    finished: number;
    search: string;
    /** The vector, weights dropped, against `to_tsvector` of the searched text. */
    whole: boolean;
    /** Its weight-D part against `to_tsvector` of the finished text. */
    finishedWords: boolean;
    exact: boolean;
  }

  async function searchRow(sessionId: string, tenant = 'default'): Promise<SearchRow> {
    const { rows } = await pool.query<SearchRow>(
      `SELECT status, search_finished_chars AS finished, search::text AS search,
         setweight(search, 'D') = to_tsvector('simple', left(content #>> '{}', 65536)) AS whole,
         ts_filter(search, '{d}') = to_tsvector('simple', left(content #>> '{}', search_finished_chars)) AS "finishedWords",
         search = to_tsvector('simple', left(content #>> '{}', 65536)) AS exact
       FROM message_blocks WHERE tenant = $1 AND session_id = $2 AND type = 'main_text'`,
      [tenant, sessionId],
    );
    expect(rows).toHaveLength(1);
    return rows[0];
  }

  /** A new session whose assistant message has a text block open; each write is projected at once, as at fleet load. */
  async function textBlock({ tenant = 'default', sessionId = `s-${randomUUID()}` } = {}) {
    const ref = { tenant, sessionId };
    for (const command of [openSessionCommand(sessionId), assistantMessageCommand('a1')])
      await repository.execute(ref, command, author);
    let seq = 0;
    const append = async (...chunks: Record<string, unknown>[]) => {
      const numbered = parseChunks(chunks.map((chunk) => ({ seq: ++seq, ...chunk })));
      await repository.execute(ref, { type: 'append_chunks', messageId: 'a1', chunks: numbered }, author);
      await project();
    };
    await append({ type: 'llm_response_created' }, { type: 'text.start' });
    const send = (text: string) => append({ type: 'text.delta', text });
    return {
      sessionId,
      send,
      /** Sends the text so far, then requires the row's vector to hold its words; returns the row. */
      delta: async (text: string) => {
        await send(text);
        const row = await searchRow(sessionId, tenant);
        expect(row).toMatchObject({ status: 'streaming', whole: true, finishedWords: true });
        return row;
      },
      /** Ends the block with `text`, then requires exactly the vector of the whole text. */
      end: async (text: string) => {
        await append({ type: 'text.complete', text }, { type: 'block_complete' });
        const searched = Math.min(Array.from(text).length, 65_536);
        expect(await searchRow(sessionId, tenant)).toMatchObject({
          status: 'success',
          exact: true,
          finished: searched,
        });
      },
    };
  }

  /** A reference for text with no markup: the code points before its last blank among the first 65,536. */
  const beforeLastBlank = (text: string) => {
    const searched = Array.from(text).slice(0, 65_536);
    const blanks = [' ', '\t', '\n', '\r'].map((blank) => searched.lastIndexOf(blank));
    return Math.max(0, ...blanks);
  };

  /** A deterministic pseudo-random sequence, so that a failure can be run again. */
  const sequence = (seed: number) => {
    let state = seed >>> 0;
    // A 32-bit linear congruential step in integer arithmetic (a product of doubles would lose its low bits).
    return (below: number) => (state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0) % below;
  };

  /** Cumulative snapshots of `text`, cut at pseudo-random code points, so inside words too; the last is the whole. */
  function snapshotsOf(text: string, cuts: number, seed: number): string[] {
    const points = Array.from(text);
    const next = sequence(seed);
    const ends = new Set<number>([points.length]);
    while (ends.size < Math.min(cuts, points.length)) ends.add(1 + next(points.length));
    return [...ends].sort((a, b) => a - b).map((end) => points.slice(0, end).join(''));
  }

  /** `words` tokens from `vocabulary`, each followed by a blank or, one time in `glued`, by nothing. */
  function text(vocabulary: readonly string[], words: number, seed: number, glued = 0): string {
    const next = sequence(seed);
    const blanks = [' ', ' ', ' ', '\n', '\t', '\r\n', '  '];
    let written = '';
    for (let word = 0; word < words; word++)
      written +=
        vocabulary[next(vocabulary.length)] + (glued > 0 && next(glued) === 0 ? '' : blanks[next(blanks.length)]);
    return written;
  }

  const PROSE = [
    'narwhal',
    'surface',
    'naïve',
    'café',
    '😀',
    '中文字符',
    'a-b',
    'http://q.org/p?x=1',
    'g@h.com',
    '1.5',
    'the',
  ];

  it('holds the words of the text so far at every cut, and exactly the whole text’s vector once the block ends', async () => {
    const whole = text(PROSE, 400, 7) + 'unfinished';
    const block = await textBlock();
    for (const snapshot of snapshotsOf(whole, 60, 11)) {
      const row = await block.delta(snapshot);
      // Finished words are kept, not tokenized again: an implementation that never keeps any would pass the rest.
      expect(row.finished).toBe(beforeLastBlank(snapshot));
    }
    const streaming = await searchRow(block.sessionId);
    expect(streaming.search).toMatch(/'unfinished':\d+A/);

    // A cold projection folds the session again and writes the same rows: no word may be added twice.
    await project(blockReadModelsProjection(), 0n);
    expect(await searchRow(block.sessionId)).toEqual(streaming);
    // A rebuild writes the scratch tables through the same statement, reading the rows it replaces there.
    await rebuildProjection(pool, log, blockReadModelsProjection(), BLOCK_READ_MODEL_TABLES, 3);
    expect(await searchRow(block.sessionId)).toEqual(streaming);

    await block.end(whole);
  });

  it('reads words, tags and comments as PostgreSQL’s parser reads them where the text is cut', async () => {
    // `./x` after a blank is the word `/x`, a path at the start of a text; a tag or comment can hold blanks.
    const MARKUP = ['<div', 'class="a', 'b">', '</div>', '<!--', '-->', './x', '~/y', '.env', 'x<y', 'z>', 'a', '1.5'];
    const MORE = [
      'http://a.b/c',
      'e@x.com',
      '&amp;',
      "'q'",
      '-1',
      '<b>',
      'hi</b>',
      '<a',
      "href='u\\'",
      "v'>",
      '>',
      '<',
    ];
    const TAIL = ['?>', '<?xml', '...', 'v1.2', 'a-b', 'é', '😀', '<_n', 'x:y'];
    // Whole tags and comments that hold blanks (a quote escaped inside one), so that cuts fall inside them.
    const PHRASES = [
      '<span class="hint">',
      '<!-- a > b -->',
      "<a href='u v'>",
      '<_n a b>',
      '<:x y z>',
      'x <y and y> z',
      '<p t="a \\" b > c">',
    ];
    const vocabulary = [...MARKUP, ...MORE, ...TAIL, ...PHRASES, ...PHRASES];
    const streams = Array.from({ length: 40 }, (_, stream) => text(vocabulary, 3 + (stream % 12), 100 + stream, 4));
    // Content the parser skips, a comment that `<!-->` does not close, a tag it gives up and reads again after `<`.
    streams.push(
      'Here is the page:\n```html\n<style>\n  body { color: red; }\n</style>\n<p>Hello world</p>\n```\nDone',
      'Use <!--> as an empty comment, then more text --> and the rest',
      `if (x<y, it's) <a title="q ' > needle here"> end`,
    );
    for (const [stream, whole] of streams.entries()) {
      const block = await textBlock();
      for (const snapshot of snapshotsOf(whole, stream < 40 ? 6 : 20, 200 + stream)) await block.delta(snapshot);
      await block.end(whole);
    }
  });

  it('cuts after closed markup, after a `<` that starts none, and never inside markup still open', async () => {
    const finished = async (...snapshots: string[]) => {
      const block = await textBlock();
      const cuts = [];
      for (const snapshot of snapshots) cuts.push((await block.delta(snapshot)).finished);
      return cuts;
    };
    expect(await finished('alpha beta <a href="x y')).toEqual([10]);
    expect(
      await finished('alpha beta <b>bold</b> gamma delta', 'alpha beta <b>bold</b> gamma delta <a href="x y'),
    ).toEqual([28, 34]);
    // A `,` ends no tag name: the parser reads on after the `<`, and so may the cut.
    expect(await finished('a<b, c d')).toEqual([6]);
    // Dashes end a comment only when two of them come right before its `>`.
    expect(await finished('x <!-- a-b-c > d e')).toEqual([1]);
    // In a quoted value, a backslash takes the quote after it: the value, and so the tag, are still open.
    expect(await finished('x <p t="a \\" b > c d')).toEqual([1]);
  });

  it('keeps the finished words it has (and only while the text extends them)', async () => {
    // A word no text holds, with weight D: kept only if the next write reuses the stored finished words.
    const mark = (sessionId: string) =>
      pool.query(`UPDATE message_blocks SET search = search || 'zzkept:99'::tsvector WHERE session_id = $1`, [
        sessionId,
      ]);
    const extended = await textBlock();
    await extended.delta('narwhals surface');
    await mark(extended.sessionId);
    await extended.send('narwhals surface slowly then');
    expect((await searchRow(extended.sessionId)).search).toMatch(/'zzkept':\d+/);

    const changed = await textBlock();
    await changed.delta('narwhals surface slowly then');
    await mark(changed.sessionId);
    // The finished words are the same, but the blank after them changed: every word is tokenized again.
    await changed.send('narwhals surface slowlyXthen dive');
    const row = await searchRow(changed.sessionId);
    expect(row.search).not.toContain('zzkept');
    expect(row).toMatchObject({ whole: true, finishedWords: true });
  });

  it('counts code points as PostgreSQL does, and stops at the 65,536 that search covers', async () => {
    // Astral characters are two UTF-16 units and one PostgreSQL character; the text passes the limit mid-stream.
    // Words differ: PostgreSQL keeps 255 positions of a word in one vector, and 256 in two it concatenates.
    const word = (index: number) => (index % 3 === 0 ? `😀🐋${index} ` : `whale${index}\t`);
    const whole = Array.from({ length: 15_000 }, (_, index) => word(index)).join('') + 'tail';
    expect(Array.from(whole).length).toBeGreaterThan(65_536);
    const block = await textBlock();
    for (const snapshot of snapshotsOf(whole, 6, 5))
      expect((await block.delta(snapshot)).finished).toBe(beforeLastBlank(snapshot));
    await block.end(whole);
  });

  it('ends with exactly the whole text’s vector when a word repeats past the 255 positions a vector keeps', async () => {
    const whole = 'the '.repeat(300) + 'end';
    const block = await textBlock();
    for (const snapshot of snapshotsOf(whole, 5, 3)) await block.send(snapshot);
    await block.end(whole);
  });

  it('tokenizes again when a delta does not extend the text, and holds a word with no blank after it as unfinished', async () => {
    const block = await textBlock();
    await block.delta('first draft of');
    // As many finished code points and more, but other words: the finished ones must not be kept.
    await block.delta('second draft here');
    await block.delta('final answer');
    expect((await block.delta('final answer: ' + 'x'.repeat(3_000))).finished).toBe(13);
    await block.delta('final answer: ' + 'x'.repeat(3_000) + ' then more');
    // The same text again changes nothing.
    await block.delta('final answer: ' + 'x'.repeat(3_000) + ' then more');
    await block.end('final answer, rewritten at the end');
  });

  it('keeps tenants apart: another tenant’s block under the same session and block ids is not the row replaced', async () => {
    const sessionId = `s-${randomUUID()}`;
    const ours = await textBlock({ sessionId });
    const theirs = await textBlock({ sessionId, tenant: 'globex' });
    await ours.delta('narwhals surface');
    await theirs.delta('walruses dive deep');
    await ours.delta('narwhals surface slowly');
    await theirs.delta('walruses dive deeper still');
    expect((await searchRow(sessionId)).search).toBe("'narwhals':1 'slowly':3A 'surface':2");
    expect((await searchRow(sessionId, 'globex')).search).toBe("'deeper':3 'dive':2 'still':4A 'walruses':1");
  });

  it('converts rows written before migration 1763800000300, and a streaming block goes on from what it had', async () => {
    const streaming = await textBlock();
    await streaming.delta('narwhals surface slow');
    const ended = await textBlock();
    await ended.delta('walruses');
    await ended.end('walruses dive deep');
    // Back to the generated column (undoing the migrations since too), then up again: the rows are those
    // an older ledger wrote.
    await undoMigrationsThrough(database.connectionString, 'TextSearchByWords1763800000300');
    const pending = await pool.query(`SELECT 1 FROM migrations WHERE name = 'TextSearchByWords1763800000300'`);
    expect(pending.rowCount).toBe(0); // the ones undone are pending again
    const generated = await pool.query(
      `SELECT search::text FROM message_blocks WHERE session_id = $1 AND type = 'main_text'`,
      [streaming.sessionId],
    );
    expect(generated.rows).toEqual([{ search: "'narwhals':1 'slow':3 'surface':2" }]);
    await runMigrations(database.connectionString);

    // An ended block keeps its vector; its count of finished code points is not read.
    expect(await searchRow(ended.sessionId)).toMatchObject({ status: 'success', exact: true, finished: 0 });
    const converted = await searchRow(streaming.sessionId);
    expect(converted).toMatchObject({ status: 'streaming', whole: true, finished: 0 });
    expect(converted.search).toBe("'narwhals':1A 'slow':3A 'surface':2A");
    expect((await streaming.delta('narwhals surface slowly, then')).search).toBe(
      "'narwhals':1 'slowly':3 'surface':2 'then':4A",
    );
    await streaming.end('narwhals surface slowly, then dive.');
  });
});
