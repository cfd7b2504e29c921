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
});
