import { partitionPoint } from './partition-point.js';

describe('partitionPoint', () => {
  const positions = [2, 4, 4, 7, 9];

  it.each([
    [0, 0],
    [2, 1],
    [3, 1],
    [4, 3],
    [8, 4],
    [9, 5],
    [10, 5],
  ])('cut at %i: the first item past it is at %i', (cut, index) => {
    expect(partitionPoint(positions, (position) => position <= cut)).toBe(index);
  });

  it('gives 0 for an empty array', () => {
    expect(partitionPoint([], () => true)).toBe(0);
  });
});
