import { runInNewContext } from 'node:vm';
import { BatchingQueue } from '#event-log';

class Refused extends Error {}
class Unreachable extends Error {}

/** Doubles numbers in batches; a batch holding a negative number is refused whole, as a store refuses a transaction. */
function doubler(failure: () => Error = () => new Refused('negative')) {
  const batches: number[][] = [];
  const queue = new BatchingQueue<number, number>(
    async (items) => {
      batches.push([...items]);
      if (items.some((item) => item < 0)) throw failure();
      return items.map((item) => item * 2);
    },
    { splitOnFailure: (error) => !(error instanceof Unreachable) },
  );
  return { queue, batches };
}

describe('BatchingQueue', () => {
  it('retries a refused batch in halves until the bad item fails alone; the others get their results', async () => {
    const { queue, batches } = doubler();
    const items = [1, 2, 3, 4, 5, -6, 7, 8, 9];
    const outcomes = await Promise.allSettled(items.map((item) => queue.push(item)));
    const results = outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : 'refused'));
    expect(results).toEqual([2, 4, 6, 8, 10, 'refused', 14, 16, 18]);
    expect((outcomes[5] as PromiseRejectedResult).reason).toBeInstanceOf(Refused);
    // The first push goes alone; the eight behind it form one batch, then its halves, in queue order.
    expect(batches).toEqual([[1], [2, 3, 4, 5, -6, 7, 8, 9], [2, 3, 4, 5], [-6, 7, 8, 9], [-6, 7], [-6], [7], [8, 9]]);
  });

  it("fails the whole batch at once when the failure is not one item's", async () => {
    const { queue, batches } = doubler(() => new Unreachable('down'));
    const outcomes = await Promise.allSettled([1, 2, -3, 4].map((item) => queue.push(item)));
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected']);
    expect(batches).toEqual([[1], [2, -3, 4]]);
  });

  it("rejects with what the batch threw, even an error of another realm (Node's own, under a VM context)", async () => {
    const foreign = runInNewContext('new Error("connect ECONNREFUSED")') as Error;
    expect(foreign instanceof Error).toBe(false);
    const { queue } = doubler(() => foreign);
    await expect(queue.push(-1)).rejects.toBe(foreign);
  });

  describe('gathering a turn before each batch', () => {
    /** Records each batch's size; `gatherTurn` as given. */
    function recorder(gatherTurn: boolean) {
      const sizes: number[] = [];
      const queue = new BatchingQueue<number, number>(
        async (items) => {
          sizes.push(items.length);
          await new Promise((resolve) => setTimeout(resolve, 1));
          return [...items];
        },
        { gatherTurn },
      );
      return { queue, sizes };
    }

    /** `callers` callers, each pushing `rounds` items one after another, as appenders awaiting their commits do. */
    async function closedLoop(queue: BatchingQueue<number, number>, callers: number, rounds: number) {
      await Promise.all(
        Array.from({ length: callers }, async (_, caller) => {
          for (let round = 0; round < rounds; round += 1) expect(await queue.push(caller)).toBe(caller);
        }),
      );
    }

    it('takes every caller a batch woke into the next batch, and pushes of one tick into one batch', async () => {
      const { queue, sizes } = recorder(true);
      await closedLoop(queue, 8, 5);
      expect(sizes).toEqual([8, 8, 8, 8, 8]);
    });

    it('takes pushes made by separate callbacks of one turn (requests read together) into one batch', async () => {
      const { queue, sizes } = recorder(true);
      const pushed = await new Promise<Promise<number>[]>((resolve) => {
        const pushes: Promise<number>[] = [];
        for (let caller = 0; caller < 4; caller += 1)
          setImmediate(() => {
            pushes.push(queue.push(caller));
            if (pushes.length === 4) resolve(pushes);
          });
      });
      expect(await Promise.all(pushed)).toEqual([0, 1, 2, 3]);
      expect(sizes).toEqual([4]);
    });

    it('without it, the first caller a batch woke goes alone and the others wait for the batch after', async () => {
      const { queue, sizes } = recorder(false);
      await closedLoop(queue, 8, 5);
      expect(sizes.slice(0, 4)).toEqual([1, 7, 1, 7]);
    });

    it('still settles every item after a failure split a batch, and stops once the queue is empty', async () => {
      const queue = new BatchingQueue<number, number>(
        async (items) => {
          if (items.some((item) => item < 0)) throw new Refused('negative');
          return items.map((item) => item * 2);
        },
        { gatherTurn: true },
      );
      const outcomes = await Promise.allSettled([1, -2, 3].map((item) => queue.push(item)));
      expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      await new Promise((resolve) => setImmediate(resolve));
      expect(queue.idle).toBe(true);
      expect(await queue.push(4)).toBe(8);
    });
  });
});
