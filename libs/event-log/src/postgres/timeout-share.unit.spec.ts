import pg from 'pg';
import { TimeoutShare } from './database-failure.js';

const cancelled = () =>
  Object.assign(new pg.DatabaseError('canceling statement due to statement timeout', 0, 'error'), { code: '57014' });

describe('TimeoutShare', () => {
  it('halves after a statement the server cancelled, down to one, and doubles back after each that ran', async () => {
    const share = new TimeoutShare();
    const sizes: number[] = [];
    for (let i = 0; i < 12; i += 1) {
      sizes.push(share.of(1_000));
      await share.run(() => Promise.reject(cancelled())).catch(() => undefined);
    }
    expect(sizes).toEqual([1_000, 500, 250, 125, 62, 31, 15, 7, 3, 1, 1, 1]);
    for (let i = 0; i < 3; i += 1) await share.run(() => Promise.resolve());
    // Far below one event: the share climbs back from where it went, not from the floor of what it gave.
    expect(share.of(1_000)).toBe(1);
    for (let i = 0; i < 24; i += 1) await share.run(() => Promise.resolve());
    expect(share.of(1_000)).toBe(1_000);
  });

  it('keeps its share through failures that are not a cancelled statement, and passes them on', async () => {
    const share = new TimeoutShare();
    const refused = Object.assign(new pg.DatabaseError('duplicate key', 0, 'error'), { code: '23505' });
    await expect(share.run(() => Promise.reject(refused))).rejects.toBe(refused);
    await expect(share.run(() => Promise.reject(new Error('not the database')))).rejects.toThrow('not the database');
    expect(share.of(1_000)).toBe(1_000);
  });
});
