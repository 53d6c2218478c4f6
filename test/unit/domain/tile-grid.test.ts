import { describe, expect, it } from 'vitest';
import { InvalidGridError } from '../../../shared/domain/errors.js';
import { tileGrid, windowAt, windows } from '../../../shared/domain/tile-grid.js';

describe('tileGrid', () => {
  it.each([
    [4096, 4096, 512, 8, 8],
    [5120, 5120, 256, 20, 20],
    [1000, 600, 512, 2, 2],
    [512, 512, 512, 1, 1],
    [513, 1, 512, 1, 2],
    [16, 16, 16, 1, 1],
  ])('%i x %i at %i px has %i rows and %i cols', (w, h, t, rows, cols) => {
    const g = tileGrid(w, h, t);
    expect([g.rows, g.cols, g.count]).toEqual([rows, cols, rows * cols]);
  });

  it('clips edge windows to the raster', () => {
    const g = tileGrid(1000, 600, 512);
    expect(windowAt(g, 1, 1)).toEqual({ row: 1, col: 1, x: 512, y: 512, width: 488, height: 88 });
    expect(windowAt(g, 0, 0)).toEqual({ row: 0, col: 0, x: 0, y: 0, width: 512, height: 512 });
  });

  it('covers every pixel exactly once', () => {
    const g = tileGrid(1000, 600, 256);
    let area = 0;
    for (const w of windows(g)) area += w.width * w.height;
    expect(area).toBe(1000 * 600);
  });

  it.each([
    ['a float width', 1000.5, 600, 512],
    ['a zero height', 1000, 0, 512],
    ['a negative tile size', 1000, 600, -512],
    ['a float tile size', 1000, 600, 256.5],
    ['a tile size below 16', 1000, 600, 8],
    ['an absurd side', 5_000_000, 10, 512],
    ['a string', '1000' as unknown as number, 600, 512],
    ['too many windows', 1_000_000, 1_000_000, 16],
  ])('refuses %s', (_what, w, h, t) => {
    expect(() => tileGrid(w, h, t)).toThrow(InvalidGridError);
  });

  it('refuses a window outside the grid', () => {
    expect(() => windowAt(tileGrid(100, 100, 50), 2, 0)).toThrow(InvalidGridError);
  });
});
